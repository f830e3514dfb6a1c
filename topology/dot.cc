#include "topology/dot.h"

#include <fmt/format.h>

namespace murmur::topology {

std::string to_dot(const Graph& g, std::string_view name, const MixingMatrix* weights) {
  // circo lays ranks out on a circle, which is how rings and exponential graphs read best.
  std::string out = fmt::format("{} \"{}\" {{\n  layout=circo;\n  node [shape=circle];\n",
                                g.directed ? "digraph" : "graph", name);
  for (int i = 0; i < g.n; ++i) out += fmt::format("  {};\n", i);
  const char* arrow = g.directed ? "->" : "--";
  for (int from = 0; from < g.n; ++from) {
    for (int to : g.out[from]) {
      if (!g.directed && to < from) continue;  // each undirected edge once
      std::string label;
      if (weights != nullptr) {
        const double forward = (*weights)(to, from);
        const double backward = (*weights)(from, to);
        label = (!g.directed && forward != backward)
                    ? fmt::format(" [label=\"{:.3g}/{:.3g}\"]", forward, backward)
                    : fmt::format(" [label=\"{:.3g}\"]", forward);
      }
      out += fmt::format("  {} {} {}{};\n", from, arrow, to, label);
    }
  }
  out += "}\n";
  return out;
}

}  // namespace murmur::topology
