// AD-PSGD (`adpsgd`, Lian et al. 2018, "Asynchronous Decentralized Parallel Stochastic Gradient
// Descent") as the paper runs it: every peer steps at its own pace and nobody waits for a slow
// one. The graph is split into actives and passives (adpsgd_wire.h's split_roles, the paper's
// section 5). After each local step (every algorithm.local_steps), an active peer whose last
// exchange is done picks a uniformly random passive neighbor and, on its communication thread,
// sends it its model; the passive's responder thread, which serves requests while its peer
// computes, answers with its own model and takes the average; the active adds the average when
// the reply has landed, at a later step, without ever blocking its training on it. Each exchange
// is atomic: both end with (x_i + x_j) / 2 of the values each held when it began (a passive
// serves one request at a time; an active has one in flight and is never asked), plus the local
// steps each took meanwhile (the paper's update order: the gradient of the value read before).
// A passive's responder works on a published copy of its model (refreshed after each step) and
// a delta the training thread adds at its next step, so the training thread's parameters are
// written by that thread alone. A partner lost mid-exchange leaves this side as it was.
// Runs on host memory. Thread-compatible, like every Averaging; the responder is internal.
#pragma once

#include "optimizers/algorithm.h"

namespace murmur::optimizers {

extern const AlgorithmInfo kAdpsgd;

}  // namespace murmur::optimizers
