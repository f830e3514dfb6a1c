#include "transport/ucx/make.h"

#include <vector>

#include "transport/ucx/transport.h"

namespace murmur::transport::ucx {

std::unique_ptr<transport::Transport> make_transport(const TransportConfig& config, int rank,
                                                     int world_size, Bootstrap& bootstrap) {
  std::vector<int> peers;
  for (int r = 0; r < world_size; ++r) {
    if (r != rank) peers.push_back(r);
  }
  return std::make_unique<Transport>(config, rank, world_size, bootstrap, peers);
}

std::unique_ptr<transport::Transport> make_transport(const TransportConfig& config, int rank,
                                                     int world_size, Bootstrap& bootstrap,
                                                     std::span<const int> peers) {
  return std::make_unique<Transport>(config, rank, world_size, bootstrap, peers);
}

std::unique_ptr<transport::Transport> make_transport(const TransportConfig& config, int rank,
                                                     int world_size,
                                                     std::unique_ptr<Bootstrap> bootstrap) {
  std::vector<int> peers;
  for (int r = 0; r < world_size; ++r) {
    if (r != rank) peers.push_back(r);
  }
  auto t = std::make_unique<Transport>(config, rank, world_size, *bootstrap, peers);
  t->keep_bootstrap(std::move(bootstrap));
  return t;
}

}  // namespace murmur::transport::ucx
