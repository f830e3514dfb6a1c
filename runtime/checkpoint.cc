#include "runtime/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/safetensors.h"

namespace murmur::runtime {
namespace {

constexpr const char* kFormat = "murmur.checkpoint.v1";  // a resume checkpoint
constexpr const char* kModelFormat = "murmur.model.v1";  // the final model alone

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

std::string format_of(const Safetensors& st) {
  auto it = st.metadata().find("murmur.format");
  return it == st.metadata().end() ? "" : it->second;
}

struct Copy {
  std::span<const std::byte> from;
  std::span<float> to;
};

// The copies that fill the arenas from `st`, every tensor checked (name, dtype, size) first.
std::vector<Copy> model_copies(const Safetensors& st, Arena& params, Arena& buffers,
                               const std::filesystem::path& file) {
  std::vector<Copy> copies;
  for (Arena* arena : {&params, &buffers}) {
    for (std::size_t i = 0; i < arena->size(); ++i) {
      const ArenaEntry& e = arena->entries()[i];
      copies.push_back({expect_f32(st, e.name, e.numel, file), arena->view(i)});
    }
  }
  return copies;
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

void save_model(const std::filesystem::path& file, const Arena& params, const Arena& buffers,
                std::int64_t step, const std::string& config_json) {
  std::vector<TensorView> tensors;
  add_arena(tensors, params);
  add_arena(tensors, buffers);
  // Metadata is free for provenance: load_state_dict never sees it. (The writer adds
  // murmur.crc32c too.)
  const std::map<std::string, std::string> meta{
      {"murmur.format", kModelFormat}, {"murmur.step", std::to_string(step)},
      {"murmur.config", config_json}};
  std::filesystem::create_directories(file.parent_path());
  write_safetensors(file, tensors, meta);
}

ResumeState load_checkpoint(const std::filesystem::path& file, Arena& params, Arena& buffers,
                            std::span<FlatState> flat) {
  const Safetensors st = Safetensors::read(file);
  const auto& meta = st.metadata();
  const std::string format = format_of(st);
  if (format == kModelFormat) {
    // Taking it would restart the optimizer, the algorithm and the data order from nothing at
    // this step, and nobody would know: refuse it, so that the caller goes on to an older
    // resume checkpoint.
    const auto beside = final_resume_path(file.parent_path());
    throw CheckpointError(fmt::format(
        "{}: holds the model alone, without the optimizer, algorithm, data-loader and RNG state "
        "that resuming needs (those are in {} beside it{})",
        file.string(), beside.filename().string(),
        std::filesystem::exists(beside) ? "" : ", which is missing"));
  }
  if (format != kFormat) {
    throw CheckpointError(file.string() + ": not a murmur checkpoint (no " + kFormat + ")");
  }
  // Verify everything first, then copy: a bad file must leave the model untouched.
  std::vector<Copy> copies = model_copies(st, params, buffers, file);
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
    if (k.rfind("murmur.algorithm.", 0) == 0 || k == "murmur.optimizer.steps" ||
        k == "murmur.data.shuffle_origin") state.extra[k] = v;
  }
  if (auto it = meta.find("murmur.config"); it != meta.end()) state.config_json = it->second;
  for (const Copy& c : copies) std::memcpy(c.to.data(), c.from.data(), c.from.size());
  return state;
}

void load_model(const std::filesystem::path& file, Arena& params, Arena& buffers) {
  const Safetensors st = Safetensors::read(file);
  const std::string format = format_of(st);
  if (format != kFormat && format != kModelFormat) {
    throw CheckpointError(fmt::format("{}: not a murmur checkpoint (no {} or {})", file.string(),
                                      kFormat, kModelFormat));
  }
  for (const Copy& c : model_copies(st, params, buffers, file)) {
    std::memcpy(c.to.data(), c.from.data(), c.from.size());
  }
}

std::filesystem::path final_model_path(const std::filesystem::path& dir) {
  return dir / "final.safetensors";
}

std::filesystem::path final_resume_path(const std::filesystem::path& dir) {
  return dir / "final.resume.safetensors";
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
  // The final step's resume state is in final.resume.safetensors. A final.safetensors without it
  // is listed too: a murmur older than that file wrote the resume state into final.safetensors
  // (resumed from as before), and else load_checkpoint refuses it with a message that says why,
  // which the caller logs before it goes on to the newest periodic checkpoint.
  if (std::filesystem::exists(final_resume_path(dir))) {
    result.push_back(final_resume_path(dir));
  } else if (std::filesystem::exists(final_model_path(dir))) {
    result.push_back(final_model_path(dir));
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
