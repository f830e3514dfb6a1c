// MetricsSink: JSON Lines that parse back, appending, flushing, thread safety, open errors.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/metrics.h"

namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "murmur_metrics_test_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<nlohmann::json> read_lines(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

}  // namespace

TEST_CASE("MetricsSink writes one JSON object per line", "[metrics]") {
  TempDir dir;
  const fs::path file = dir.path / "metrics.jsonl";
  {
    murmur::MetricsSink sink(file);
    sink.write({{"step", 1}, {"loss", 2.5}, {"peer", "p0"}});
    sink.write({{"step", 2}, {"loss", 1.25}, {"nested", {{"bytes", 1024}}}});
    sink.flush();
    const auto lines = read_lines(file);  // visible after flush(), before destruction
    REQUIRE(lines.size() == 2);
    CHECK(lines[0]["loss"] == 2.5);
    CHECK(lines[1]["nested"]["bytes"] == 1024);
    sink.write({{"step", 3}, {"name", std::string("bad \xff utf8")}});
  }  // destruction flushes the third line
  const auto lines = read_lines(file);
  REQUIRE(lines.size() == 3);
  CHECK(lines[2]["step"] == 3);
  CHECK(murmur::read_text_file(file).back() == '\n');

  {  // a second sink appends, as a resumed run does
    murmur::MetricsSink sink(file);
    sink.write({{"step", 4}});
  }
  CHECK(read_lines(file).size() == 4);
}

TEST_CASE("MetricsSink keeps lines whole under concurrent writers", "[metrics]") {
  TempDir dir;
  const fs::path file = dir.path / "m.jsonl";
  {
    murmur::MetricsSink sink(file);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&sink, t] {
        for (int i = 0; i < 2000; ++i) sink.write({{"thread", t}, {"i", i}, {"pad", std::string(40, 'x')}});
      });
    }
    for (auto& th : threads) th.join();
  }
  const auto lines = read_lines(file);  // parse() throws on any torn line
  CHECK(lines.size() == 8000);
}

TEST_CASE("MetricsSink names the file it cannot open", "[metrics]") {
  TempDir dir;
  const fs::path bad = dir.path / "no_dir" / "m.jsonl";
  CHECK_THROWS_AS(murmur::MetricsSink(bad), murmur::IoError);
  CHECK_THROWS_WITH(murmur::MetricsSink(bad), Catch::Contains("no_dir/m.jsonl"));
}
