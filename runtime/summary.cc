#include "runtime/summary.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <string>

#include <fmt/format.h>

#include "core/files.h"

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
    bool everywhere = true;
    for (const auto& rank : by_step) {
      const auto it = rank.find(step);
      if (it == rank.end()) {
        everywhere = false;
        break;
      }
      const EvalPoint& e = *it->second;
      acc = std::min(acc, e.accuracy);
      last = std::max(last, have_unix ? e.unix_s - start : e.time_s);
      bytes += e.bytes_sent;
    }
    if (!everywhere || !(acc >= target)) continue;  // NaN (diverged) never reaches it
    out.reached = true;
    out.step = step;
    out.time_s = last;
    out.bytes_sent = bytes;
    out.accuracy = acc;
    return out;
  }
  return out;
}

std::vector<EvalPoint> read_eval_points(const std::filesystem::path& metrics_file) {
  std::map<std::int64_t, EvalPoint> by_step;
  std::ifstream in(metrics_file);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || j.value("kind", "") != "eval") continue;
    const auto number = [&](const char* key) {
      const auto it = j.find(key);
      return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
    };
    EvalPoint e;
    e.step = static_cast<std::int64_t>(number("step"));
    // A diverged model's accuracy is written as null: it reaches no target.
    e.accuracy = j.contains("test_accuracy") && j["test_accuracy"].is_number()
                     ? j["test_accuracy"].get<double>()
                     : std::numeric_limits<double>::quiet_NaN();
    e.time_s = number("time_s");
    e.unix_s = number("unix_s");
    e.bytes_sent = static_cast<std::uint64_t>(number("bytes_sent"));
    by_step[e.step] = e;
  }
  std::vector<EvalPoint> out;
  for (const auto& [step, e] : by_step) out.push_back(e);
  return out;
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

nlohmann::json peer_json(const PeerResult& r) {
  nlohmann::json j = {{"rank", r.rank},
          {"test_accuracy", r.test_accuracy},
          {"test_loss", r.test_loss},
          {"bytes_sent", r.bytes_sent},
          {"bytes_received", r.bytes_received},
          {"steps", r.steps},
          {"epochs", r.epochs},
          {"wall_time_s", r.wall_time_s},
          {"stopped_early", r.stopped_early},
          {"compute_s", r.compute_s},
          {"comm_s", r.comm_s},
          {"wait_s", r.wait_s},
          {"consensus_distance", r.consensus_distance}};
  if (!r.backend.empty()) j["backend"] = r.backend;
  if (r.has_average) {
    j["average_model"] = {{"test_accuracy", r.average_test_accuracy},
                          {"test_loss", r.average_test_loss},
                          {"ranks", r.average_ranks}};
  }
  return j;
}

nlohmann::json make_summary(const ExperimentConfig& config, const std::vector<PeerResult>& peers,
                            double wall_time_s, const std::filesystem::path& run_dir) {
  nlohmann::json list = nlohmann::json::array();
  for (const PeerResult& p : peers) list.push_back(peer_json(p));
  nlohmann::json summary = {{"world_size", config.world.size},
                            {"peers", list},
                            {"wall_time_s", wall_time_s},
                            {"config", to_json(config)}};
  // A peer restarted too late to rejoin reports an average of its own: the widest one wins.
  std::size_t widest = 0;
  for (const PeerResult& p : peers) {
    if (p.has_average && p.average_ranks.size() >= widest) {
      widest = std::max<std::size_t>(1, p.average_ranks.size());
      summary["average_model"] = {{"test_accuracy", p.average_test_accuracy},
                                  {"test_loss", p.average_test_loss},
                                  {"ranks", p.average_ranks}};
      summary["consensus_distance"] = p.consensus_distance;
    }
  }
  if (!run_dir.empty() && config.eval.target_accuracy > 0) {
    std::vector<std::vector<EvalPoint>> per_rank;
    for (const PeerResult& p : peers) {
      per_rank.push_back(read_eval_points(run_dir / fmt::format("rank{}", p.rank) / "metrics.jsonl"));
    }
    summary["time_to_accuracy"] =
        time_to_accuracy_json(time_to_accuracy(per_rank, config.eval.target_accuracy));
  }
  return summary;
}

void write_json(const std::filesystem::path& file, const nlohmann::json& value) {
  const std::string text = value.dump(2) + "\n";
  atomic_write_file(file, std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace murmur::runtime
