// Setup and teardown of the libfabric backend: provider choice, fabric objects, name swap.
#include "transport/ofi/transport.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <random>

#include <fmt/format.h>
#include <rdma/fi_cm.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "transport/ofi/region.h"

namespace murmur::transport::ofi {
namespace {

// "tcp" alone is a MSG provider in 1.17; RDM endpoints over it come from the rxm layer.
std::string provider_name(const std::string& wanted) {
  return wanted == "tcp" ? "tcp;ofi_rxm" : wanted;
}

// `source`: the address the endpoint binds to (transport.host made concrete), for the
// providers that address by IP; "" leaves the choice to the provider.
Info get_info(const std::string& provider, std::uint64_t caps, const std::string& source) {
  Info hints(fi_allocinfo());
  if (!hints) throw TransportError("ofi: fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = caps;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->av_type = FI_AV_TABLE;
  // Two messages under one tag must match receives in the order they were sent.
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  if (!provider.empty()) hints->fabric_attr->prov_name = strdup(provider.c_str());
  fi_info* found = nullptr;
  int ret = fi_getinfo(FI_VERSION(1, 9), source.empty() ? nullptr : source.c_str(), nullptr,
                       source.empty() ? 0 : FI_SOURCE, hints.get(), &found);
  if (ret == -FI_ENODATA) return nullptr;
  MURMUR_FI_CHECK(ret);
  return Info(found);
}

}  // namespace

Transport::Transport(const TransportConfig& config, int rank, int world_size,
                     Bootstrap& bootstrap)
    : rank_(rank),
      world_size_(world_size),
      max_frame_(static_cast<std::size_t>(config.max_frame_bytes)),
      connect_timeout_ms_(config.connect_timeout_ms),
      liveness_(config.host, std::chrono::milliseconds(config.peer_timeout_ms), rank) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw TransportError(fmt::format("ofi: rank {} is outside a world of {}", rank, world_size));
  }
  const int rank_bits = std::max(1, static_cast<int>(std::bit_width(
                                        static_cast<unsigned>(world_size - 1))));
  rank_shift_ = 64 - rank_bits;
  kind_shift_ = rank_shift_ - 2;
  max_tag_ = (Tag{1} << kind_shift_) - 1;
  lost_.assign(world_size, false);
  missed_.assign(world_size, std::string());
  dropped_.assign(world_size, false);
  lost_until_dropped_.assign(world_size, false);
  open(config);
  slots_ = std::make_unique<Slots>([this](std::span<std::byte> bytes) {
    return std::make_unique<Region>(domain_.get(), ep_.get(), mr_mode_, next_key_++, bytes);
  });

  std::size_t len = 0;
  fi_getname(&ep_->fid, nullptr, &len);  // -FI_ETOOSMALL, with the size
  std::vector<std::byte> name(len);
  MURMUR_FI_CHECK(fi_getname(&ep_->fid, name.data(), &len));
  name.resize(len);
  // What a peer needs to watch us rides along in front of the name.
  const std::vector<std::byte> blob = liveness_.prefixed(name, config.host);

  std::vector<int> peers;
  for (int r = 0; r < world_size; ++r) {
    if (r != rank) peers.push_back(r);
  }
  restarts_.remember(peers, blob);
  const Deadline deadline = deadline_after(std::chrono::milliseconds(config.connect_timeout_ms));
  std::vector<std::string> missed;
  std::vector<std::vector<std::byte>> names =
      bootstrap.exchange_with_live(peers, blob, deadline, missed);
  if (names.size() != peers.size() || missed.size() != peers.size()) {
    throw TransportError(fmt::format("ofi: bootstrap returned {} names for {} peers",
                                     names.size(), peers.size()));
  }
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (missed[i].empty()) {
      liveness_.take_address(peers[i], names[i], "ofi");
      continue;
    }
    // Not met (dead, or left the run): lost, with no address, until it is restarted and meets
    // us (revive); its requests fail at once.
    lost_[peers[i]] = true;
    missed_[peers[i]] = missed[i];
    spdlog::warn("ofi: rank {}: did not meet rank {} at start ({}); it counts as lost until it "
                 "comes back", rank, peers[i], missed[i]);
  }
  names.insert(names.begin() + rank, name);
  addrs_.assign(world_size, FI_ADDR_UNSPEC);
  for (int r = 0; r < world_size; ++r) {
    if (lost_[r]) continue;
    int inserted = fi_av_insert(av_.get(), names[r].data(), 1, &addrs_[r], 0, nullptr);
    if (inserted != 1) {
      throw TransportError(fmt::format("ofi: fi_av_insert of rank {}'s name failed ({})", r,
                                       inserted < 0 ? fi_strerror(-inserted) : "not inserted"));
    }
  }
}

