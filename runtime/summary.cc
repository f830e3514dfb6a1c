#include "runtime/summary.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"
#include "runtime/comm_prediction.h"

namespace murmur::runtime {

TimeToAccuracy time_to_accuracy(const std::vector<std::vector<EvalPoint>>& per_rank, double target) {
  TimeToAccuracy out;
  out.target = target;
  if (per_rank.empty() || target <= 0) return out;
  // Steps evaluated on every rank, each rank's point by step.
  std::vector<std::map<std::int64_t, const EvalPoint*>> by_step(per_rank.size());
  bool have_unix = true;
  double start = std::numeric_limits<double>::infinity();
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    for (const EvalPoint& e : per_rank[r]) {
      by_step[r][e.step] = &e;
      have_unix = have_unix && e.unix_s > 0;
      start = std::min(start, e.unix_s - e.time_s);  // this rank's training start
    }
  }
  for (const auto& [step, first] : by_step[0]) {
    double acc = first->accuracy, last = 0;
    std::uint64_t bytes = 0;
    bool everywhere = true, diverged = false;
    for (const auto& rank : by_step) {
      const auto it = rank.find(step);
      if (it == rank.end()) {
        everywhere = false;
        break;
      }
      const EvalPoint& e = *it->second;
      diverged = diverged || std::isnan(e.accuracy);  // std::min would drop a NaN after the first
      acc = std::min(acc, e.accuracy);
      last = std::max(last, have_unix ? e.unix_s - start : e.time_s);
      bytes += e.bytes_sent;
    }
    if (!everywhere || diverged || !(acc >= target)) continue;
    out.reached = true;
    out.step = step;
    out.time_s = last;
    out.bytes_sent = bytes;
    out.accuracy = acc;
    return out;
  }
  return out;
}

