// The survey's communication cost model, fitted to this machine: a phase in which every rank
// sends `bytes` (in messages of one size) and receives as much costs alpha + beta * bytes, with
// alpha (latency, per phase) and beta (inverse bandwidth, per byte a rank sends) fitted per
// backend, rank count and message-size band from murmur-bench's ring exchange and ring
// allreduce, where every rank sends at once as the algorithms' steps do (`murmur-bench fit`
// stores it as JSON). Pure arithmetic but for the file I/O; the file is untrusted input.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace murmur::transport {

// One measured pattern, as the fit reads it: `phases` sequential phases, in each of which a rank
// sends `bytes_per_phase` in messages of `message_bytes`, took `seconds` in all.
struct CostSample {
  double phases = 1;
  double message_bytes = 0;
  double bytes_per_phase = 0;
  double seconds = 0;
};

// alpha + beta * bytes for messages of [min_bytes, max_bytes) (max_bytes 0: no upper bound).
struct CostBand {
  double min_bytes = 0;
  double max_bytes = 0;
  double alpha_s = 0;
  double beta_s_per_byte = 0;
  int samples = 0;
  double max_relative_error = 0;  // of the fit over its own samples
};

// The fit of one backend at one rank count: its bands, in order of size.
struct LinkCost {
  std::vector<CostBand> bands;
  // Propagation delay a phase adds on top (an emulated network's latency): paid once per phase,
  // where alpha is paid once per message (the fit's alpha is what the endpoints spend).
  double latency_s = 0;
  // Seconds of one phase: the band that holds `message_bytes` (the nearest one outside them).
  double phase_seconds(double message_bytes, double bytes_per_phase) const;
};

// Where the bands split by default: the sizes where the backends change protocol (eager to
// rendezvous in UCX and libfabric, one socket write to many on tcp).
std::vector<double> default_band_edges();

// Least squares of seconds = phases * (alpha + beta * bytes_per_phase) over `samples`, weighted
// by 1/seconds^2 (relative errors, so that the small sizes count as much as the large), with
// alpha and beta kept >= 0. Throws Error when there is not one sample.
CostBand fit_band(const std::vector<CostSample>& samples);
// A band per interval of `edges` that has samples (bands without samples are left out).
LinkCost fit_link(const std::vector<CostSample>& samples, const std::vector<double>& edges);

// The fits of a machine: backend -> rank count -> link cost.
struct CostModel {
  std::string machine;  // free text: where it was fitted
  std::map<std::string, std::map<int, LinkCost>> links;

  // The link cost of `backend` for `ranks`: the fit at that rank count, else at the largest
  // fitted count below it, else the smallest above. Throws Error naming the backend when it has
  // no fit.
  const LinkCost& link(const std::string& backend, int ranks, int* fitted_ranks = nullptr) const;
};

nlohmann::json to_json(const CostModel& model);
// Throws Error naming `where` and the field when the JSON is not a cost model: negative or
// non-finite figures, bands out of order, unknown versions.
CostModel cost_model_from_json(const nlohmann::json& j, const std::string& where);
CostModel read_cost_model(const std::filesystem::path& file);
void write_cost_model(const std::filesystem::path& file, const CostModel& model);
// Where murmur-bench fit writes by default and the summaries look: $MURMUR_COST_MODEL, else
// $XDG_CACHE_HOME/murmur/cost_model.json, else ~/.cache/murmur/cost_model.json.
std::filesystem::path default_cost_model_path();

}  // namespace murmur::transport
