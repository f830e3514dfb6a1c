// YAML <-> ExperimentConfig. The only file that includes yaml-cpp (ARCHITECTURE.md: config is
// parsed once, at the edge). Reading, overrides and writing all walk the describe() functions of
// core/config.h, so they cannot disagree about which keys exist.
#include "core/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "core/config_visit.h"
#include "core/error.h"
#include "core/names.h"

namespace murmur {
namespace {

using config_detail::Section;

// Where the nodes being read came from. A file gives "file:line: key: what"; a --set gives
// "--set a.b=x: what", and names the key only when the fault lies deeper than a.b itself.
struct Source {
  std::string origin;
  bool is_override = false;
  std::string override_key;
};

[[noreturn]] void fail(const Source& src, const YAML::Node& node, std::string_view path,
                       std::string_view what, bool name_key = false) {
  if (src.is_override) {
    if ((path == src.override_key && !name_key) || path.empty()) {
      throw ConfigError(fmt::format("{}: {}", src.origin, what));
    }
    throw ConfigError(fmt::format("{}: {}: {}", src.origin, path, what));
  }
  const YAML::Mark mark = node.Mark();
  std::string where = src.origin;
  if (mark.line >= 0) where += fmt::format(":{}", mark.line + 1);
  if (path.empty()) throw ConfigError(fmt::format("{}: {}", where, what));
  throw ConfigError(fmt::format("{}: {}: {}", where, path, what));
}

std::string got(const YAML::Node& node) {
  if (node.IsScalar()) return fmt::format("\"{}\"", node.Scalar());
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

// A plain (unquoted) scalar: `3` may be a number, `"3"` is a string and nothing else.
bool is_plain_scalar(const YAML::Node& node) { return node.IsScalar() && node.Tag() != "!"; }

// `node` as a plain scalar of the same text (a quoted map key that must be read as a number).
YAML::Node unquoted(const YAML::Node& node) {
  if (!node.IsScalar() || node.Tag() != "!") return node;
  YAML::Node plain(node.Scalar());
  return plain;
}

// True iff `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
// Config strings go into config.json and summary.json, and JSON cannot carry anything else.
bool is_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (b < 0x80) n = 1;
    else if (b >= 0xC2 && b <= 0xDF) n = 2;
    else if (b >= 0xE0 && b <= 0xEF) n = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
    else if (b >= 0xF0 && b <= 0xF4) n = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
    else return false;
    if (i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return false;
    }
    i += n;
  }
  return true;
}

template <class Int>
Int read_integer(const Source& src, const YAML::Node& node, std::string_view path) {
  constexpr const char* kWant =
      std::is_signed_v<Int> ? "expected an integer" : "expected a non-negative integer";
  if (!is_plain_scalar(node)) fail(src, node, path, fmt::format("{}, got {}", kWant, got(node)));
  std::string_view text = node.Scalar();
  // YAML allows "+5"; from_chars does not, and "+-5" must still fail.
  if (text.size() > 1 && text[0] == '+' && text[1] != '-') text.remove_prefix(1);
  Int value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range && end == text.data() + text.size()) {
    fail(src, node, path,
         fmt::format("{} does not fit in a {}-bit integer", node.Scalar(),
                     std::numeric_limits<Int>::digits + std::is_signed_v<Int>));
  }
  if (ec != std::errc() || end != text.data() + text.size()) {
    fail(src, node, path, fmt::format("{}, got {}", kWant, got(node)));
  }
  return value;
}

