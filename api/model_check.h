// Every peer trains the same model, or the averaging mixes unrelated numbers: before the first
// exchange, each peer's description of its parameters (a line per tensor: name, shape, dtype) is
// checked against rank 0's, and a difference anywhere is refused on every rank with the same
// message, naming the rank and the first tensor that differs. Called by the thread that drives
// the transport; every rank calls it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace murmur::api {

// The first difference between `mine` (rank `rank`'s lines) and rank 0's, as a sentence; ""
// when they are the same.
std::string first_difference(const std::vector<std::string>& mine, int rank,
                             const std::vector<std::string>& theirs);

// Throws ConfigError("the model differs between peers: ...") on every rank when some rank's
// `description` differs from rank 0's; PeerLost when a rank does not answer within `timeout`.
void check_same_model(transport::Transport& transport, const std::vector<std::string>& description,
                      std::chrono::milliseconds timeout);

}  // namespace murmur::api
