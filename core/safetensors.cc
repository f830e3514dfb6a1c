#include "core/safetensors.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/crc32c.h"
#include "core/error.h"
#include "core/files.h"

namespace murmur {
namespace {

// Past this a header is not a checkpoint of ours but a corrupt length field; the reference
// implementation draws the same line.
constexpr std::uint64_t kMaxHeaderBytes = 100ull << 20;

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;
  std::size_t size;
};
constexpr std::array<DtypeInfo, 6> kDtypes = {{{Dtype::kF32, "F32", 4},
                                               {Dtype::kF64, "F64", 8},
                                               {Dtype::kI32, "I32", 4},
                                               {Dtype::kI64, "I64", 8},
                                               {Dtype::kU8, "U8", 1},
                                               {Dtype::kU64, "U64", 8}}};

const DtypeInfo& info(Dtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d;
  }
  throw CheckpointError("unknown dtype enumerator");
}

// numel * element size, or nullopt if a dimension is negative or the product overflows.
std::optional<std::uint64_t> byte_size(const std::vector<std::int64_t>& shape, std::size_t elem) {
  std::uint64_t n = elem;
  for (std::int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(d)) {
      return std::nullopt;
    }
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

std::string crc_hex(std::uint32_t crc) { return fmt::format("{:08x}", crc); }

}  // namespace

std::string_view dtype_name(Dtype dtype) { return info(dtype).name; }
std::size_t dtype_size(Dtype dtype) { return info(dtype).size; }

std::optional<Dtype> parse_dtype(std::string_view name) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

std::int64_t TensorView::numel() const {
  return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
}

void write_safetensors(const std::filesystem::path& file, std::span<const TensorView> tensors,
                       const std::map<std::string, std::string>& metadata) {
  const std::string where = file.string();
  std::set<std::string_view> seen;
  for (const TensorView& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      throw CheckpointError(fmt::format("{}: invalid tensor name \"{}\"", where, t.name));
    }
    if (!seen.insert(t.name).second) {
      throw CheckpointError(fmt::format("{}: duplicate tensor name \"{}\"", where, t.name));
    }
    const auto expected = byte_size(t.shape, dtype_size(t.dtype));
    if (!expected || *expected != t.data.size()) {
      throw CheckpointError(fmt::format("{}: tensor \"{}\": shape [{}] of {} needs {} bytes, got {}",
                                        where, t.name, fmt::join(t.shape, ", "), dtype_name(t.dtype),
                                        expected ? fmt::format("{}", *expected) : "an impossible number of",
                                        t.data.size()));
    }
  }
  // Larger elements first keeps every tensor aligned to its element size within the data
  // section (which itself starts at a multiple of 8), as the reference writer does.
  std::vector<const TensorView*> order;
  for (const TensorView& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorView* a, const TensorView* b) {
    return dtype_size(a->dtype) > dtype_size(b->dtype);
  });

  std::uint32_t crc = 0;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::uint64_t offset = 0;
  for (const TensorView* t : order) {
    crc = crc32c(t->data, crc);
    header[t->name] = {{"dtype", dtype_name(t->dtype)},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->data.size()}}};
    offset += t->data.size();
  }
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const auto& [key, value] : metadata) meta[key] = value;
  meta[std::string(kCrcMetadataKey)] = crc_hex(crc);
  // __metadata__ first, where the reference implementation puts it.
  nlohmann::ordered_json root = {{"__metadata__", std::move(meta)}};
  root.update(header);
  std::string text = root.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  try {
    AtomicFileWriter out(file);
    std::array<std::byte, 8> size_field{};
    for (int i = 0; i < 8; ++i) size_field[i] = static_cast<std::byte>(text.size() >> (8 * i));
    out.write(size_field);
    out.write(text);
    for (const TensorView* t : order) out.write(t->data);
    out.commit();
  } catch (const IoError& e) {
    throw CheckpointError(fmt::format("cannot write checkpoint: {}", e.what()));
  }
}

Safetensors Safetensors::read(const std::filesystem::path& file) {
  std::vector<std::byte> bytes;
  try {
    bytes = read_file(file);
  } catch (const IoError& e) {
    throw CheckpointError(e.what());
  }
  return parse(std::move(bytes), file.string());
}

