// Logging (tag and level on every line, file sink, bad level) and ProgressLine throttling.
#include <stdio.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/logging.h"
#include "core/progress.h"

namespace fs = std::filesystem;
using namespace std::chrono_literals;

TEST_CASE("log lines carry the tag and respect the level", "[logging]") {
  std::string tmpl = (fs::temp_directory_path() / "murmur_log_test_XXXXXX").string();
  REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
  const fs::path dir = tmpl;
  const fs::path file = dir / "peer3.log";

  murmur::init_logging("peer 3 (50%)", "warn");
  murmur::add_log_file(file);
  murmur::log().info("not shown at warn");
  murmur::log().warn("shown {}", 42);
  murmur::log().flush();
  const std::string text = murmur::read_text_file(file);
  CHECK(text.find("[peer 3 (50%)] [warning] shown 42") != std::string::npos);
  CHECK(text.find("not shown") == std::string::npos);

  CHECK_THROWS_AS(murmur::init_logging("x", "verbose"), murmur::ConfigError);
  CHECK_THROWS_AS(murmur::add_log_file(file / "under_a_file.log"), murmur::IoError);
  murmur::init_logging("murmur", "info");  // leave the process as other tests expect it
  fs::remove_all(dir);
}

TEST_CASE("ProgressLine redraws a terminal line at most ~10 times a second", "[progress]") {
  char* buf = nullptr;
  size_t size = 0;
  FILE* term = ::open_memstream(&buf, &size);
  REQUIRE(term != nullptr);
  {
    murmur::ProgressLine line(/*interactive=*/true);
    std::vector<std::string> plain;
    line.set_outputs(term, [&](std::string_view s) { plain.emplace_back(s); });
    const auto t0 = murmur::ProgressLine::Clock::time_point{} + 1h;
    line.update("step 1", t0);
    line.update("step 2", t0 + 50ms);  // too soon: skipped
    line.update("step 3 longer", t0 + 150ms);
    line.finish("done");
    line.update("again", t0 + 160ms);  // after finish() the next update shows at once
    CHECK(plain.empty());
  }  // the open "again" line is ended by the destructor
  std::fclose(term);
  const std::string out(buf, size);
  ::free(buf);
  CHECK(out == "\rstep 1\x1b[K\rstep 3 longer\x1b[K\rdone\x1b[K\n\ragain\x1b[K\n");
}

TEST_CASE("ProgressLine writes plain lines at most every interval when not on a terminal", "[progress]") {
  murmur::ProgressLine line(/*interactive=*/false, 10s);
  std::vector<std::string> plain;
  line.set_outputs(stderr, [&](std::string_view s) { plain.emplace_back(s); });
  const auto t0 = murmur::ProgressLine::Clock::time_point{} + 1h;
  line.update("a", t0);
  line.update("b", t0 + 5s);
  line.update("c", t0 + 11s);
  line.update("d", t0 + 20s);
  line.update("e", t0 + 21s);
  line.finish("done");
  CHECK(plain == std::vector<std::string>{"a", "c", "e", "done"});
}
