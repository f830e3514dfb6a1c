#include "transport/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"

namespace murmur::transport {
namespace {

constexpr int kVersion = 1;

bool finite_nonnegative(double x) { return std::isfinite(x) && x >= 0; }

double predicted(const CostBand& b, const CostSample& s) {
  return s.phases * (b.alpha_s + b.beta_s_per_byte * s.bytes_per_phase);
}

}  // namespace

double LinkCost::phase_seconds(double message_bytes, double bytes_per_phase) const {
  if (bands.empty()) return 0;
  const CostBand* band = &bands.back();
  for (const CostBand& b : bands) {
    if (message_bytes < b.max_bytes || b.max_bytes == 0) {
      band = &b;
      break;
    }
  }
  return band->alpha_s + band->beta_s_per_byte * bytes_per_phase;
}

std::vector<double> default_band_edges() { return {64.0 * 1024, 1024.0 * 1024}; }

CostBand fit_band(const std::vector<CostSample>& samples) {
  if (samples.empty()) throw Error("cost model: a band needs at least one sample to fit");
  // Weighted normal equations of t = a x1 + b x2 with x1 = phases, x2 = phases * bytes.
  double s11 = 0, s12 = 0, s22 = 0, r1 = 0, r2 = 0;
  for (const CostSample& s : samples) {
    if (!(s.seconds > 0) || !(s.phases > 0)) {
      throw Error(fmt::format("cost model: a sample of {} s over {} phases cannot be fitted",
                              s.seconds, s.phases));
    }
    const double w = 1 / (s.seconds * s.seconds);
    const double x1 = s.phases, x2 = s.phases * s.bytes_per_phase;
    s11 += w * x1 * x1;
    s12 += w * x1 * x2;
    s22 += w * x2 * x2;
    r1 += w * x1 * s.seconds;
    r2 += w * x2 * s.seconds;
  }
  CostBand band;
  const double det = s11 * s22 - s12 * s12;
  // Relative to the terms, so that a band of one message size (collinear x1, x2) is singular.
  if (std::abs(det) > 1e-9 * s11 * s22) {
    band.alpha_s = (r1 * s22 - r2 * s12) / det;
    band.beta_s_per_byte = (r2 * s11 - r1 * s12) / det;
  } else {
    band.alpha_s = -1;  // one size only: the fit below splits nothing, bandwidth alone
  }
  if (band.alpha_s < 0) {
    band.alpha_s = 0;
    band.beta_s_per_byte = s22 > 0 ? r2 / s22 : 0;
  }
  if (band.beta_s_per_byte < 0 || s22 == 0) {
    band.beta_s_per_byte = 0;
    band.alpha_s = r1 / s11;
  }
  band.samples = static_cast<int>(samples.size());
  for (const CostSample& s : samples) {
    band.max_relative_error =
        std::max(band.max_relative_error, std::abs(predicted(band, s) - s.seconds) / s.seconds);
  }
  return band;
}

LinkCost fit_link(const std::vector<CostSample>& samples, const std::vector<double>& edges) {
  std::vector<double> cuts{0};
  cuts.insert(cuts.end(), edges.begin(), edges.end());
  cuts.push_back(0);  // the last band is open above
  LinkCost link;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const double lo = cuts[i], hi = cuts[i + 1];
    std::vector<CostSample> in;
    for (const CostSample& s : samples) {
      if (s.message_bytes >= lo && (hi == 0 || s.message_bytes < hi)) in.push_back(s);
    }
    if (in.empty()) continue;
    CostBand band = fit_band(in);
    band.min_bytes = lo;
    band.max_bytes = hi;
    link.bands.push_back(band);
  }
  // The bands cover every size: each one starts where the one before it ends.
  if (!link.bands.empty()) {
    link.bands.front().min_bytes = 0;
    for (std::size_t i = 1; i < link.bands.size(); ++i) {
      link.bands[i].min_bytes = link.bands[i - 1].max_bytes;
    }
    link.bands.back().max_bytes = 0;
  }
  return link;
}

const LinkCost& CostModel::link(const std::string& backend, int ranks, int* fitted_ranks) const {
  const auto it = links.find(backend);
  if (it == links.end() || it->second.empty()) {
    std::string known;
    for (const auto& [name, _] : links) known += (known.empty() ? "" : ", ") + name;
    throw Error(fmt::format("cost model: no fit for backend '{}' (fitted: {}); run murmur-bench "
                            "fit --backends {}", backend, known.empty() ? "none" : known, backend));
  }
  const auto& by_ranks = it->second;
  auto at = by_ranks.upper_bound(ranks);  // the first count above `ranks`
  if (at != by_ranks.begin()) --at;       // the largest at or below it, where there is one
  if (fitted_ranks) *fitted_ranks = at->first;
  return at->second;
}

