#include "transport/ofi/make.h"

#include "transport/ofi/transport.h"

namespace murmur::transport::ofi {

std::unique_ptr<transport::Transport> make_transport(const TransportConfig& config, int rank,
                                                     int world_size, Bootstrap& bootstrap) {
  return std::make_unique<Transport>(config, rank, world_size, bootstrap);
}

std::unique_ptr<transport::Transport> make_transport(const TransportConfig& config, int rank,
                                                     int world_size,
                                                     std::unique_ptr<Bootstrap> bootstrap) {
  auto t = std::make_unique<Transport>(config, rank, world_size, *bootstrap);
  t->keep_bootstrap(std::move(bootstrap));
  return t;
}

}  // namespace murmur::transport::ofi