void Transport::open(const TransportConfig& config) {
  const std::string provider = provider_name(config.ofi_provider);
  // tcp's endpoint on the peer's own address, as its bootstrap and liveness sockets: without it
  // the provider takes an interface of its own choice, which need not be the one the other
  // hosts reach (FI_TCP_IFACE still narrows it).
  const std::string source = config.ofi_provider == "tcp" ? config.host : "";
  info_ = get_info(provider, FI_TAGGED | FI_MSG | FI_RMA, source);
  has_rma_ = info_ != nullptr;
  if (!info_) info_ = get_info(provider, FI_TAGGED | FI_MSG, source);
  if (!info_) {
    throw TransportError(fmt::format(
        "ofi: no RDM provider \"{}\" with FI_TAGGED here (see `fi_info -p {}`; FI_PROVIDER "
        "also filters)", provider, config.ofi_provider));
  }
  mr_mode_ = info_->domain_attr->mr_mode;
  max_msg_size_ = info_->ep_attr->max_msg_size;
  // Keys chosen by us (no FI_MR_PROV_KEY) must differ between the ranks sharing a domain.
  next_key_ = (static_cast<std::uint64_t>(rank_) << 32) + 1;

  fid_fabric* fabric = nullptr;
  MURMUR_FI_CHECK(fi_fabric(info_->fabric_attr, &fabric, nullptr));
  fabric_.reset(fabric);
  fid_domain* domain = nullptr;
  MURMUR_FI_CHECK(fi_domain(fabric, info_.get(), &domain, nullptr));
  domain_.reset(domain);

  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = static_cast<std::size_t>(world_size_);
  fid_av* av = nullptr;
  MURMUR_FI_CHECK(fi_av_open(domain, &av_attr, &av, nullptr));
  av_.reset(av);

  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_NONE;
  fid_cq* cq = nullptr;
  MURMUR_FI_CHECK(fi_cq_open(domain, &cq_attr, &cq, nullptr));
  cq_.reset(cq);

  fid_ep* ep = nullptr;
  MURMUR_FI_CHECK(fi_endpoint(domain, info_.get(), &ep, nullptr));
  ep_.reset(ep);
  if (std::strcmp(info_->fabric_attr->prov_name, "shm") == 0) {
    // shm names its shared-memory region after the process id ("<pid>:<uid>:<n>" in
    // /dev/shm). A process killed with SIGKILL leaves its region behind, and a later process
    // that gets the same pid (pid_max is often 32768) then fails fi_enable with "Device or
    // resource busy". A random part makes every region's name new.
    std::random_device entropy;
    const std::string name = fmt::format("murmur-{}-{:08x}{:08x}", ::getpid(), entropy(), entropy());
    MURMUR_FI_CHECK(fi_setname(&ep->fid, const_cast<char*>(name.c_str()), name.size() + 1));
  }
  MURMUR_FI_CHECK(fi_ep_bind(ep, &av->fid, 0));
  MURMUR_FI_CHECK(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
  MURMUR_FI_CHECK(fi_enable(ep));
}

Transport::~Transport() {
  // Cancel what is still posted so that the provider lets go of the caller's buffers, then
  // close bottom-up: endpoint, CQ, AV, domain, fabric (the members' reverse order).
  for (auto& [op, state] : inflight_) {
    for (int i = 0; i < 2; ++i) {
      if (op->posted[i]) fi_cancel(&ep_->fid, &op->ctx[i].fi);
    }
  }
  posts_.clear();
  // The endpoint goes first so that nothing writes into the slots after their memory is freed.
  ep_.reset();
  slots_.reset();
  cq_.reset();
  av_.reset();
  domain_.reset();
  fabric_.reset();
}

std::string Transport::provider() const { return info_->fabric_attr->prov_name; }

std::unique_ptr<transport::Region> Transport::register_region(std::span<std::byte> bytes) {
  return std::make_unique<Region>(domain_.get(), ep_.get(), mr_mode_, next_key_++, bytes);
}

}  // namespace murmur::transport::ofi
