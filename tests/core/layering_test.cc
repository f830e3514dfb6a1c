// The arrows of ARCHITECTURE.md, enforced: reads every source file of every room and fails on an
// `#include "<room>/..."` that the table below does not allow, printing file:line.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace fs = std::filesystem;

namespace {

// room -> rooms it may include (itself included): the arrows of ARCHITECTURE.md,
//   tools, api -> runtime -> optimizers -> membership -> transport -> core,
//   optimizers -> topology, device -> core;  runtime -> nn -> device -> core;  python -> api.
// A room may name the headers of any room its arrows reach, not only the next one.
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> table = {
      {"core", {"core"}},
      {"device", {"device", "core"}},
      {"nn", {"nn", "device", "core"}},
      {"topology", {"topology", "core"}},
      {"transport", {"transport", "core"}},
      {"membership", {"membership", "transport", "core"}},
      {"optimizers", {"optimizers", "membership", "transport", "topology", "device", "core"}},
      {"runtime", {"runtime", "optimizers", "membership", "nn", "device", "transport", "topology", "core"}},
      {"api", {"api", "runtime", "optimizers", "membership", "nn", "device", "transport", "topology", "core"}},
      {"python", {"python", "api"}},
      {"tools", {"tools", "runtime", "optimizers", "membership", "nn", "device", "transport", "topology", "core"}},
  };
  return table;
}

// "file:line: room -> target" for each include in `text` that breaks the arrows.
std::vector<std::string> violations(const std::string& file, const std::string& room, const std::string& text) {
  static const std::regex include(R"(^\s*#\s*include\s*"([A-Za-z_]+)/)");
  std::vector<std::string> out;
  std::istringstream in(text);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    std::smatch m;
    if (!std::regex_search(line, m, include)) continue;
    const std::string target = m[1];
    if (!allowed().count(target)) continue;  // not one of our rooms (e.g. a backend's own subdir)
    if (!allowed().at(room).count(target)) {
      out.push_back(file + ":" + std::to_string(line_no) + ": " + room + " may not include " + target +
                    " (" + line + ")");
    }
  }
  return out;
}

bool is_source(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".h" || ext == ".cc" || ext == ".cu" || ext == ".cuh" || ext == ".hpp" || ext == ".cpp";
}

}  // namespace

TEST_CASE("the include checker catches a broken arrow", "[layering]") {
  CHECK(violations("nn/x.cc", "nn", "#include \"core/error.h\"\n#include <vector>\n").empty());
  const auto v = violations("nn/x.cc", "nn", "// intro\n  #  include \"transport/transport.h\"\n");
  REQUIRE(v.size() == 1);
  CHECK(v[0].rfind("nn/x.cc:2: nn may not include transport", 0) == 0);
  CHECK(violations("core/a.h", "core", "#include \"nn/tensor.h\"\n").size() == 1);
  CHECK(violations("optimizers/a.cc", "optimizers", "#include \"nn/layer.h\"\n").size() == 1);
  CHECK(violations("membership/a.cc", "membership", "#include \"topology/mixing.h\"\n").size() == 1);
  CHECK(violations("device/a.cc", "device", "#include \"transport/transport.h\"\n").size() == 1);
  CHECK(violations("nn/cuda/a.cc", "nn", "#include \"device/cuda/memory.h\"\n").empty());
  CHECK(violations("runtime/a.cc", "runtime", "#include \"topology/graph.h\"\n").empty());
  CHECK(violations("tools/a.cc", "tools", "#include \"runtime/peer.h\"\n").empty());
  CHECK(violations("python/a.cc", "python", "#include \"api/murmur/murmur.h\"\n").empty());
  CHECK(violations("python/a.cc", "python", "#include \"runtime/peer.h\"\n").size() == 1);
  CHECK(violations("transport/tcp/a.cc", "transport", "#include \"tcp/frame.h\"\n").empty());
}

TEST_CASE("every room includes only along the arrows of ARCHITECTURE.md", "[layering]") {
  const fs::path root = MURMUR_SOURCE_DIR;
  std::vector<std::string> all;
  std::size_t files = 0;
  for (const auto& [room, _] : allowed()) {
    if (!fs::exists(root / room)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / room)) {
      if (!entry.is_regular_file() || !is_source(entry.path())) continue;
      std::ifstream in(entry.path());
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const auto v = violations(fs::relative(entry.path(), root).string(), room, text);
      all.insert(all.end(), v.begin(), v.end());
      ++files;
    }
  }
  CHECK(files > 10);  // the walk found the tree at all
  for (const std::string& v : all) UNSCOPED_INFO(v);
  CHECK(all.empty());
}
