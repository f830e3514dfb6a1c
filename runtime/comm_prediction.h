// The communication time a run should take by the survey's alpha-beta model: the algorithm's
// plan (optimizers/comm_plan.h) priced with this machine's fit (transport/cost_model.h), plus
// the emulated network's latency and rate where the config sets network.*. summary.json carries
// it beside the measured comm_s ("comm_prediction"), and so do the sweep reports.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "optimizers/comm_plan.h"
#include "transport/cost_model.h"

namespace murmur::runtime {

struct CommPrediction {
  std::string backend;
  int fitted_ranks = 0;        // the rank count of the fit used (the run's, or the nearest below)
  double seconds = 0;          // comm_s of one peer over `steps` steps
  double bytes_sent = 0;       // bytes one peer sends over the run: the plan's, and the final average
  optimizers::CommPlan plan;
  // The transport.chunk_bytes, of 64 KiB to 64 MiB in powers of two, that the model finds
  // fastest for this run, and its seconds; 0 where the chunk size changes nothing (no
  // allreduce, or segments under 64 KiB) or the run has no network of its own (network.*
  // unset: on one host's loopback the ring's pieces do not pipeline).
  std::int64_t suggested_chunk_bytes = 0;
  double seconds_at_suggested = 0;
};

// The share of a link's rate that carries a TCP stream's payload: 1448 bytes of it in every
// 1514-byte frame (Ethernet, IPv4 and TCP with timestamps at MTU 1500), as tbf counts them.
// `tools/murmur-netem measure --bandwidth 1gbit` gets 956.5 Mbit/s through the emulated link
// (its tc.TCP_GOODPUT_SHARE is the same number, for the price it prints beside a message).
inline constexpr double kTcpGoodputShare = 1448.0 / 1514.0;

// Seconds of one step's share of `part` over `link`: per_step x (phases x latency + (phases +
// chunks - 1) x (alpha + beta x bytes_per_phase / chunks)), the band by the piece's size.
double part_seconds(const transport::LinkCost& link, const optimizers::CommPart& part);
// The link of `model` for the run's backend and world, with network.latency as its latency_s
// and network.bandwidth's TCP goodput bounding its beta (the slower of the two per byte).
transport::LinkCost run_link(const ExperimentConfig& config, const transport::CostModel& model,
                             int* fitted_ranks = nullptr);
// The prediction for a run of `steps` steps of a model of `parameters` floats over `backend`.
// Throws Error where the model has no fit for the backend.
CommPrediction predict_comm(const ExperimentConfig& config, const transport::CostModel& model,
                            const std::string& backend, std::size_t parameters, std::int64_t steps);

// summary.json's "comm_prediction" for these peer results (read_peer_result's), with the mean
// measured comm_s and bytes_sent beside the predicted ones and their ratio; null where the run
// has one peer, no result carries its model's size, the model file is missing, or it has no
// fit for the run's backend (inproc: murmur-sim). A file that
// is there but is not a cost model gives {"error": "..."} (the summary is still written).
nlohmann::json comm_prediction_json(const ExperimentConfig& config,
                                    const std::vector<nlohmann::json>& peers,
                                    const std::filesystem::path& cost_model_file);

}  // namespace murmur::runtime
