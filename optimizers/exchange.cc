#include "optimizers/exchange.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "transport/collectives.h"

namespace murmur::optimizers {

std::vector<std::size_t> exchange(membership::Neighborhood& hood, transport::Tag tag,
                                  const transport::Region& from, transport::ByteRange out,
                                  std::span<const int> send_to, RecvSlots& slots,
                                  std::span<const int> recv_from, bool exact_size) {
  transport::Transport& t = hood.transport();
  slots.reserve(std::max<std::size_t>(1, recv_from.size()));
  std::vector<transport::Request> recvs, sends;
  transport::CancelOnUnwind guard(t);
  guard.watch(recvs);
  guard.watch(sends);
  for (std::size_t k = 0; k < recv_from.size(); ++k) {
    recvs.push_back(t.recv(recv_from[k], tag, slots.region(), slots.range(k)));
  }
  for (int peer : send_to) sends.push_back(t.send(peer, tag, from, out));
  std::vector<std::size_t> got(recv_from.size(), kLost);
  for (std::size_t k = 0; k < recvs.size(); ++k) {
    if (!hood.wait(recvs[k], "a neighbor exchange receive")) continue;
    const std::size_t bytes = recvs[k].state()->bytes;
    if (exact_size && bytes != slots.range(k).size) {
      throw ProtocolError(fmt::format(
          "{}: rank {}: rank {} sent {} bytes under tag {:#x}, expected {} (are the models the "
          "same size?)", t.name(), t.rank(), recv_from[k], bytes, tag, slots.range(k).size));
    }
    got[k] = bytes;
  }
  for (auto& s : sends) hood.wait(s, "a neighbor exchange send");
  return got;
}

void mix_received(device::Device& device, std::span<float> x, const topology::RankMixing& m,
                  std::span<const std::size_t> got, RecvSlots& slots,
                  std::vector<const float*>& inputs, std::vector<float>& weights) {
  inputs.clear();
  weights.clear();
  float self = static_cast<float>(m.self_weight);
  for (std::size_t k = 0; k < m.recv_from.size(); ++k) {
    if (got[k] == kLost) {
      self += static_cast<float>(m.recv_weights[k]);
      continue;
    }
    inputs.push_back(slots.slot(k).data());
    weights.push_back(static_cast<float>(m.recv_weights[k]));
  }
  device.mix(x, self, inputs, weights);
}

}  // namespace murmur::optimizers