double read_double(const Source& src, const YAML::Node& node, std::string_view path) {
  if (!is_plain_scalar(node)) fail(src, node, path, fmt::format("expected a number, got {}", got(node)));
  const std::string& s = node.Scalar();
  // YAML 1.2 core schema spellings of the non-finite values (Range checks then reject them).
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "+.inf") return std::numeric_limits<double>::infinity();
  if (s == "-.inf" || s == "-.Inf" || s == "-.INF") return -std::numeric_limits<double>::infinity();
  if (s == ".nan" || s == ".NaN" || s == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  std::string_view text = s;
  if (text.size() > 1 && text[0] == '+') text.remove_prefix(1);
  // from_chars would take "inf" and "nan", which YAML reads as strings: demand a digit or '.'.
  const std::size_t first = !text.empty() && text[0] == '-' ? 1 : 0;
  const bool numeric_start =
      first < text.size() && (std::isdigit(static_cast<unsigned char>(text[first])) || text[first] == '.');
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!numeric_start || ec != std::errc() || end != text.data() + text.size()) {
    fail(src, node, path, fmt::format("expected a number, got {}", got(node)));
  }
  return value;
}

void check_range(const Source& src, const YAML::Node& node, std::string_view path, double value,
                 std::string_view shown, const Range* range) {
  if (range == nullptr || (value >= range->min && value <= range->max)) return;  // NaN fails
  fail(src, node, path,
       fmt::format("{} is out of range [{}, {}]", shown, config_detail::format_bound(range->min),
                   config_detail::format_bound(range->max)));
}

template <Section T>
void read_section(const Source& src, const YAML::Node& node, const std::string& path, T& section);

template <class T>
void read_field(const Source& src, const YAML::Node& node, const std::string& path, T& field,
                const Range* range, bool registered) {
  if constexpr (Section<T>) {
    read_section(src, node, path, field);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (is_plain_scalar(node) && (node.Scalar() == "true" || node.Scalar() == "false")) {
      field = node.Scalar() == "true";
    } else {
      fail(src, node, path, fmt::format("expected true or false, got {}", got(node)));
    }
  } else if constexpr (std::is_integral_v<T>) {
    const T value = read_integer<T>(src, node, path);
    check_range(src, node, path, static_cast<double>(value), fmt::format("{}", value), range);
    field = value;
  } else if constexpr (std::is_same_v<T, double>) {
    const double value = read_double(src, node, path);
    check_range(src, node, path, value, config_detail::format_double(value), range);
    field = value;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!node.IsScalar()) fail(src, node, path, fmt::format("expected a string, got {}", got(node)));
    const std::string& value = node.Scalar();
    if (!is_utf8(value)) fail(src, node, path, "not valid UTF-8 text");
    if (registered) {
      // The names the key's owner registered (core/names.h); none linked: any name.
      const std::vector<std::string> known = registered_names(path);
      if (!known.empty() && std::find(known.begin(), known.end(), value) == known.end()) {
        fail(src, node, path, fmt::format("\"{}\" is not one of {}", value, fmt::join(known, ", ")));
      }
    }
    field = value;
  } else if constexpr (config_detail::IntMap<T>) {  // {rank: value}; Range applies to the values
    if (!node.IsMap() && !node.IsNull()) {
      fail(src, node, path, fmt::format("expected a mapping, got {}", got(node)));
    }
    T values;
    for (const auto& kv : node) {
      const std::string key_path = fmt::format("{}.{}", path, kv.first.Scalar());
      // JSON (config.json) can only quote its keys: a quoted key is read as the number it spells.
      const int key = read_integer<int>(src, unquoted(kv.first), key_path);
      if (key < 0) fail(src, kv.first, key_path, "keys must be non-negative integers");
      if (values.count(key) != 0) fail(src, kv.first, key_path, "duplicate key");
      read_field(src, kv.second, key_path, values[key], range, registered);
    }
    field = std::move(values);
  } else {  // std::vector<E>: Range and Choices apply to every element
    if (!node.IsSequence()) fail(src, node, path, fmt::format("expected a list, got {}", got(node)));
    T values(node.size());
    for (std::size_t i = 0; i < node.size(); ++i) {
      read_field(src, node[i], fmt::format("{}[{}]", path, i), values[i], range, registered);
    }
    field = std::move(values);
  }
}

