#include "api/model_check.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"
#include "transport/checked_message.h"
#include "transport/collectives.h"
#include "transport/tag.h"

namespace murmur::api {
namespace {

const transport::CheckedKind kDescription{0x4353444d /* "MDSC" */, 1, std::uint64_t{64} << 20,
                                          "model description"};

// The rounds of kModelCheck: rank 0's description out, the verdicts' flags, the first verdict out.
constexpr std::int64_t kDescriptionRound = 0, kFlagsRound = 1, kVerdictRound = 2;

std::string joined(const std::vector<std::string>& lines) {
  std::string text;
  for (const auto& line : lines) text += line + "\n";
  return text.empty() ? std::string("\n") : text;  // a checked message holds at least a byte
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  return lines;
}

// `text` from `root` to every other rank: the root's own text, or what it sent.
std::string broadcast(transport::Transport& t, int root, const std::string& text, transport::Tag tag,
                      const transport::Patience& patience) {
  if (t.rank() == root) {
    for (int r = 0; r < t.world_size(); ++r) {
      if (r == root) continue;
      if (!transport::send_checked(t, r, tag, kDescription, text, patience)) {
        throw PeerLost(fmt::format("model check: rank {} did not take rank {}'s message within {} ms",
                                   r, root, patience.timeout.count()));
      }
    }
    return text;
  }
  transport::CheckedReceive receive(t, root, tag, kDescription);
  std::optional<std::string> got = receive.finish(patience);
  if (!got) {
    throw PeerLost(fmt::format("model check: nothing from rank {} within {} ms", root,
                               patience.timeout.count()));
  }
  return *got;
}

}  // namespace

std::string first_difference(const std::vector<std::string>& mine, int rank,
                             const std::vector<std::string>& theirs) {
  const std::size_t common = std::min(mine.size(), theirs.size());
  for (std::size_t i = 0; i < common; ++i) {
    if (mine[i] != theirs[i]) {
      return fmt::format("tensor {} of {}: rank {} has `{}` where rank 0 has `{}`", i + 1,
                         theirs.size(), rank, mine[i], theirs[i]);
    }
  }
  if (mine.size() == theirs.size()) return "";
  const bool more = mine.size() > theirs.size();
  return fmt::format("rank {} has {} tensors where rank 0 has {}; the first {}: `{}`", rank,
                     mine.size(), theirs.size(), more ? "extra one" : "missing one",
                     more ? mine[common] : theirs[common]);
}

void check_same_model(transport::Transport& t, const std::vector<std::string>& description,
                      std::chrono::milliseconds timeout) {
  const int n = t.world_size();
  if (n < 2) return;
  const transport::Patience patience{timeout, timeout};
  const transport::TagLayout layout(t);
  const std::string root_text = broadcast(
      t, 0, joined(description), layout.make(transport::purpose::kModelCheck, kDescriptionRound), patience);
  const std::string verdict = t.rank() == 0 ? "" : first_difference(description, t.rank(), split(root_text));

  // Which ranks differ: a slot per rank, 1 where its verdict is not empty.
  std::vector<float> flags(static_cast<std::size_t>(n), 0.0f);
  flags[static_cast<std::size_t>(t.rank())] = verdict.empty() ? 0.0f : 1.0f;
  const auto region = t.register_region(std::as_writable_bytes(std::span(flags)));
  transport::Allreduce(t, {timeout}).run(*region, flags, transport::ReduceOp::kSum,
                                         layout.make(transport::purpose::kModelCheck, kFlagsRound));
  const auto first = std::find_if(flags.begin(), flags.end(), [](float f) { return f > 0.5f; });
  if (first == flags.end()) return;
  const int differs = static_cast<int>(first - flags.begin());
  const std::string said = broadcast(t, differs, verdict,
                                     layout.make(transport::purpose::kModelCheck, kVerdictRound), patience);
  throw ConfigError("the model differs between peers: " + said +
                    " (every peer must attach the same parameters, in the same order)");
}

}  // namespace murmur::api