nlohmann::json to_json(const CostModel& model) {
  nlohmann::json links = nlohmann::json::object();
  for (const auto& [backend, by_ranks] : model.links) {
    for (const auto& [ranks, link] : by_ranks) {
      nlohmann::json bands = nlohmann::json::array();
      for (const CostBand& b : link.bands) {
        bands.push_back({{"min_bytes", b.min_bytes},
                         {"max_bytes", b.max_bytes == 0 ? nlohmann::json() : nlohmann::json(b.max_bytes)},
                         {"alpha_s", b.alpha_s},
                         {"beta_s_per_byte", b.beta_s_per_byte},
                         // null: no cost per byte was found (alpha alone fits the band)
                         {"gbit_per_s", b.beta_s_per_byte > 0 ? nlohmann::json(8e-9 / b.beta_s_per_byte)
                                                              : nlohmann::json()},
                         {"samples", b.samples},
                         {"max_relative_error", b.max_relative_error}});
      }
      links[backend][std::to_string(ranks)] = {{"bands", bands}};
    }
  }
  return {{"murmur_cost_model", kVersion}, {"machine", model.machine}, {"links", links}};
}

CostModel cost_model_from_json(const nlohmann::json& j, const std::string& where) {
  const auto bad = [&](const std::string& what) {
    return Error(fmt::format("{}: not a murmur cost model: {}", where, what));
  };
  if (!j.is_object()) throw bad("not a JSON object");
  if (!j.contains("murmur_cost_model") || j["murmur_cost_model"] != kVersion) {
    throw bad(fmt::format("murmur_cost_model must be {} (written by murmur-bench fit)", kVersion));
  }
  CostModel model;
  if (j.contains("machine") && j["machine"].is_string()) model.machine = j["machine"];
  if (!j.contains("links") || !j["links"].is_object()) throw bad("links must be an object");
  for (const auto& [backend, by_ranks] : j["links"].items()) {
    if (!by_ranks.is_object()) throw bad(fmt::format("links.{} must be an object", backend));
    for (const auto& [count, link] : by_ranks.items()) {
      const std::string key = fmt::format("links.{}.{}", backend, count);
      char* end = nullptr;
      const long ranks = std::strtol(count.c_str(), &end, 10);
      if (count.empty() || *end != '\0' || ranks < 1 || ranks > 1 << 20) {
        throw bad(fmt::format("{}: the rank count must be a positive integer", key));
      }
      if (!link.is_object() || !link.contains("bands") || !link["bands"].is_array() ||
          link["bands"].empty()) {
        throw bad(fmt::format("{}.bands must be a non-empty array", key));
      }
      LinkCost cost;
      for (const auto& b : link["bands"]) {
        const auto number = [&](const char* field) {
          if (!b.is_object() || !b.contains(field) || !b[field].is_number() ||
              !finite_nonnegative(b[field].get<double>())) {
            throw bad(fmt::format("{}.bands[{}].{} must be a number >= 0", key, cost.bands.size(), field));
          }
          return b[field].get<double>();
        };
        CostBand band;
        band.min_bytes = number("min_bytes");
        band.max_bytes = b.contains("max_bytes") && b["max_bytes"].is_null() ? 0 : number("max_bytes");
        band.alpha_s = number("alpha_s");
        band.beta_s_per_byte = number("beta_s_per_byte");
        if (b.contains("samples") && b["samples"].is_number_integer()) band.samples = b["samples"];
        if (b.contains("max_relative_error") && b["max_relative_error"].is_number()) {
          band.max_relative_error = b["max_relative_error"];
        }
        const double start = cost.bands.empty() ? 0 : cost.bands.back().max_bytes;
        if (band.min_bytes != start || (band.max_bytes != 0 && band.max_bytes <= band.min_bytes) ||
            (!cost.bands.empty() && cost.bands.back().max_bytes == 0)) {
          throw bad(fmt::format("{}.bands[{}]: bands must cover the sizes in order from 0, the "
                                "last one open (max_bytes null)", key, cost.bands.size()));
        }
        cost.bands.push_back(band);
      }
      if (cost.bands.back().max_bytes != 0) {
        throw bad(fmt::format("{}: the last band must be open above (max_bytes null)", key));
      }
      model.links[backend][static_cast<int>(ranks)] = std::move(cost);
    }
  }
  return model;
}

CostModel read_cost_model(const std::filesystem::path& file) {
  const std::string text = read_text_file(file);
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw Error(fmt::format("{}: not JSON", file.string()));
  return cost_model_from_json(j, file.string());
}

void write_cost_model(const std::filesystem::path& file, const CostModel& model) {
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  atomic_write_file(file, to_json(model).dump(2) + "\n");
}

std::filesystem::path default_cost_model_path() {
  if (const char* p = std::getenv("MURMUR_COST_MODEL"); p && *p) return p;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    return std::filesystem::path(x) / "murmur" / "cost_model.json";
  }
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : "/tmp") / ".cache" / "murmur" / "cost_model.json";
}

}  // namespace murmur::transport
