// Entry point of the ucx backend, called by transport/factory.cc when the config asks for "ucx".
// The returned Transport belongs to the caller and is driven by one thread. A Bootstrap passed by
// reference is used only during construction (to swap UCX worker addresses with the other ranks);
// one passed by ownership stays for the run, so that a restarted rank can meet us again.
#pragma once

#include <memory>
#include <span>

#include "core/config.h"
#include "transport/bootstrap.h"
#include "transport/transport.h"

namespace murmur::transport::ucx {

// Builds a ucx transport for `rank` of `world_size`, connected to every other rank (worker
// addresses are swapped with all of them). Throws TransportError if UCX cannot be initialised,
// PeerLost if a peer does not answer the exchange or the wire-up in config.connect_timeout_ms.
std::unique_ptr<Transport> make_transport(const TransportConfig& config, int rank, int world_size,
                                          Bootstrap& bootstrap);
// The same, connected only to `peers` (ascending, without `rank`): addresses are swapped with
// those ranks alone, as ARCHITECTURE.md asks for sparse topologies. Every rank in `peers` must
// name this rank in its own list.
std::unique_ptr<Transport> make_transport(const TransportConfig& config, int rank, int world_size,
                                          Bootstrap& bootstrap, std::span<const int> peers);
// Connected to every other rank, keeping `bootstrap` to answer restarted ranks with.
std::unique_ptr<Transport> make_transport(const TransportConfig& config, int rank, int world_size,
                                          std::unique_ptr<Bootstrap> bootstrap);

}  // namespace murmur::transport::ucx
