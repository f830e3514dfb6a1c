#include "runtime/comm_prediction.h"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"

namespace murmur::runtime {
namespace {

// A validated quantity of network.* ("1gbit", "5ms") in base units: bits/s or seconds.
double quantity(const std::string& text, std::initializer_list<std::pair<const char*, double>> units) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  for (const auto& [unit, scale] : units) {
    if (std::string_view(end) == unit) return v * scale;
  }
  throw ConfigError(fmt::format("network: \"{}\" has none of the known units", text));
}

}  // namespace

double part_seconds(const transport::LinkCost& link, const optimizers::CommPart& part) {
  // Pieces pipelined across the phases: (phases + chunks - 1) piece times, and each phase's
  // propagation delay once.
  const double piece = link.phase_seconds(part.message_bytes, part.bytes_per_phase / part.chunks);
  return part.per_step * (part.phases * link.latency_s + (part.phases + part.chunks - 1) * piece);
}

transport::LinkCost run_link(const ExperimentConfig& config, const transport::CostModel& model,
                             int* fitted_ranks) {
  transport::LinkCost link = model.link(config.transport.backend, config.world.size, fitted_ranks);
  const NetworkConfig& net = config.network;
  const double latency =
      net.latency.empty() ? 0 : quantity(net.latency, {{"us", 1e-6}, {"ms", 1e-3}, {"s", 1}});
  const double rate = net.bandwidth.empty()
                          ? 0
                          : quantity(net.bandwidth, {{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6},
                                                     {"gbit", 1e9}, {"tbit", 1e12}});
  link.latency_s += latency;
  for (transport::CostBand& b : link.bands) {
    // The shaper and the copies into the socket overlap: the slower of the two sets the pace.
    if (rate > 0) b.beta_s_per_byte = std::max(b.beta_s_per_byte, 8 / (rate * kTcpGoodputShare));
  }
  return link;
}

CommPrediction predict_comm(const ExperimentConfig& config, const transport::CostModel& model,
                            const std::string& backend, std::size_t parameters, std::int64_t steps) {
  ExperimentConfig c = config;
  c.transport.backend = backend;
  CommPrediction p;
  p.backend = backend;
  const transport::LinkCost link = run_link(c, model, &p.fitted_ranks);
  p.plan = optimizers::comm_plan({c, parameters, steps});
  const double n = static_cast<double>(steps);
  const auto priced = [&](const optimizers::CommPlan& plan) {
    double s = 0;
    for (const optimizers::CommPart& part : plan.parts) s += n * part_seconds(link, part);
    return s;
  };
  p.seconds = priced(p.plan);
  // The chunk size the model likes best: the same plan with each candidate (ties: the larger).
  // Only across a link of its own (network.*): on one host's loopback the pieces do not
  // pipeline, since the same cores copy every rank's bytes (pieces of 128 KiB made the
  // 4-peer allreduce here 1.2-1.6x slower where the model expected 0.6x).
  bool matters = false;
  const bool own_link = !c.network.bandwidth.empty() || !c.network.latency.empty();
  for (std::int64_t chunk = std::int64_t{64} << 20; own_link && chunk >= 64 << 10; chunk /= 2) {
    ExperimentConfig with = c;
    with.transport.chunk_bytes = chunk;
    const optimizers::CommPlan plan = optimizers::comm_plan({with, parameters, steps});
    for (std::size_t i = 0; i < plan.parts.size(); ++i) {
      matters = matters || i >= p.plan.parts.size() ||
                plan.parts[i].message_bytes != p.plan.parts[i].message_bytes;
    }
    const double s = priced(plan);
    if (p.suggested_chunk_bytes == 0 || s < p.seconds_at_suggested) {
      p.suggested_chunk_bytes = chunk;
      p.seconds_at_suggested = s;
    }
  }
  if (!matters) {  // no candidate changed a piece (or none was tried: nothing to pipeline over)
    p.suggested_chunk_bytes = 0;
    p.seconds_at_suggested = 0;
  }
  p.bytes_sent = n * p.plan.bytes_per_step();
  // The run's end averages the models exactly once (Distributed::average): bytes the peers
  // send, outside comm_s.
  const optimizers::CommPlan final_average{optimizers::allreduce_parts(
      "the final average", 4.0 * static_cast<double>(parameters), c.world.size,
      static_cast<double>(c.transport.chunk_bytes), 1), ""};
  p.bytes_sent += final_average.bytes_per_step();
  return p;
}

nlohmann::json comm_prediction_json(const ExperimentConfig& config,
                                    const std::vector<nlohmann::json>& peers,
                                    const std::filesystem::path& cost_model_file) {
  if (config.world.size < 2) return nullptr;
  // The mean over the peers that finished: their steps, comm_s and bytes, and the model's size.
  double steps = 0, comm_s = 0, bytes = 0, count = 0;
  std::uint64_t parameters = 0;
  std::string backend = config.transport.backend;
  for (const nlohmann::json& p : peers) {
    if (p.value("failed", false) || !p.contains("parameters") || !p["parameters"].is_number_integer() ||
        p["parameters"].get<std::int64_t>() <= 0) {
      continue;
    }
    parameters = p["parameters"].get<std::uint64_t>();
    steps += p.value("steps", 0.0);
    comm_s += p.value("comm_s", 0.0);
    bytes += p.value("bytes_sent", 0.0);
    if (p.contains("backend") && p["backend"].is_string()) backend = p["backend"];
    ++count;
  }
  std::error_code ec;
  if (count == 0 || parameters == 0 || !std::filesystem::exists(cost_model_file, ec)) return nullptr;
  try {
    const transport::CostModel model = transport::read_cost_model(cost_model_file);
    if (!model.links.contains(backend)) return nullptr;  // not fitted (inproc: a simulation)
    const CommPrediction p = predict_comm(config, model, backend, parameters,
                                          std::llround(steps / count));
    nlohmann::json parts = nlohmann::json::array();
    for (const optimizers::CommPart& part : p.plan.parts) {
      parts.push_back({{"what", part.what}, {"per_step", part.per_step}, {"phases", part.phases},
                       {"message_bytes", part.message_bytes}, {"bytes_per_phase", part.bytes_per_phase}});
    }
    const double measured = comm_s / count;
    nlohmann::json j = {{"cost_model", cost_model_file.string()},
                        {"backend", p.backend},
                        {"fitted_ranks", p.fitted_ranks},
                        {"predicted_comm_s", p.seconds},
                        {"measured_comm_s", measured},
                        {"ratio", p.seconds > 0 ? nlohmann::json(measured / p.seconds) : nlohmann::json()},
                        {"predicted_bytes_sent", p.bytes_sent},
                        {"measured_bytes_sent", bytes / count},
                        {"parts", parts}};
    if (!p.plan.note.empty()) j["note"] = p.plan.note;
    if (p.suggested_chunk_bytes > 0) {
      j["suggested_chunk_bytes"] = p.suggested_chunk_bytes;
      j["predicted_comm_s_at_suggested"] = p.seconds_at_suggested;
    }
    return j;
  } catch (const std::exception& e) {  // Error, or a JSON type the checks let through
    return {{"cost_model", cost_model_file.string()}, {"error", e.what()}};
  }
}

}  // namespace murmur::runtime
