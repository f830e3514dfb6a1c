// safetensors: round trip, layout, interoperability with a by-hand numpy reader and writer,
// and one CheckpointError per kind of damage.
#include <stdlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/safetensors.h"
#include "tests/python.h"
#include "tests/skip.h"

namespace fs = std::filesystem;
using murmur::Dtype;
using murmur::Safetensors;
using murmur::TensorView;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "murmur_st_test_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
};

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
  return std::as_bytes(std::span(v));
}

// A file with a hand-made header: the size field, the JSON as given, then `data`.
void write_raw(const fs::path& file, const std::string& json, const std::vector<std::byte>& data,
               std::uint64_t size_field) {
  std::vector<std::byte> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<std::byte>(size_field >> (8 * i));
  for (char c : json) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), data.begin(), data.end());
  murmur::atomic_write_file(file, out);
}
void write_raw(const fs::path& file, const std::string& json, const std::vector<std::byte>& data) {
  write_raw(file, json, data, json.size());
}

std::string read_error(const fs::path& file) {
  try {
    Safetensors::read(file);
  } catch (const murmur::CheckpointError& e) {
    return e.what();
  }
  return "(no CheckpointError)";
}

bool have_numpy() { return murmur::test_python::can_import("numpy"); }

}  // namespace

TEST_CASE("safetensors round trip keeps names, dtypes, shapes, bytes and metadata", "[safetensors]") {
  TempDir dir;
  const std::vector<float> w = {1.5f, -2.f, 3.25f, 4.f, 5.f, 6.f};
  const std::vector<double> d = {1e-300, -0.1};
  const std::vector<std::int32_t> i32 = {-1, 2, 3};
  const std::vector<std::int64_t> i64 = {-(std::int64_t{1} << 40)};
  const std::vector<std::uint8_t> u8 = {1, 2, 3, 4, 5};
  const std::vector<std::uint64_t> u64 = {~0ull, 7};
  const std::vector<float> scalar = {42.f};
  const std::vector<float> empty;
  const std::vector<TensorView> tensors = {
      {"bytes", Dtype::kU8, {5}, bytes_of(u8)},
      {"layer.0.weight", Dtype::kF32, {2, 3}, bytes_of(w)},
      {"d", Dtype::kF64, {2}, bytes_of(d)},
      {"i32", Dtype::kI32, {3}, bytes_of(i32)},
      {"i64", Dtype::kI64, {1}, bytes_of(i64)},
      {"u64", Dtype::kU64, {2}, bytes_of(u64)},
      {"scalar", Dtype::kF32, {}, bytes_of(scalar)},
      {"empty", Dtype::kF32, {0, 4}, bytes_of(empty)},
  };
  const fs::path file = dir.path / "ckpt.safetensors";
  murmur::write_safetensors(file, tensors, {{"step", "1200"}, {"format", "pt"}});

  const auto bytes = murmur::read_file(file);
  std::uint64_t header_size = 0;
  std::memcpy(&header_size, bytes.data(), 8);
  CHECK(header_size % 8 == 0);

  Safetensors st = Safetensors::read(file);
  CHECK(st.metadata().at("step") == "1200");
  CHECK(st.metadata().at("format") == "pt");
  CHECK(st.metadata().count("murmur.crc32c") == 1);
  CHECK(st.tensors().size() == tensors.size());
  for (const TensorView& t : tensors) {
    const TensorView& r = st.at(t.name);
    INFO(t.name);
    CHECK(r.dtype == t.dtype);
    CHECK(r.shape == t.shape);
    CHECK(r.numel() == t.numel());
    REQUIRE(r.data.size() == t.data.size());
    CHECK((t.data.empty() || std::memcmp(r.data.data(), t.data.data(), t.data.size()) == 0));
    // Larger elements first: every tensor is aligned to its element size.
    const auto offset = static_cast<std::size_t>(r.data.data() - st.tensors().front().data.data());
    CHECK(offset % murmur::dtype_size(r.dtype) == 0);
  }
  CHECK(st.find("missing") == nullptr);
  CHECK_THROWS_WITH(st.at("missing"), Catch::Contains("ckpt.safetensors: no tensor named \"missing\""));
  CHECK(st.names().back() == "bytes");  // U8 laid out last

  // The object moves without invalidating its views.
  Safetensors moved = std::move(st);
  CHECK(std::memcmp(moved.at("layer.0.weight").data.data(), w.data(), 24) == 0);
}

