#include "runtime/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/safetensors.h"

namespace murmur::runtime {
namespace {

constexpr const char* kFormat = "murmur.checkpoint.v1";

std::string encode_rng(const Rng::State& s) {
  return fmt::format("{:016x}{:016x}{:016x}{:016x}", s.s[0], s.s[1], s.s[2], s.s[3]);
}

Rng::State decode_rng(const std::string& text, const std::filesystem::path& file) {
  Rng::State s{};
  if (text.size() != 64) throw CheckpointError(file.string() + ": malformed RNG state");
  for (int i = 0; i < 4; ++i) {
    const char* b = text.data() + 16 * i;
    auto [p, ec] = std::from_chars(b, b + 16, s.s[i], 16);
    if (ec != std::errc() || p != b + 16) {
      throw CheckpointError(file.string() + ": malformed RNG state");
    }
  }
  return s;
}

std::int64_t to_int(const std::map<std::string, std::string>& meta, const std::string& key,
                    const std::filesystem::path& file) {
  auto it = meta.find(key);
  if (it == meta.end()) throw CheckpointError(file.string() + ": metadata lacks " + key);
  std::int64_t v = 0;
  const auto& t = it->second;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size() || v < 0) {
    throw CheckpointError(file.string() + ": metadata " + key + " is not a count: " + t);
  }
  return v;
}

void add_arena(std::vector<TensorView>& out, const Arena& arena) {
  for (std::size_t i = 0; i < arena.size(); ++i) {
    const ArenaEntry& e = arena.entries()[i];
    auto v = arena.view(i);
    out.push_back({e.name, Dtype::kF32, e.shape, std::as_bytes(v)});
  }
}

// Checks that `file` holds `name` as float32 of `numel` elements and returns its bytes.
std::span<const std::byte> expect_f32(const Safetensors& st, const std::string& name,
                                      std::size_t numel, const std::filesystem::path& file) {
  const TensorView* t = st.find(name);
  if (t == nullptr) throw CheckpointError(file.string() + ": missing tensor " + name);
  if (t->dtype != Dtype::kF32 || t->data.size() != numel * sizeof(float)) {
    throw CheckpointError(fmt::format("{}: tensor {} has {} bytes, expected {} float32 values",
                                      file.string(), name, t->data.size(), numel));
  }
  return t->data;
}

}  // namespace

void save_checkpoint(const std::filesystem::path& file, const Arena& params, const Arena& buffers,
                     std::span<const FlatState> flat, const ResumeState& state,
                     const std::string& config_json) {
  std::vector<TensorView> tensors;
  add_arena(tensors, params);
  add_arena(tensors, buffers);
  for (const FlatState& f : flat) {
    tensors.push_back({"murmur." + f.name, Dtype::kF32,
                       {static_cast<std::int64_t>(f.data.size())}, std::as_bytes(f.data)});
  }
  std::map<std::string, std::string> meta = state.extra;
  meta["murmur.format"] = kFormat;
  meta["murmur.step"] = std::to_string(state.step);
  meta["murmur.loader.epoch"] = std::to_string(state.loader.epoch);
  meta["murmur.loader.position"] = std::to_string(state.loader.position);
  meta["murmur.loader.rng"] = encode_rng(state.loader.rng);
  meta["murmur.rng"] = encode_rng(state.rng);
  meta["murmur.config"] = config_json;
  std::filesystem::create_directories(file.parent_path());
  write_safetensors(file, tensors, meta);
}

ResumeState load_checkpoint(const std::filesystem::path& file, Arena& params, Arena& buffers,
                            std::span<FlatState> flat) {
  const Safetensors st = Safetensors::read(file);
  const auto& meta = st.metadata();
  auto fmt_it = meta.find("murmur.format");
  if (fmt_it == meta.end() || fmt_it->second != kFormat) {
    throw CheckpointError(file.string() + ": not a murmur checkpoint (no " + kFormat + ")");
  }
  // Verify everything first, then copy: a bad file must leave the model untouched.
  struct Copy {
    std::span<const std::byte> from;
    std::span<float> to;
  };
  std::vector<Copy> copies;
  for (Arena* arena : {&params, &buffers}) {
    for (std::size_t i = 0; i < arena->size(); ++i) {
      const ArenaEntry& e = arena->entries()[i];
      copies.push_back({expect_f32(st, e.name, e.numel, file), arena->view(i)});
    }
  }
  for (FlatState& f : flat) {
    copies.push_back({expect_f32(st, "murmur." + f.name, f.data.size(), file), f.data});
  }
  ResumeState state;
  state.step = to_int(meta, "murmur.step", file);
  state.loader.epoch = to_int(meta, "murmur.loader.epoch", file);
  state.loader.position = to_int(meta, "murmur.loader.position", file);
  state.loader.rng = decode_rng(meta.at("murmur.loader.rng"), file);
  state.rng = decode_rng(meta.count("murmur.rng") ? meta.at("murmur.rng") : "", file);
  for (const auto& [k, v] : meta) {
    if (k.rfind("murmur.algorithm.", 0) == 0 || k == "murmur.optimizer.steps") state.extra[k] = v;
  }
  if (auto it = meta.find("murmur.config"); it != meta.end()) state.config_json = it->second;
  for (const Copy& c : copies) std::memcpy(c.to.data(), c.from.data(), c.from.size());
  return state;
}

std::filesystem::path periodic_checkpoint_path(const std::filesystem::path& dir,
                                               std::int64_t step) {
  return dir / fmt::format("ckpt-{:010d}.safetensors", step);
}

namespace {
std::vector<std::filesystem::path> periodic_checkpoints(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ckpt-", 0) == 0 && name.size() > 17 &&
        name.substr(name.size() - 12) == ".safetensors") {
      found.push_back(entry.path());
    }
  }
  // Zero-padded steps sort lexicographically; newest first.
  std::sort(found.begin(), found.end(), std::greater<>());
  return found;
}
}  // namespace

std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> result;
  if (std::filesystem::exists(dir / "final.safetensors")) {
    result.push_back(dir / "final.safetensors");
  }
  for (auto& p : periodic_checkpoints(dir)) result.push_back(std::move(p));
  return result;
}

void prune_checkpoints(const std::filesystem::path& dir, int keep) {
  auto found = periodic_checkpoints(dir);
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 0)); i < found.size(); ++i) {
    std::error_code ec;
    std::filesystem::remove(found[i], ec);
  }
}

}  // namespace murmur::runtime
