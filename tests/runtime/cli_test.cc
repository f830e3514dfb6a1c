// murmur-peer as a user runs it: bad input gives one clear error line and a nonzero exit,
// never a crash or a hang (each command runs under `timeout`).
#include <catch2/catch.hpp>

#include <fstream>

#include <zlib.h>

#include "tests/runtime/test_util.h"

using murmur::testing::binary;
using murmur::testing::run_command;
using murmur::testing::TempDir;

namespace {

void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

void write_gz(const std::filesystem::path& p, const std::string& bytes) {
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
  gzclose(f);
}

// The single-peer config, so that no test needs a rendezvous.
std::string peer(const std::string& args) {
  return binary("murmur-peer") + " --config " + MURMUR_SOURCE_DIR + "/configs/single.yaml " + args;
}

const char* kFast = "--set data.name=synthetic --set train.epochs=1 --set run.threads=1";

}  // namespace

TEST_CASE("murmur-peer: an unknown key names the file, line and key", "[cli]") {
  TempDir dir;
  write_text(dir.path() / "bad.yaml", "model:\n  name: mlp\n  widths: [10]\n");
  auto r = run_command(binary("murmur-peer") + " --config " + (dir.path() / "bad.yaml").string() +
                       " --out " + dir.path().string());
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("bad.yaml:3") && Catch::Contains("model.widths") &&
                           Catch::Contains("unknown key"));
}

TEST_CASE("murmur-peer: a wrong type and an out-of-range value", "[cli]") {
  TempDir dir;
  auto r = run_command(peer("--set train.epochs=abc --out " + dir.path().string()));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("train.epochs") && Catch::Contains("integer"));
  r = run_command(peer("--set train.batch_size=0 --out " + dir.path().string()));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("train.batch_size") && Catch::Contains("range"));
}

TEST_CASE("murmur-peer: a missing dataset names the file", "[cli]") {
  TempDir dir;
  auto r = run_command(peer("--set data.path=" + (dir.path() / "nowhere").string() + " --out " +
                            dir.path().string()));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("nowhere") && Catch::Contains("idx"));
}

TEST_CASE("murmur-peer: a corrupted IDX header is refused", "[cli]") {
  TempDir dir;
  // A header with the wrong magic in each images file; labels are fine.
  for (const char* split : {"train", "t10k"}) {
    write_gz(dir.path() / (std::string(split) + "-images-idx3-ubyte.gz"), std::string("\xde\xad\xbe\xef", 4) + std::string(12, '\0'));
    write_gz(dir.path() / (std::string(split) + "-labels-idx1-ubyte.gz"), std::string("\x00\x00\x08\x01\x00\x00\x00\x01\x03", 9));
  }
  auto r = run_command(peer("--set data.path=" + dir.path().string() + " --out " + (dir.path() / "run").string()));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("images-idx3-ubyte.gz") && Catch::Contains("magic"));
}

TEST_CASE("murmur-peer: --eval-checkpoint reads the final model and its resume file, and refuses a truncated one", "[cli]") {
  TempDir dir;
  auto r = run_command(peer(std::string(kFast) + " --set train.max_steps=5 --out " + dir.path().string()));
  REQUIRE(r.exit_code == 0);
  // The final model file and its resume file hold the same model: the same figures.
  const auto resume = dir.path() / "rank0" / "final.resume.safetensors";
  r = run_command(peer(std::string(kFast) + " --eval-checkpoint " + resume.string()));
  REQUIRE(r.exit_code == 0);
  const auto at = r.output.rfind(": test accuracy");
  REQUIRE(at != std::string::npos);
  const std::string figures = r.output.substr(at, r.output.find('\n', at) - at);
  const auto ckpt = dir.path() / "rank0" / "final.safetensors";
  r = run_command(peer(std::string(kFast) + " --eval-checkpoint " + ckpt.string()));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains(ckpt.string() + figures));
  std::filesystem::resize_file(ckpt, std::filesystem::file_size(ckpt) / 2);
  r = run_command(peer(std::string(kFast) + " --eval-checkpoint " + ckpt.string()));
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.output, Catch::Contains("final.safetensors") && Catch::Contains("truncated"));
}

TEST_CASE("murmur-peer: a corrupted newest checkpoint is skipped on resume", "[cli]") {
  TempDir dir;
  const std::string base = std::string(kFast) + " --set checkpoint.every_steps=20 --out " + dir.path().string();
  auto r = run_command(peer(base));
  REQUIRE(r.exit_code == 0);
  // Flip a byte in the middle of the final resume checkpoint: its CRC no longer matches.
  const auto final_ckpt = dir.path() / "rank0" / "final.resume.safetensors";
  {
    std::fstream f(final_ckpt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(std::filesystem::file_size(final_ckpt) - 100));
    f.put('\x5a');
  }
  r = run_command(peer(base));
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.output, Catch::Contains("skipping unusable checkpoint") && Catch::Contains("resumed from"));
}