TEST_CASE("write_safetensors rejects inconsistent input", "[safetensors]") {
  TempDir dir;
  const std::vector<float> w = {1, 2, 3};
  const std::vector<TensorView> wrong_size = {{"w", Dtype::kF32, {2, 2}, bytes_of(w)}};
  CHECK_THROWS_WITH(murmur::write_safetensors(dir.path / "a", wrong_size),
                    Catch::Contains("shape [2, 2] of F32 needs 16 bytes, got 12"));
  const std::vector<TensorView> dup = {{"w", Dtype::kF32, {3}, bytes_of(w)}, {"w", Dtype::kF32, {3}, bytes_of(w)}};
  CHECK_THROWS_WITH(murmur::write_safetensors(dir.path / "a", dup), Catch::Contains("duplicate tensor name"));
  CHECK_THROWS_AS(murmur::write_safetensors(dir.path / "no" / "dir", {}), murmur::CheckpointError);
  CHECK_FALSE(fs::exists(dir.path / "a"));
}

TEST_CASE("each kind of damage is a CheckpointError naming the file", "[safetensors]") {
  TempDir dir;
  const fs::path f = dir.path / "ckpt.safetensors";
  const std::vector<float> w(25, 1.0f);
  const std::vector<TensorView> one = {{"w", Dtype::kF32, {25}, bytes_of(w)}};
  murmur::write_safetensors(f, one);
  const std::vector<std::byte> good = murmur::read_file(f);
  REQUIRE_NOTHROW(Safetensors::read(f));

  SECTION("missing file") { CHECK(read_error(dir.path / "nope").find("No such file") != std::string::npos); }
  SECTION("shorter than the size field") {
    murmur::atomic_write_file(f, std::span(good).first(5));
    CHECK(read_error(f) == f.string() + ": truncated: 5 bytes, less than the 8-byte header size");
  }
  SECTION("truncated data") {
    murmur::atomic_write_file(f, std::span(good).first(good.size() - 10));
    CHECK(read_error(f) == f.string() + ": truncated: header says 100 data bytes, file has 90");
  }
  SECTION("header length past the end") {
    write_raw(f, "{}", {}, 4096);
    CHECK(read_error(f) == f.string() + ": truncated: header says 4096 header bytes, file has 2 after the size field");
  }
  SECTION("absurd header length") {
    write_raw(f, "{}", {}, 1ull << 40);
    CHECK(read_error(f).find("over the 100 MiB limit") != std::string::npos);
  }
  SECTION("garbage JSON") {
    write_raw(f, "{\"w\": [1, 2,,", {});
    CHECK(read_error(f).find(f.string() + ": header is not valid JSON") == 0);
  }
  SECTION("offsets out of range") {
    write_raw(f, R"({"w": {"dtype": "F32", "shape": [100], "data_offsets": [0, 400]}})",
              std::vector<std::byte>(100));
    CHECK(read_error(f) == f.string() + ": truncated: header says 400 data bytes, file has 100");
  }
  SECTION("size not numel * dtype size") {
    write_raw(f, R"({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})", std::vector<std::byte>(8));
    CHECK(read_error(f) == f.string() + ": tensor \"w\": shape [3] of F32 needs 12 bytes, data_offsets hold 8");
  }
  SECTION("overlapping tensors") {
    write_raw(f,
              R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
              R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
              std::vector<std::byte>(12));
    CHECK(read_error(f) == f.string() + ": tensors \"a\" and \"b\" overlap");
  }
  SECTION("unknown dtype, negative dimension, backwards offsets") {
    write_raw(f, R"({"w": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}})", std::vector<std::byte>(2));
    CHECK(read_error(f).find("unsupported dtype \"BF16\"") != std::string::npos);
    write_raw(f, R"({"w": {"dtype": "U8", "shape": [-1], "data_offsets": [0, 2]}})", std::vector<std::byte>(2));
    CHECK(read_error(f).find("bad dimension -1") != std::string::npos);
    write_raw(f, R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [2, 1]}})", std::vector<std::byte>(2));
    CHECK(read_error(f).find("run backwards") != std::string::npos);
  }
  SECTION("a flipped data byte") {
    std::vector<std::byte> bad = good;
    bad[bad.size() - 3] ^= std::byte{0x01};
    murmur::atomic_write_file(f, bad);
    CHECK(read_error(f).find(f.string() + ": checksum mismatch: data has crc32c") == 0);
  }
}

