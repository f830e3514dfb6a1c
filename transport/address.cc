#include "transport/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace murmur::transport {
namespace {

const char* process_env(const char* name) { return std::getenv(name); }

std::string ipv4_text(const in_addr& a) {
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a, text, sizeof text);
  return text;
}

std::vector<std::string> split_commas(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const auto comma = s.find(',');
    std::string_view item = s.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

std::string listing(const std::vector<InterfaceAddress>& interfaces) {
  if (interfaces.empty()) return "none with an IPv4 address is up";
  std::string out;
  for (const auto& i : interfaces) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} ({})", i.name, i.address);
  }
  return out;
}

}  // namespace

std::vector<std::string> addresses_of(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0) return {};
  std::vector<std::string> out;
  for (addrinfo* a = found; a; a = a->ai_next) {
    out.push_back(ipv4_text(reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr));
  }
  freeaddrinfo(found);
  return out;
}

std::string host_name() {
  char buf[HOST_NAME_MAX + 1] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::vector<InterfaceAddress> host_interfaces() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return {};
  std::vector<InterfaceAddress> out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP)) continue;
    out.push_back({i->ifa_name, ipv4_text(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr),
                   (i->ifa_flags & IFF_LOOPBACK) != 0});
  }
  freeifaddrs(list);
  return out;
}

std::string default_route_interface() {
  // Iface Destination Gateway Flags RefCnt Use Metric Mask ...; hex, host byte order.
  std::ifstream in("/proc/net/route");
  std::string line;
  std::getline(in, line);  // the header
  std::string best;
  long best_metric = LONG_MAX;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    std::string iface, dest, gateway, mask;
    unsigned flags = 0;
    long refcnt = 0, use = 0, metric = 0;
    if (!(f >> iface >> dest >> gateway >> std::hex >> flags >> std::dec >> refcnt >> use >> metric >> mask)) {
      continue;
    }
    constexpr unsigned kRouteUp = 0x1;  // RTF_UP
    if (dest == "00000000" && mask == "00000000" && (flags & kRouteUp) && metric < best_metric) {
      best = iface;
      best_metric = metric;
    }
  }
  return best;
}

std::vector<InterfaceAddress> select_interfaces(const std::vector<InterfaceAddress>& interfaces,
                                                const std::string& spec) {
  std::string_view s = spec;
  const bool exclude = s.starts_with('^');
  if (exclude) s.remove_prefix(1);
  const bool exact = s.starts_with('=');
  if (exact) s.remove_prefix(1);
  const std::vector<std::string> names = split_commas(s);
  std::vector<InterfaceAddress> out;
  for (const auto& i : interfaces) {
    bool listed = false;
    for (const auto& n : names) listed = listed || (exact ? i.name == n : i.name.starts_with(n));
    if (listed != exclude) out.push_back(i);
  }
  return out;
}

bool is_loopback_host(const std::string& host) {
  return host.starts_with("127.") || host == "localhost" || host == "::1" || host == "[::1]";
}

ChosenAddress choose_listen_address(const TransportConfig& config, int world_size, int local_size,
                                    const Getenv& getenv) {
  if (config.host != "auto") return {config.host, "transport.host"};
  const auto interfaces = host_interfaces();
  std::string spec = config.interface;
  std::string key = "transport.interface";
  if (spec.empty()) {
    if (const char* env = getenv("MURMUR_SOCKET_IFNAME"); env && *env) {
      spec = env;
      key = "$MURMUR_SOCKET_IFNAME";
    }
  }
  if (!spec.empty()) {
    const auto chosen = select_interfaces(interfaces, spec);
    if (chosen.empty()) {
      throw ConfigError(fmt::format("{} \"{}\": no interface that is up with an IPv4 address matches; "
                                    "this host has: {}", key, spec, listing(interfaces)));
    }
    return {chosen.front().address, fmt::format("interface {} ({})", chosen.front().name, key)};
  }
  if (world_size <= 1 || local_size >= world_size) {
    return {"127.0.0.1", fmt::format("loopback: all {} peers on this host", world_size)};
  }
  if (const std::string route = default_route_interface(); !route.empty()) {
    for (const auto& i : interfaces) {
      if (i.name == route && !i.loopback) return {i.address, fmt::format("interface {} (the default route)", i.name)};
    }
  }
  const std::string name = host_name();
  const auto by_name = addresses_of(name);
  for (const auto& a : by_name) {
    if (!is_loopback_host(a)) return {a, fmt::format("the address of this host's name {}", name)};
  }
  throw ConfigError(fmt::format(
      "transport.host: auto found no address that the other hosts can reach ({} of the {} peers "
      "are on this host): there is no IPv4 default route, and this host's name \"{}\" resolves to "
      "{}. Set transport.interface (or $MURMUR_SOCKET_IFNAME) to one of: {}; or transport.host",
      local_size, world_size, name, by_name.empty() ? "nothing" : fmt::format("{}", fmt::join(by_name, ", ")),
      listing(interfaces)));
}

ChosenAddress choose_listen_address(const TransportConfig& config, int world_size) {
  return choose_listen_address(config, world_size, local_size(process_env), process_env);
}

}  // namespace murmur::transport
