// summary.json: the one file a person or a script reads first after a run.
// {"world_size": N, "peers": [{"rank", "test_accuracy", "test_loss", "bytes_sent", "steps"}...],
//  "wall_time_s": t, "config": {...}} (multi-peer runs add the average model and consensus).
#pragma once

#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "runtime/peer.h"

namespace murmur::runtime {

nlohmann::json peer_json(const PeerResult& r);
nlohmann::json make_summary(const ExperimentConfig& config, const std::vector<PeerResult>& peers,
                            double wall_time_s);
// Writes `value` (indented) to `file` atomically: summary.json, rank<r>/result.json.
void write_json(const std::filesystem::path& file, const nlohmann::json& value);

}  // namespace murmur::runtime
