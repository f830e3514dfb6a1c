// Entry point of the ofi backend, called by transport/factory.cc when the config asks for "ofi".
// The returned Transport belongs to the caller and is driven by one thread. A Bootstrap passed by
// reference is used only during construction (to swap libfabric endpoint names with the other
// ranks); one passed by ownership stays for the run, so that a restarted rank can meet us again.
#pragma once

#include <memory>

#include "core/config.h"
#include "transport/bootstrap.h"
#include "transport/transport.h"

namespace murmur::transport::ofi {

// Builds a connected ofi transport for `rank` of `world_size`. Throws TransportError if the
// library cannot be initialised, PeerLost if a peer does not answer the exchange in time.
std::unique_ptr<Transport> make_transport(const TransportConfig& config, int rank, int world_size,
                                          Bootstrap& bootstrap);
std::unique_ptr<Transport> make_transport(const TransportConfig& config, int rank, int world_size,
                                          std::unique_ptr<Bootstrap> bootstrap);

}  // namespace murmur::transport::ofi