// Reads the keys of one mapping into the fields describe() names; anything left over is an
// unknown key, reported with the list of known ones (most often it is a typo).
class Reader {
 public:
  Reader(const Source& src, const YAML::Node& map, const std::string& path) : src_(src), path_(path) {
    if (!map.IsMap()) return;  // null: an empty section, all defaults
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) fail(src, kv.first, path, "keys must be plain names");
      const std::string& key = kv.first.Scalar();
      const auto [it, inserted] = entries_.emplace(key, Entry{kv.first, kv.second});
      if (!inserted) {
        fail(src, kv.first, child(key),
             fmt::format("duplicate key (first at line {})", it->second.key.Mark().line + 1));
      }
    }
  }

  template <class T>
  void operator()(std::string_view key, T& field) { visit(key, field, nullptr, false); }
  template <class T>
  void operator()(std::string_view key, T& field, Range range) { visit(key, field, &range, false); }
  template <class T>
  void operator()(std::string_view key, T& field, Registered) { visit(key, field, nullptr, true); }

  template <Section T>
  void reject_unknown(const T& section) const {
    for (const auto& [key, entry] : entries_) {
      if (entry.used) continue;
      fail(src_, entry.key, child(key),
           fmt::format("unknown key (known: {})", config_detail::known_keys(section)), true);
    }
  }

 private:
  struct Entry {
    YAML::Node key;
    YAML::Node value;
    bool used = false;
  };

  std::string child(std::string_view key) const {
    return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
  }

  template <class T>
  void visit(std::string_view key, T& field, const Range* range, bool registered) {
    const auto it = entries_.find(std::string(key));
    if (it == entries_.end()) return;  // absent: keep the default
    it->second.used = true;
    read_field(src_, it->second.value, child(key), field, range, registered);
  }

  const Source& src_;
  const std::string& path_;
  std::map<std::string, Entry> entries_;
};

template <Section T>
void read_section(const Source& src, const YAML::Node& node, const std::string& path, T& section) {
  if (!node.IsMap() && !node.IsNull()) {
    fail(src, node, path, fmt::format("expected a mapping, got {}", got(node)));
  }
  Reader reader(src, node, path);
  describe(reader, section);
  reader.reject_unknown(section);
}

YAML::Node parse_yaml(const std::string& text, std::string_view origin, bool show_line) {
  // yaml-cpp takes a text whose first two bytes hold 00, FE or FF for UTF-16 or UTF-32 (a
  // byte-order mark, or the zero bytes of ASCII in those) and transcodes it: bytes that are not
  // UTF-8 would come back as other, valid-looking text that no longer reads back the same
  // (found by tools/fuzz). Configs are UTF-8; no UTF-8 text starts so.
  for (std::size_t i = 0; i < std::min<std::size_t>(2, text.size()); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == 0x00 || byte == 0xfe || byte == 0xff) {
      throw ConfigError(fmt::format("{}: not UTF-8 text (starts like UTF-16 or UTF-32)", origin));
    }
  }
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null() || !show_line) throw ConfigError(fmt::format("{}: YAML syntax error: {}", origin, e.msg));
    throw ConfigError(fmt::format("{}:{}: YAML syntax error: {}", origin, e.mark.line + 1, e.msg));
  }
}

// ---- writing ----

struct JsonWriter {
  nlohmann::json& out;
  template <class T, class... C>
  void operator()(std::string_view key, T& field, C&&...) {
    if constexpr (Section<T>) {
      nlohmann::json sub = nlohmann::json::object();
      JsonWriter w{sub};
      describe(w, field);
      out[std::string(key)] = std::move(sub);
    } else if constexpr (config_detail::IntMap<T>) {
      nlohmann::json sub = nlohmann::json::object();  // JSON keys are strings: {"3": 2.0}
      for (const auto& [k, value] : field) sub[std::to_string(k)] = value;
      out[std::string(key)] = std::move(sub);
    } else {
      out[std::string(key)] = field;
    }
  }
};

class YamlWriter {
 public:
  explicit YamlWriter(YAML::Emitter& out) : out_(out) {}
  template <class T, class... C>
  void operator()(std::string_view key, T& field, C&&...) {
    out_ << YAML::Key << std::string(key) << YAML::Value;
    emit(field);
  }