Safetensors Safetensors::parse(std::vector<std::byte> bytes, std::string_view origin) {
  auto bad = [&](std::string_view what) { return CheckpointError(fmt::format("{}: {}", origin, what)); };
  if (bytes.size() < 8) throw bad(fmt::format("truncated: {} bytes, less than the 8-byte header size", bytes.size()));
  std::uint64_t header_size = 0;
  for (int i = 0; i < 8; ++i) header_size |= static_cast<std::uint64_t>(bytes[i]) << (8 * i);
  if (header_size > kMaxHeaderBytes) {
    throw bad(fmt::format("header size {} is over the 100 MiB limit (corrupt length field?)", header_size));
  }
  if (header_size > bytes.size() - 8) {
    throw bad(fmt::format("truncated: header says {} header bytes, file has {} after the size field",
                          header_size, bytes.size() - 8));
  }
  const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_begin, header_begin + header_size);
  } catch (const nlohmann::json::exception& e) {
    throw bad(fmt::format("header is not valid JSON: {}", e.what()));
  }
  if (!header.is_object()) throw bad("header is not a JSON object");

  Safetensors st;
  st.origin_ = origin;
  const std::span<const std::byte> data = std::span(bytes).subspan(8 + header_size);
  struct Placed {
    std::uint64_t begin, end;
    TensorView view;
  };
  std::vector<Placed> placed;
  std::uint64_t data_needed = 0;
  for (const auto& item : header.items()) {
    // Named here, not as a structured binding: clang 14 (the fuzz build) cannot capture those.
    const std::string& name = item.key();
    const nlohmann::json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) throw bad("__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) throw bad(fmt::format("__metadata__.{} is not a string", key));
        st.metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    auto bad_tensor = [&](std::string_view what) { return bad(fmt::format("tensor \"{}\": {}", name, what)); };
    if (!entry.is_object()) throw bad_tensor("entry is not an object");
    const auto dtype_it = entry.find("dtype");
    if (dtype_it == entry.end() || !dtype_it->is_string()) throw bad_tensor("missing dtype");
    const auto dtype = parse_dtype(dtype_it->get<std::string>());
    if (!dtype) throw bad_tensor(fmt::format("unsupported dtype {}", dtype_it->dump()));
    const auto shape_it = entry.find("shape");
    const auto offsets_it = entry.find("data_offsets");
    if (shape_it == entry.end() || !shape_it->is_array()) throw bad_tensor("missing shape");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      throw bad_tensor("data_offsets is not a pair [begin, end]");
    }
    TensorView view{name, *dtype, {}, {}};
    for (const auto& d : *shape_it) {
      if (!d.is_number_unsigned()) throw bad_tensor(fmt::format("bad dimension {}", d.dump()));
      view.shape.push_back(static_cast<std::int64_t>(std::min<std::uint64_t>(d.get<std::uint64_t>(), INT64_MAX)));
    }
    for (const auto& o : *offsets_it) {
      if (!o.is_number_unsigned()) throw bad_tensor(fmt::format("bad data offset {}", o.dump()));
    }
    const std::uint64_t begin = (*offsets_it)[0].get<std::uint64_t>();
    const std::uint64_t end = (*offsets_it)[1].get<std::uint64_t>();
    if (begin > end) throw bad_tensor(fmt::format("data_offsets [{}, {}] run backwards", begin, end));
    const auto expected = byte_size(view.shape, dtype_size(*dtype));
    if (!expected || *expected != end - begin) {
      throw bad_tensor(fmt::format("shape [{}] of {} needs {} bytes, data_offsets hold {}",
                                   fmt::join(view.shape, ", "), dtype_name(*dtype),
                                   expected ? fmt::format("{}", *expected) : "too many", end - begin));
    }
    data_needed = std::max(data_needed, end);
    placed.push_back({begin, end, std::move(view)});
  }
  if (data_needed > data.size()) {
    throw bad(fmt::format("truncated: header says {} data bytes, file has {}", data_needed, data.size()));
  }
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (std::size_t i = 1; i < placed.size(); ++i) {
    if (placed[i].begin < placed[i - 1].end) {
      throw bad(fmt::format("tensors \"{}\" and \"{}\" overlap", placed[i - 1].view.name, placed[i].view.name));
    }
  }
  if (const auto it = st.metadata_.find(std::string(kCrcMetadataKey)); it != st.metadata_.end()) {
    const std::string& text = it->second;
    std::uint32_t stored = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), stored, 16);
    if (ec != std::errc() || end != text.data() + text.size()) {
      throw bad(fmt::format("__metadata__.{} is not a hex checksum: \"{}\"", kCrcMetadataKey, text));
    }
    const std::uint32_t actual = crc32c(data);
    if (actual != stored) {
      throw bad(fmt::format("checksum mismatch: data has crc32c {}, header says {} (corrupt file)",
                            crc_hex(actual), text));
    }
  }
  st.bytes_ = std::move(bytes);  // the heap buffer does not move, so spans taken now stay valid
  const std::byte* base = st.bytes_.data() + 8 + header_size;
  for (Placed& p : placed) {
    p.view.data = std::span(base + p.begin, p.end - p.begin);
    st.index_.emplace(p.view.name, st.tensors_.size());
    st.tensors_.push_back(std::move(p.view));
  }
  return st;
}

std::vector<std::string> Safetensors::names() const {
  std::vector<std::string> out;
  for (const TensorView& t : tensors_) out.push_back(t.name);
  return out;
}

const TensorView* Safetensors::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const TensorView& Safetensors::at(std::string_view name) const {
  if (const TensorView* t = find(name)) return *t;
  throw CheckpointError(fmt::format("{}: no tensor named \"{}\"", origin_, name));
}

}  // namespace murmur
