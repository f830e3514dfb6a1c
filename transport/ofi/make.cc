#include "transport/ofi/make.h"

#include "transport/ofi/transport.h"

namespace murmur::transport::ofi {

std::unique_ptr<transport::Transport> make_transport(const TransportConfig& config, int rank,
                                                     int world_size, Bootstrap& bootstrap) {
  return std::make_unique<Transport>(config, rank, world_size, bootstrap);
}

}  // namespace murmur::transport::ofi
