#include "runtime/summary.h"

#include "core/files.h"

namespace murmur::runtime {

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
                          {"test_loss", r.average_test_loss}};
  }
  return j;
}

nlohmann::json make_summary(const ExperimentConfig& config, const std::vector<PeerResult>& peers,
                            double wall_time_s) {
  nlohmann::json list = nlohmann::json::array();
  for (const PeerResult& p : peers) list.push_back(peer_json(p));
  nlohmann::json summary = {{"world_size", config.world.size},
                            {"peers", list},
                            {"wall_time_s", wall_time_s},
                            {"config", to_json(config)}};
  for (const PeerResult& p : peers) {
    if (p.has_average) {
      summary["average_model"] = {{"test_accuracy", p.average_test_accuracy},
                                  {"test_loss", p.average_test_loss}};
      summary["consensus_distance"] = p.consensus_distance;
    }
  }
  return summary;
}

void write_json(const std::filesystem::path& file, const nlohmann::json& value) {
  const std::string text = value.dump(2) + "\n";
  atomic_write_file(file, std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace murmur::runtime