 private:
  template <class T>
  void emit(T& value) {
    if constexpr (Section<T>) {
      out_ << YAML::BeginMap;
      describe(*this, value);
      out_ << YAML::EndMap;
    } else if constexpr (std::is_same_v<T, bool>) {
      out_ << (value ? "true" : "false");
    } else if constexpr (std::is_integral_v<T>) {
      out_ << fmt::format("{}", value);
    } else if constexpr (std::is_same_v<T, double>) {
      out_ << config_detail::format_double(value);  // shortest text that reads back exactly
    } else if constexpr (std::is_same_v<T, std::string>) {
      out_ << YAML::DoubleQuoted << value;  // so "true", "3" or "" stay strings
    } else if constexpr (config_detail::IntMap<T>) {
      out_ << YAML::Flow << YAML::BeginMap;
      for (auto& [k, element] : value) {
        out_ << YAML::Key << fmt::format("{}", k) << YAML::Value;
        emit(element);
      }
      out_ << YAML::EndMap;
    } else {
      out_ << YAML::Flow << YAML::BeginSeq;
      for (auto& element : value) emit(element);
      out_ << YAML::EndSeq;
    }
  }

  YAML::Emitter& out_;
};

// ---- cross-field rules ----
// Each rule appends what is wrong to `problems`; validate() reports all of them at once, so a
// user fixes a config in one round. Add a rule by adding a function to kRules.
using Problems = std::vector<std::string>;

void rank_inside_world(const ExperimentConfig& c, Problems& problems) {
  if (c.world.rank >= 0 && c.world.rank >= c.world.size) {
    problems.push_back(
        fmt::format("world.rank: {} is not below world.size {}", c.world.rank, c.world.size));
  }
}

// The shapes of topology.edges and topology.matrix; whether the graph and the weights scheme
// take them at all is topology's rule (topology/registry.h).
void topology_shapes(const ExperimentConfig& c, Problems& problems) {
  const TopologyConfig& t = c.topology;
  for (std::size_t i = 0; i < t.edges.size(); ++i) {
    const std::vector<int>& e = t.edges[i];
    if (e.size() != 2 || e[0] < 0 || e[1] < 0 || e[0] >= c.world.size || e[1] >= c.world.size) {
      problems.push_back(fmt::format(
          "topology.edges[{}]: expected a pair [from, to] of ranks below world.size {}", i, c.world.size));
    }
  }
  if (t.matrix.empty()) return;
  const std::size_t n = static_cast<std::size_t>(c.world.size);
  bool square = t.matrix.size() == n;
  for (const std::vector<double>& row : t.matrix) square = square && row.size() == n;
  if (!square) {
    problems.push_back(fmt::format("topology.matrix: expected {0}x{0} (world.size), got {1} rows",
                                   n, t.matrix.size()));
  }
}

// True iff `text` is a non-negative decimal number followed by one of `units` (tc's spelling).
bool is_quantity(std::string_view text, std::initializer_list<std::string_view> units) {
  std::size_t i = 0;
  bool digits = false;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
    digits = digits || text[i] != '.';
    ++i;
  }
  if (!digits || std::count(text.begin(), text.begin() + i, '.') > 1) return false;
  for (std::string_view u : units) {
    if (text.substr(i) == u) return true;
  }
  return false;
}

