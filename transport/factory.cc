#include "transport/factory.h"

#include "core/error.h"
#include "core/names.h"
#include "transport/address.h"
#include "transport/rendezvous.h"
#include "transport/tcp/bootstrap.h"
#include "transport/tcp/transport.h"
#ifdef MURMUR_WITH_UCX
#include "transport/ucx/make.h"
#endif
#ifdef MURMUR_WITH_OFI
#include "transport/ofi/make.h"
#endif

namespace murmur::transport {

std::unique_ptr<Transport> make_transport(const TransportConfig& given, int rank, int world_size) {
  TransportConfig config = given;
  config.host = choose_listen_address(given, world_size).address;  // "auto" made concrete
  // "ofi:<provider>" and "ucx:none" name a backend with one option set (see factory.h).
  if (const auto colon = given.backend.find(':'); colon != std::string::npos) {
    const std::string base = given.backend.substr(0, colon);
    const std::string variant = given.backend.substr(colon + 1);
    if (base == "ofi" && !variant.empty()) {
      config.ofi_provider = variant;
    } else if (base == "ucx" && variant == "none") {
      config.ucx_peer_failure = false;
    } else {
      throw ConfigError("transport.backend: " + given.backend +
                        ": unknown variant (ofi:<provider> or ucx:none)");
    }
    config.backend = base;
  }
  const std::string& b = config.backend;
  if (b == "tcp") {
    return std::make_unique<tcp::Transport>(config, rank, world_size,
                                            make_rendezvous(config, world_size, rank));
  }
  if (b == "inproc") {
    throw ConfigError("transport.backend: inproc ranks are threads of one process; make them "
                      "with inproc::make_world(size)");
  }
#ifdef MURMUR_WITH_UCX
  if (b == "ucx") {
    // The bootstrap stays for the run, so that a restarted peer can meet this one again.
    return ucx::make_transport(config, rank, world_size,
                               std::make_unique<TcpBootstrap>(config, rank, world_size));
  }
#endif
#ifdef MURMUR_WITH_OFI
  if (b == "ofi") {
    return ofi::make_transport(config, rank, world_size,
                               std::make_unique<TcpBootstrap>(config, rank, world_size));
  }
#endif
  throw ConfigError("transport.backend: " + b + ": not built into this binary (built: tcp" +
#ifdef MURMUR_WITH_UCX
                    std::string(", ucx") +
#endif
#ifdef MURMUR_WITH_OFI
                    std::string(", ofi") +
#endif
                    ")");
}

std::vector<std::string> process_backends() {
  std::vector<std::string> out{"tcp"};
#ifdef MURMUR_WITH_UCX
  out.push_back("ucx");
#endif
#ifdef MURMUR_WITH_OFI
  out.push_back("ofi");
#endif
  return out;
}

namespace {
// What transport.backend takes (core/names.h): the process backends of this build, and inproc
// (threads of one process: murmur-sim and tests).
[[maybe_unused]] const bool kRegistered = [] {
  const std::vector<std::string> backends = process_backends();
  std::vector<std::string_view> names(backends.begin(), backends.end());
  names.push_back("inproc");
  return register_names("transport.backend", names);
}();
}  // namespace

CollectiveOptions collective_options(const TransportConfig& config) {
  CollectiveOptions o;
  o.timeout = std::chrono::milliseconds(config.recv_timeout_ms);
  o.chunk_bytes = static_cast<std::size_t>(config.chunk_bytes);
  return o;
}

}  // namespace murmur::transport
