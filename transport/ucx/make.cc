#include "transport/ucx/make.h"

#include <vector>

#include "transport/ucx/transport.h"

namespace murmur::transport::ucx {

namespace {

std::vector<int> all_but(int rank, int world_size) {
  std::vector<int> peers;
  for (int r = 0; r < world_size; ++r) {
    if (r != rank) peers.push_back(r);
  }
  return peers;
}

}  // namespace

std::unique_ptr<transport::Transport> make_transport(const TransportConfig& config, int rank,
                                                     int world_size, Bootstrap& bootstrap) {
  return std::make_unique<Transport>(config, rank, world_size, bootstrap,
                                     all_but(rank, world_size));
}

std::unique_ptr<transport::Transport> make_transport(const TransportConfig& config, int rank,
                                                     int world_size, Bootstrap& bootstrap,
                                                     std::span<const int> peers) {
  return std::make_unique<Transport>(config, rank, world_size, bootstrap, peers);
}

std::unique_ptr<transport::Transport> make_transport(const TransportConfig& config, int rank,
                                                     int world_size,
                                                     std::unique_ptr<Bootstrap> bootstrap) {
  auto t = std::make_unique<Transport>(config, rank, world_size, *bootstrap,
                                       all_but(rank, world_size));
  t->keep_bootstrap(std::move(bootstrap));
  return t;
}

}  // namespace murmur::transport::ucx
