// Which address a peer listens on and publishes: `transport.host: auto` (the default) made
// concrete once, before any socket is opened, so that the tcp transport, the UCX/libfabric
// bootstrap and the liveness sockets all use the same one.
//
//   1. transport.interface, else $MURMUR_SOCKET_IFNAME: the first interface (in the system's
//      order) that the list selects, as NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME do: a comma
//      list of name prefixes ("ib,eth"), "=" before it for exact names ("=eth0"), "^" before it
//      to exclude those ("^docker,lo");
//   2. else loopback, when the whole world is on this host (its local size is the world size);
//   3. else the interface of the IPv4 default route;
//   4. else the address this host's name resolves to, if it is not a loopback one.
// IPv4 only, as the rest of the tcp code. Throws ConfigError naming the key when nothing fits.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "transport/world.h"

namespace murmur::transport {

struct InterfaceAddress {
  std::string name;     // "eth0"
  std::string address;  // "10.0.0.5"
  bool loopback = false;
};

// What the host has: every IPv4 address of an interface that is up, in getifaddrs' order.
std::vector<InterfaceAddress> host_interfaces();
// The interface of the IPv4 default route (/proc/net/route), or "" where there is none.
std::string default_route_interface();

// Those of `interfaces` that `spec` selects (the NCCL_SOCKET_IFNAME syntax above), in order.
std::vector<InterfaceAddress> select_interfaces(const std::vector<InterfaceAddress>& interfaces,
                                                const std::string& spec);

struct ChosenAddress {
  std::string address;
  std::string why;  // "transport.host", "interface eth0 (transport.interface)", "loopback: ..."
};

// transport.host made concrete, by the rules above. `local_size`: the peers on this host.
ChosenAddress choose_listen_address(const TransportConfig& config, int world_size, int local_size,
                                    const Getenv& getenv);
ChosenAddress choose_listen_address(const TransportConfig& config, int world_size);  // the process's

// The IPv4 addresses host name `name` resolves to, in getaddrinfo's order; none if it does not.
std::vector<std::string> addresses_of(const std::string& name);

// This host's name as gethostname() gives it (its UTS namespace's), "?" if it cannot.
std::string host_name();

// Whether `host` (the host part of a published "host:port") is a loopback address or name.
bool is_loopback_host(const std::string& host);

}  // namespace murmur::transport