void network_is_emulable(const ExperimentConfig& c, Problems& problems) {
  const NetworkConfig& n = c.network;
  if (!n.bandwidth.empty() && !is_quantity(n.bandwidth, {"bit", "kbit", "mbit", "gbit", "tbit"})) {
    problems.push_back(fmt::format(
        "network.bandwidth: \"{}\" is not a rate like 100mbit, 1gbit or 10gbit", n.bandwidth));
  }
  for (const auto& [key, value] : {std::pair{"latency", n.latency}, std::pair{"jitter", n.jitter}}) {
    if (!value.empty() && !is_quantity(value, {"us", "ms", "s"})) {
      problems.push_back(fmt::format("network.{}: \"{}\" is not a time like 0.1ms or 5ms", key, value));
    }
  }
  if (!n.jitter.empty() && n.latency.empty()) {
    problems.push_back("network.jitter: needs network.latency");
  }
  if (!n.loss.empty() && !is_quantity(n.loss, {"%"})) {
    problems.push_back(fmt::format("network.loss: \"{}\" is not a percentage like 0.1%", n.loss));
  }
  for (const auto& [rank, factor] : n.stragglers) {
    if (rank >= c.world.size) {
      problems.push_back(fmt::format("network.stragglers: rank {} is not below world.size {}", rank,
                                     c.world.size));
    }
  }
  if (n.straggler_mode != "quota" && n.straggler_mode != "sleep") {
    problems.push_back(fmt::format("network.straggler_mode: \"{}\" is neither quota nor sleep",
                                   n.straggler_mode));
  }
  const std::vector<int>& w = n.straggler_steps;
  if (!w.empty() && (w.size() != 2 || w[0] < 1 || w[1] <= w[0])) {
    problems.push_back("network.straggler_steps: expected [from, to], steps 1 <= from < to");
  }
}

using Rule = void (*)(const ExperimentConfig&, Problems&);
constexpr Rule kRules[] = {rank_inside_world, topology_shapes,
                           network_is_emulable};

}  // namespace

void validate(const ExperimentConfig& config) {
  Problems problems;
  for (Rule rule : kRules) rule(config, problems);
  if (problems.empty()) return;
  std::string message = "invalid config: " + problems.front();
  for (std::size_t i = 1; i < problems.size(); ++i) message += "; " + problems[i];
  throw ConfigError(message);
}

ExperimentConfig load_config(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw ConfigError(fmt::format("{}: cannot open config: {}", file.string(), std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return load_config_string(text.str(), file.string());
}

ExperimentConfig load_config_string(std::string_view yaml, std::string_view origin) {
  const YAML::Node root = parse_yaml(std::string(yaml), origin, true);
  ExperimentConfig config;
  read_section(Source{std::string(origin), false, {}}, root, std::string(), config);
  return config;
}

void apply_override(ExperimentConfig& config, std::string_view assignment) {
  const Source src{fmt::format("--set {}", assignment), true,
                   std::string(assignment.substr(0, assignment.find('=')))};
  const std::size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    throw ConfigError(fmt::format("{}: expected key=value", src.origin));
  }
  const std::string value(assignment.substr(eq + 1));
  // `--set run.out=` means the empty string, not YAML's null.
  YAML::Node node = value.empty() ? YAML::Node(std::string()) : parse_yaml(value, src.origin, false);
  // Wrap the value as {a: {b: value}} and read it like a file: same checks, same messages.
  std::vector<std::string> keys;
  std::stringstream path(src.override_key);
  for (std::string key; std::getline(path, key, '.');) keys.push_back(key);
  if (keys.empty() || src.override_key.back() == '.') {
    throw ConfigError(fmt::format("{}: expected key=value", src.origin));
  }
  for (auto it = keys.rbegin(); it != keys.rend(); ++it) {
    YAML::Node map(YAML::NodeType::Map);
    map[*it] = node;
    node.reset(map);  // rebind, not assign: yaml-cpp's operator= would alias the two nodes
  }
  ExperimentConfig updated = config;  // all or nothing
  read_section(src, node, std::string(), updated);
  config = std::move(updated);
}

nlohmann::json to_json(const ExperimentConfig& config) {
  nlohmann::json out = nlohmann::json::object();
  JsonWriter writer{out};
  ExperimentConfig copy = config;  // describe() takes a mutable reference
  describe(writer, copy);
  return out;
}

std::string to_yaml(const ExperimentConfig& config) {
  YAML::Emitter out;
  YamlWriter writer(out);
  ExperimentConfig copy = config;
  out << YAML::BeginMap;
  describe(writer, copy);
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace murmur
