// Creates the Transport the config asks for. tcp is always built; ucx and ofi where the build
// found their libraries (MURMUR_WITH_UCX / MURMUR_WITH_OFI), bootstrapped over a TcpBootstrap
// that lives only during their construction. inproc worlds are made whole, by
// inproc::make_world(size), since their ranks share one process.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "transport/collectives.h"
#include "transport/transport.h"

namespace murmur::transport {

// A connected-on-demand transport for `rank` of `world_size`. Throws ConfigError for inproc or
// for a backend this build lacks, TransportError if it cannot listen or initialise. For benches
// and tests, config.backend may also name a variant: "ofi:<provider>" (ofi_provider set) or
// "ucx:none" (ucx_peer_failure false); YAML configs set those keys instead.
std::unique_ptr<Transport> make_transport(const TransportConfig& config, int rank, int world_size);

// The backends this build can make with make_transport: "tcp", then "ucx" and "ofi" if built.
std::vector<std::string> process_backends();

// transport.recv_timeout_ms and chunk_bytes as collective options.
CollectiveOptions collective_options(const TransportConfig& config);

}  // namespace murmur::transport