TEST_CASE("safetensors files are readable by numpy by hand, and the reverse", "[safetensors][python]") {
  if (!have_numpy()) MURMUR_SKIP("no numpy");
  TempDir dir;
  const fs::path ours = dir.path / "ours.safetensors";
  const std::vector<float> w = {0.5f, -1.f, 2.f, 3.f, 4.f, 5.f};
  const std::vector<std::int64_t> steps = {7, -9};
  const std::vector<std::uint8_t> mask = {1, 0, 1};
  const std::vector<TensorView> tensors = {{"fc.weight", Dtype::kF32, {2, 3}, bytes_of(w)},
                                           {"steps", Dtype::kI64, {2}, bytes_of(steps)},
                                           {"mask", Dtype::kU8, {3}, bytes_of(mask)}};
  murmur::write_safetensors(ours, tensors, {{"step", "5"}});
  const fs::path theirs = dir.path / "theirs.safetensors";
  const fs::path script = dir.path / "check.py";
  murmur::atomic_write_file(script, std::string_view(R"PY(
import json, struct, sys
import numpy as np
kinds = {"F32": "<f4", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U8": "u1", "U64": "<u8"}
def load(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, t = e["data_offsets"]
        out[name] = np.frombuffer(data[b:t], dtype=kinds[e["dtype"]]).reshape(e["shape"])
    return header.get("__metadata__", {}), out, n
meta, t, n = load(sys.argv[1])
assert n % 8 == 0, n
assert meta["step"] == "5", meta
assert t["fc.weight"].tolist() == [[0.5, -1.0, 2.0], [3.0, 4.0, 5.0]], t["fc.weight"]
assert t["steps"].tolist() == [7, -9]
assert t["mask"].tolist() == [1, 0, 1]
# The reverse direction: a file written the way the reference library writes it.
a = np.arange(12, dtype="<f8").reshape(3, 4)
b = np.array([3, 1, 2], dtype="<i4")
header = {"__metadata__": {"format": "np"},
          "a": {"dtype": "F64", "shape": [3, 4], "data_offsets": [0, 96]},
          "b": {"dtype": "I32", "shape": [3], "data_offsets": [96, 108]}}
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(h)) + h + a.tobytes() + b.tobytes())
print("OK")
)PY"));
  const std::string cmd =
      murmur::test_python::interpreter() + " " + script.string() + " " + ours.string() + " " +
      theirs.string() + " 2>&1";
  std::string output;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) output += buf;
    ::pclose(p);
  }
  INFO(output);
  REQUIRE(output == "OK\n");
  const Safetensors st = Safetensors::read(theirs);
  CHECK(st.metadata().at("format") == "np");
  CHECK(st.at("a").shape == std::vector<std::int64_t>{3, 4});
  double a[12];
  std::memcpy(a, st.at("a").data.data(), sizeof a);
  CHECK(a[11] == 11.0);
  std::int32_t b[3];
  std::memcpy(b, st.at("b").data.data(), sizeof b);
  CHECK((b[0] == 3 && b[1] == 1 && b[2] == 2));
}

TEST_CASE("random damage either still parses or is a CheckpointError, never a crash", "[safetensors]") {
  TempDir dir;
  const fs::path f = dir.path / "fuzz.safetensors";
  const std::vector<float> w(16, 0.5f);
  const std::vector<std::int64_t> n = {1, 2, 3};
  const std::vector<TensorView> tensors = {{"w", Dtype::kF32, {4, 4}, bytes_of(w)},
                                           {"n", Dtype::kI64, {3}, bytes_of(n)}};
  murmur::write_safetensors(f, tensors);
  const std::vector<std::byte> good = murmur::read_file(f);
  std::uint64_t state = 12345;
  auto next = [&state] {  // splitmix64: deterministic, no dependency on the test order
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  int rejected = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<std::byte> bad = good;
    const int edits = 1 + static_cast<int>(next() % 4);
    for (int e = 0; e < edits; ++e) bad[next() % bad.size()] = static_cast<std::byte>(next());
    if (next() % 4 == 0) bad.resize(next() % bad.size());
    try {
      Safetensors::parse(std::move(bad), "fuzz");
    } catch (const murmur::CheckpointError&) {
      ++rejected;
    }
  }
  CHECK(rejected > 250);  // the CRC and the checks catch nearly every edit
}