namespace {

// The text of `file`, or nullopt when it is missing, not a regular file or unreadable: these
// readers turn a bad file into "no data", never an exception (libstdc++'s ifstream throws from
// a read error even with no exception mask set, e.g. on a directory).
std::optional<std::string> read_text_if_any(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  try {
    return read_text_file(file);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

namespace {

// The eval point in `j` (a metrics.jsonl eval line, or an entry of result.json's "evals"), or
// nullopt when it has no numeric step. Other fields of the wrong type read as absent.
std::optional<EvalPoint> eval_point(const nlohmann::json& j) {
  // Compared, not value()d: fields of other types must be skipped, not throw.
  if (!j.is_object() || !j.contains("step") || !j["step"].is_number()) return std::nullopt;
  const auto number = [&](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  // Clamped: casting a double out of the integer's range is undefined behavior.
  const auto clamped = [](double v, double lo, double hi) { return v >= lo ? (v < hi ? v : hi) : lo; };
  constexpr double kInt64Max = 9.2e18, kUint64Max = 1.8e19;
  EvalPoint e;
  e.step = static_cast<std::int64_t>(clamped(number("step"), -kInt64Max, kInt64Max));
  // A diverged model's accuracy is written as null: it reaches no target.
  e.accuracy = j.contains("test_accuracy") && j["test_accuracy"].is_number()
                   ? j["test_accuracy"].get<double>()
                   : std::numeric_limits<double>::quiet_NaN();
  e.time_s = number("time_s");
  e.unix_s = number("unix_s");
  e.bytes_sent = static_cast<std::uint64_t>(clamped(number("bytes_sent"), 0, kUint64Max));
  return e;
}

std::vector<EvalPoint> by_step(const std::map<std::int64_t, EvalPoint>& points) {
  std::vector<EvalPoint> out;
  for (const auto& [step, e] : points) out.push_back(e);
  return out;
}

}  // namespace

std::vector<EvalPoint> read_eval_points(const std::filesystem::path& metrics_file) {
  std::map<std::int64_t, EvalPoint> points;
  std::istringstream in(read_text_if_any(metrics_file).value_or(""));
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("kind") || j["kind"] != "eval") continue;
    if (const auto e = eval_point(j)) points[e->step] = *e;
  }
  return by_step(points);
}

std::vector<EvalPoint> result_eval_points(const nlohmann::json& result) {
  std::map<std::int64_t, EvalPoint> points;
  const auto evals = result.find("evals");
  if (evals == result.end() || !evals->is_array()) return {};
  for (const auto& j : *evals) {
    if (const auto e = eval_point(j)) points[e->step] = *e;
  }
  return by_step(points);
}

nlohmann::json time_to_accuracy_json(const TimeToAccuracy& t) {
  nlohmann::json j = {{"target", t.target}, {"step", nullptr}, {"time_s", nullptr},
                      {"bytes_sent", nullptr}, {"accuracy", nullptr}};
  if (t.reached) {
    j["step"] = t.step;
    j["time_s"] = t.time_s;
    j["bytes_sent"] = t.bytes_sent;
    j["accuracy"] = t.accuracy;
  }
  return j;
}

nlohmann::json exchange_json(const optimizers::ExchangeReport& r) {
  std::vector<std::uint64_t> h = r.staleness;
  while (!h.empty() && h.back() == 0) h.pop_back();
  return {{"initiator", r.initiator}, {"made", r.exchanges}, {"lost", r.lost},
          {"refused", r.refused}, {"staleness", h}};
}

nlohmann::json merge_exchanges(const std::vector<nlohmann::json>& peers) {
  std::vector<std::uint64_t> h;
  std::uint64_t made = 0, lost = 0, refused = 0;
  bool any = false;
  for (const nlohmann::json& p : peers) {
    const auto it = p.find("exchanges");
    if (it == p.end()) continue;  // read_peer_result checked its fields' types
    any = true;
    lost += it->value("lost", std::uint64_t{0});
    refused += it->value("refused", std::uint64_t{0});
    if (!it->value("initiator", false)) continue;
    made += it->value("made", std::uint64_t{0});
    const auto s = it->value("staleness", std::vector<std::uint64_t>{});
    if (h.size() < s.size()) h.resize(s.size(), 0);
    for (std::size_t a = 0; a < s.size(); ++a) h[a] += s[a];
  }
  if (!any) return nullptr;
  std::uint64_t total = 0;
  for (const auto c : h) total += c;
  // The smallest staleness with at least q of the exchanges at or below it.
  const auto quantile = [&](double q) -> nlohmann::json {
    if (total == 0) return nullptr;
    std::uint64_t seen = 0;
    for (std::size_t a = 0; a < h.size(); ++a) {
      seen += h[a];
      if (static_cast<double>(seen) >= q * static_cast<double>(total)) return a;
    }
    return h.size() - 1;
  };
  return {{"made", made}, {"lost", lost}, {"refused", refused}, {"staleness", h},
          {"staleness_p50", quantile(0.5)}, {"staleness_p99", quantile(0.99)},
          {"staleness_max", h.empty() ? nlohmann::json() : nlohmann::json(h.size() - 1)}};
}

nlohmann::json peer_json(const PeerResult& r) {
  nlohmann::json j = {{"rank", r.rank},
          {"test_accuracy", r.test_accuracy},
          {"test_loss", r.test_loss},
          {"bytes_sent", r.bytes_sent},
          {"bytes_received", r.bytes_received},
          {"steps", r.steps},
          {"parameters", r.parameters},
          {"epochs", r.epochs},
          {"wall_time_s", r.wall_time_s},
          {"stopped_early", r.stopped_early},
          {"compute_s", r.compute_s},
          {"comm_s", r.comm_s},
          {"wait_s", r.wait_s},
          {"consensus_distance", r.consensus_distance}};
  if (!r.backend.empty()) j["backend"] = r.backend;
  nlohmann::json evals = nlohmann::json::array();
  for (const EvalPoint& e : r.evals) {
    evals.push_back({{"step", e.step}, {"test_accuracy", e.accuracy}, {"time_s", e.time_s},
                     {"unix_s", e.unix_s}, {"bytes_sent", e.bytes_sent}});
  }
  j["evals"] = std::move(evals);
  if (!r.exchanges.is_null()) j["exchanges"] = r.exchanges;
  if (r.has_average) {
    j["average_model"] = {{"test_accuracy", r.average_test_accuracy},
                          {"test_loss", r.average_test_loss},
                          {"ranks", r.average_ranks}};
  }
  return j;
}


namespace {

bool number_or_null(const nlohmann::json& j) { return j.is_number() || j.is_null(); }  // NaN is null

// True iff every field of a result.json that the summary, the launcher or the sweep reads has
// the type peer_json writes; other fields are kept as they are.
bool well_typed(const nlohmann::json& r) {
  for (const char* key : {"test_accuracy", "test_loss", "bytes_sent", "bytes_received", "steps", "epochs",
                          "wall_time_s", "compute_s", "comm_s", "wait_s", "consensus_distance"}) {
    if (r.contains(key) && !number_or_null(r[key])) return false;
  }
  if (r.contains("stopped_early") && !r["stopped_early"].is_boolean()) return false;
  if (r.contains("parameters") && !r["parameters"].is_number_unsigned()) return false;
  if (r.contains("backend") && !r["backend"].is_string()) return false;
  if (r.contains("evals") && !r["evals"].is_array()) return false;
  if (r.contains("exchanges")) {
    const nlohmann::json& e = r["exchanges"];
    if (!e.is_object()) return false;
    for (const char* key : {"made", "lost", "refused"}) {
      if (e.contains(key) && !e[key].is_number_unsigned()) return false;
    }
    if (e.contains("initiator") && !e["initiator"].is_boolean()) return false;
    if (e.contains("staleness")) {
      if (!e["staleness"].is_array()) return false;
      for (const auto& c : e["staleness"]) {
        if (!c.is_number_unsigned()) return false;
      }
    }
  }
  if (r.contains("average_model")) {
    const nlohmann::json& a = r["average_model"];
    if (!a.is_object()) return false;
    for (const char* key : {"test_accuracy", "test_loss"}) {
      if (a.contains(key) && !number_or_null(a[key])) return false;
    }
    if (a.contains("ranks")) {
      if (!a["ranks"].is_array()) return false;
      for (const auto& rank : a["ranks"]) {
        if (!rank.is_number_integer()) return false;
      }
    }
  }
  return true;
}

std::size_t average_width(const nlohmann::json& average) {
  const auto it = average.find("ranks");
  return it != average.end() ? it->size() : 0;
}

}  // namespace

std::optional<nlohmann::json> read_peer_result(const std::filesystem::path& run_dir, int rank) {
  const auto text = read_text_if_any(run_dir / fmt::format("rank{}", rank) / "result.json");
  if (!text) return std::nullopt;
  nlohmann::json r = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!r.is_object() || !r.contains("rank") || !r["rank"].is_number_integer() || r["rank"] != rank ||
      !well_typed(r)) {
    return std::nullopt;
  }
  return r;
}

nlohmann::json make_summary(const ExperimentConfig& config, const std::vector<nlohmann::json>& peers,
                            double wall_time_s) {
  nlohmann::json list = nlohmann::json::array();
  std::optional<nlohmann::json> average;
  nlohmann::json distance;
  for (nlohmann::json p : peers) {
    const auto it = p.find("average_model");
    if (it != p.end()) {
      // A peer restarted too late to rejoin reports an average of its own: the widest one wins.
      if (!average || average_width(*it) >= average_width(*average)) {
        average = *it;
        distance = p.contains("consensus_distance") ? p["consensus_distance"] : nlohmann::json();
      }
      p.erase(it);
    }
    p.erase("evals");  // the summary's time_to_accuracy stands for them
    list.push_back(std::move(p));
  }
  nlohmann::json summary = {{"world_size", config.world.size},
                            {"peers", std::move(list)},
                            {"wall_time_s", wall_time_s},
                            {"config", to_json(config)}};
  if (average) {
    summary["average_model"] = *average;
    summary["consensus_distance"] = distance;
  }
  if (nlohmann::json e = merge_exchanges(summary["peers"]); !e.is_null()) summary["exchanges"] = e;
  return summary;
}

nlohmann::json summarize_run(const std::filesystem::path& run_dir, const ExperimentConfig& config,
                             double wall_time_s, const std::map<int, int>& exit_codes,
                             std::optional<double> target) {
  const int n = config.world.size;
  std::vector<nlohmann::json> peers;
  std::vector<std::optional<nlohmann::json>> results;
  for (int r = 0; r < n; ++r) {
    const std::optional<nlohmann::json>& result = results.emplace_back(read_peer_result(run_dir, r));
    if (result) {
      peers.push_back(*result);
      continue;
    }
    const auto code = exit_codes.find(r);
    peers.push_back({{"rank", r},
                     {"failed", true},
                     {"exit", code != exit_codes.end() ? nlohmann::json(code->second) : nlohmann::json()}});
  }
  nlohmann::json summary = make_summary(config, peers, wall_time_s);
  if (nlohmann::json p = comm_prediction_json(config, peers, transport::default_cost_model_path());
      !p.is_null()) {
    summary["comm_prediction"] = std::move(p);
  }
  const double t = target.value_or(config.eval.target_accuracy);
  if (t > 0) {
    // Every rank of the world, failed ones too: a rank that never evaluated reaches nothing.
    // A rank's metrics.jsonl where it is here, else the evaluations its result.json carries
    // (a rank that ran on a node of its own, its results gathered over the transport).
    std::vector<std::vector<EvalPoint>> per_rank;
    for (int r = 0; r < n; ++r) {
      std::vector<EvalPoint> points = read_eval_points(run_dir / fmt::format("rank{}", r) / "metrics.jsonl");
      if (points.empty() && results[static_cast<std::size_t>(r)]) {
        points = result_eval_points(*results[static_cast<std::size_t>(r)]);
      }
      per_rank.push_back(std::move(points));
    }
    summary["time_to_accuracy"] = time_to_accuracy_json(time_to_accuracy(per_rank, t));
  }
  return summary;
}

nlohmann::json summarize_run(const std::filesystem::path& run_dir, double wall_time_s,
                             const std::map<int, int>& exit_codes, std::optional<double> target) {
  return summarize_run(run_dir, read_run_config(run_dir), wall_time_s, exit_codes, target);
}

ExperimentConfig read_run_config(const std::filesystem::path& run_dir) {
  return load_config(run_dir / "config.yaml");
}

RunOutcome recorded_outcome(const std::filesystem::path& run_dir) {
  RunOutcome out;
  const auto text = read_text_if_any(run_dir / "summary.json");
  if (!text) return out;
  const nlohmann::json s = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!s.is_object()) return out;
  if (s.contains("wall_time_s") && s["wall_time_s"].is_number()) out.wall_time_s = s["wall_time_s"].get<double>();
  if (s.contains("peers") && s["peers"].is_array()) {
    for (const auto& p : s["peers"]) {
      if (p.is_object() && p.contains("rank") && p["rank"].is_number_integer() && p.contains("exit") &&
          p["exit"].is_number_integer()) {
        out.exit_codes[p["rank"].get<int>()] = p["exit"].get<int>();
      }
    }
  }
  return out;
}

void write_json(const std::filesystem::path& file, const nlohmann::json& value) {
  const std::string text = value.dump(2) + "\n";
  atomic_write_file(file, std::as_bytes(std::span(text.data(), text.size())));
}

void write_summary(const std::filesystem::path& run_dir, const nlohmann::json& summary) {
  write_json(run_dir / "summary.json", summary);
}

}  // namespace murmur::runtime
