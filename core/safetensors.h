// Checkpoints in the HuggingFace safetensors format, byte for byte: an 8-byte little-endian
// header length N, N bytes of JSON ({"name": {"dtype", "shape", "data_offsets"}, ...,
// "__metadata__": {string: string}}) padded with spaces to a multiple of 8, then the raw
// little-endian tensor data. numpy, PyTorch and the `safetensors` package read what we write.
// A Safetensors object owns its bytes and is immutable after read(): safe to share across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace murmur {

enum class Dtype { kF32, kF64, kI32, kI64, kU8, kU64 };

// "F32", "F64", "I32", "I64", "U8", "U64": the format's own spellings.
std::string_view dtype_name(Dtype dtype);
std::size_t dtype_size(Dtype dtype);
std::optional<Dtype> parse_dtype(std::string_view name);

// One tensor: a name, a type, a shape and its bytes (not owned).
struct TensorView {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;

  std::int64_t numel() const;
};

// The metadata key under which write_safetensors stores the CRC32C of the data section
// (8 lowercase hex digits); read() checks it when present.
inline constexpr std::string_view kCrcMetadataKey = "murmur.crc32c";

// Writes `tensors` atomically (core/files.h). Tensors are laid out by decreasing element size,
// then in the given order, so each one starts aligned to its element size.
// Throws CheckpointError for a duplicate or empty name, or data whose size is not
// numel * dtype_size; CheckpointError naming the file if it cannot be written.
void write_safetensors(const std::filesystem::path& file, std::span<const TensorView> tensors,
                       const std::map<std::string, std::string>& metadata = {});

class Safetensors {
 public:
  // Reads and validates a whole file before trusting any of it: sizes, JSON, dtypes, offsets
  // (in bounds, no overlap, size = numel * dtype size) and the CRC when present.
  // Throws CheckpointError("<file>: <what is wrong>").
  static Safetensors read(const std::filesystem::path& file);
  // The same from bytes already in memory; `origin` names them in messages.
  static Safetensors parse(std::vector<std::byte> bytes, std::string_view origin);

  Safetensors(Safetensors&&) = default;  // moving the byte vector keeps the views valid
  Safetensors& operator=(Safetensors&&) = default;
  Safetensors(const Safetensors&) = delete;
  Safetensors& operator=(const Safetensors&) = delete;

  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Tensor names in the order of their data in the file.
  std::vector<std::string> names() const;
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // nullptr if there is no tensor of that name.
  const TensorView* find(std::string_view name) const;
  // Throws CheckpointError naming the file and the tensor if there is none.
  const TensorView& at(std::string_view name) const;

 private:
  Safetensors() = default;

  std::string origin_;
  std::vector<std::byte> bytes_;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
};

}  // namespace murmur
