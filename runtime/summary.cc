#include "runtime/summary.h"

#include "core/files.h"

namespace murmur::runtime {

nlohmann::json peer_json(const PeerResult& r) {
  return {{"rank", r.rank},
          {"test_accuracy", r.test_accuracy},
          {"test_loss", r.test_loss},
          {"bytes_sent", r.bytes_sent},
          {"bytes_received", r.bytes_received},
          {"steps", r.steps},
          {"epochs", r.epochs},
          {"wall_time_s", r.wall_time_s},
          {"stopped_early", r.stopped_early}};
}

nlohmann::json make_summary(const ExperimentConfig& config, const std::vector<PeerResult>& peers,
                            double wall_time_s) {
  nlohmann::json list = nlohmann::json::array();
  for (const PeerResult& p : peers) list.push_back(peer_json(p));
  return {{"world_size", config.world.size},
          {"peers", list},
          {"wall_time_s", wall_time_s},
          {"config", to_json(config)}};
}

void write_summary(const std::filesystem::path& dir, const nlohmann::json& summary) {
  const std::string text = summary.dump(2) + "\n";
  atomic_write_file(dir / "summary.json", std::as_bytes(std::span(text.data(), text.size())));
}

}  // namespace murmur::runtime
