// algorithm.wire: the averaging's messages in fp16 or bf16 with fp32 sums (low precision on the
// wire, Gupta et al. 2015; Micikevicius et al. 2018). The exact averages (allreduce, local_sgd,
// diloco) run transport::HalfRingAllreduce; dpsgd sends its parameters narrowed and mixes the
// differences in fp32 (dpsgd.h).
#pragma once

#include <memory>
#include <optional>

#include "core/config.h"
#include "core/half.h"
#include "membership/neighborhood.h"
#include "transport/collectives.h"
#include "transport/half_ring_allreduce.h"

namespace murmur::optimizers {

// The 16-bit format algorithm.wire asks for; none for fp32.
std::optional<HalfFormat> half_wire(const WireConfig& wire);

// The algorithms that take algorithm.wire, and what each refuses alongside it: throws
// ConfigError naming the key. Called by check_algorithm, at config time.
void check_wire(const AlgorithmConfig& algorithm);

// A 16-bit wire runs on host memory (device: cpu) for now: throws ConfigError on a GPU peer.
void check_wire_device(const WireConfig& wire, bool host_memory);

// The 16-bit ring allreduce for algorithm.wire over hood's transport, or null for fp32. Throws
// ConfigError on a GPU peer, and with run.on_peer_failure = continue (the ring is the whole
// world's, where the fp32 exact average agrees on the survivors').
std::unique_ptr<transport::HalfRingAllreduce> make_half_allreduce(
    const WireConfig& wire, membership::Neighborhood& hood, bool host_memory,
    const TransportConfig& transport, std::uint64_t seed);

}  // namespace murmur::optimizers
