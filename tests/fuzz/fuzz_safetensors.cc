// libFuzzer target: the safetensors reader, which resume and --eval-checkpoint run on files from
// disk. Input: the whole file. Every fault must be a CheckpointError; a file that parses must
// hold tensors whose bytes lie inside the file and match their shape and dtype (every byte is
// read, so ASan sees any view that points outside).
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/error.h"
#include "core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto* begin = reinterpret_cast<const std::byte*>(data);
  std::vector<std::byte> bytes(begin, begin + size);
  try {
    murmur::Safetensors st = murmur::Safetensors::parse(std::move(bytes), "fuzz.safetensors");
    std::uint8_t sum = 0;
    for (const murmur::TensorView& t : st.tensors()) {
      if (t.data.size() != static_cast<std::size_t>(t.numel()) * murmur::dtype_size(t.dtype)) std::abort();
      for (std::byte b : t.data) sum ^= static_cast<std::uint8_t>(b);
      if (st.find(t.name) == nullptr) std::abort();
    }
    volatile std::uint8_t keep = sum;
    (void)keep;
    (void)st.names();
  } catch (const murmur::CheckpointError&) {
  }
  return 0;
}
