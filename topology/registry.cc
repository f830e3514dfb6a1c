// The list of every graph and weights scheme, one line each. A row is defined beside its
// builder; naming it here is also what links it into every binary that uses topology (the
// library is static, and nothing else references the rows), so there is no self-registration.
#include "topology/registry.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "core/names.h"

// Adding a graph: define its row (a GraphInfo) beside its builder, add one line here.
#define MURMUR_TOPOLOGY_GRAPHS(X) \
  X(kRingGraph)                   \
  X(kRingDirectedGraph)           \
  X(kTorusGraph)                  \
  X(kCompleteGraph)               \
  X(kHypercubeGraph)              \
  X(kExponentialGraph)            \
  X(kOnePeerExponentialGraph)     \
  X(kRandomMatchingGraph)         \
  X(kGossipGradGraph)             \
  X(kRandomKoutGraph)             \
  X(kCustomGraph)

// Adding a weights scheme: define its row (a WeightsInfo), add one line here.
#define MURMUR_TOPOLOGY_WEIGHTS(X) \
  X(kUniformWeights)               \
  X(kMetropolisWeights)            \
  X(kCustomWeights)

namespace murmur::topology {

#define MURMUR_DECLARE_GRAPH(row) extern const GraphInfo row;
#define MURMUR_DECLARE_WEIGHTS(row) extern const WeightsInfo row;
#define MURMUR_ADDRESS_OF(row) &row,
MURMUR_TOPOLOGY_GRAPHS(MURMUR_DECLARE_GRAPH)
MURMUR_TOPOLOGY_WEIGHTS(MURMUR_DECLARE_WEIGHTS)

namespace {

constexpr const GraphInfo* kGraphs[] = {MURMUR_TOPOLOGY_GRAPHS(MURMUR_ADDRESS_OF)};
constexpr const WeightsInfo* kWeights[] = {MURMUR_TOPOLOGY_WEIGHTS(MURMUR_ADDRESS_OF)};

template <class Row>
std::vector<std::string_view> names_of(std::span<const Row* const> rows) {
  std::vector<std::string_view> names;
  names.reserve(rows.size());
  for (const Row* row : rows) names.push_back(row->name);
  return names;
}

template <class Row>
const Row& find_row(std::span<const Row* const> rows, std::string_view name, const char* key,
                    const char* what) {
  const auto it = std::find_if(rows.begin(), rows.end(),
                               [&](const Row* row) { return row->name == name; });
  if (it != rows.end()) return **it;
  throw ConfigError(fmt::format("{}: unknown {} '{}' (known: {})", key, what, name,
                                fmt::join(names_of(rows), ", ")));
}

}  // namespace

std::span<const GraphInfo* const> graphs() { return kGraphs; }
std::span<const WeightsInfo* const> weights_schemes() { return kWeights; }

std::vector<std::string_view> graph_names() { return names_of(graphs()); }
std::vector<std::string_view> weights_names() { return names_of(weights_schemes()); }

namespace {
// What topology.graph and topology.weights take, for the config loader (core/names.h). The rows
// are constant-initialized, so reading them here, during static initialization, is safe.
[[maybe_unused]] const bool kRegistered =
    register_names("topology.graph", graph_names()) && register_names("topology.weights", weights_names());
}  // namespace

const GraphInfo& find_graph(std::string_view name) {
  return find_row(graphs(), name, "topology.graph", "graph");
}

const WeightsInfo& find_weights(std::string_view name) {
  return find_row(weights_schemes(), name, "topology.weights", "scheme");
}

Graph make_graph(int n, bool directed, std::vector<std::vector<int>> out) {
  for (auto& row : out) {
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
  }
  return Graph{n, directed, std::move(out)};
}

void check_matrix_shape(const TopologyConfig& c, int n) {
  if (static_cast<int>(c.matrix.size()) != n) {
    throw ConfigError(fmt::format("topology.matrix: {} rows for {} peers (must be {} x {})",
                                  c.matrix.size(), n, n, n));
  }
  for (std::size_t i = 0; i < c.matrix.size(); ++i) {
    if (static_cast<int>(c.matrix[i].size()) != n) {
      throw ConfigError(fmt::format("topology.matrix: row {} has {} entries (must be {})", i,
                                    c.matrix[i].size(), n));
    }
  }
}

}  // namespace murmur::topology
