// transport.host: auto made concrete (transport/address.h): the interface list's syntax, the
// loopback of a world on one host, the default route's interface in a network namespace of the
// test's own, and a loopback address published from another host refused at the rendezvous.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>

#include "core/error.h"
#include "tests/skip.h"
#include "transport/address.h"
#include "transport/rendezvous.h"

namespace murmur::transport {
namespace {

Getenv env_of(const std::map<std::string, std::string>& env) {
  return [env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

TransportConfig auto_host() {
  TransportConfig c;
  c.host = "auto";
  return c;
}

TEST_CASE("interface lists select as NCCL_SOCKET_IFNAME does", "[transport][address]") {
  const std::vector<InterfaceAddress> host = {
      {"lo", "127.0.0.1", true}, {"eth0", "10.0.0.2"}, {"eth10", "10.0.1.2"},
      {"ib0", "10.1.0.2"}, {"docker0", "172.17.0.1"}};
  auto names = [&](const std::string& spec) {
    std::string out;
    for (const auto& i : select_interfaces(host, spec)) out += i.name + " ";
    return out;
  };
  CHECK(names("eth") == "eth0 eth10 ");       // prefixes
  CHECK(names("ib,eth") == "eth0 eth10 ib0 ");  // the system's order, not the list's
  CHECK(names("=eth1") == "");                   // exact names
  CHECK(names("=eth10, ib0") == "eth10 ib0 ");
  CHECK(names("^docker,lo") == "eth0 eth10 ib0 ");  // exclusions
  CHECK(names("^=eth0") == "lo eth10 ib0 docker0 ");
}

TEST_CASE("transport.host auto: explicit, the interface, or loopback for a world on one host",
          "[transport][address]") {
  TransportConfig c = auto_host();
  c.host = "10.9.8.7";
  CHECK(choose_listen_address(c, 4, 1, env_of({})).address == "10.9.8.7");  // an address wins
  c = auto_host();
  auto one_host = choose_listen_address(c, 4, 4, env_of({}));
  CHECK(one_host.address == "127.0.0.1");
  CHECK_THAT(one_host.why, Catch::Contains("all 4 peers on this host"));
  CHECK(choose_listen_address(c, 1, 1, env_of({})).address == "127.0.0.1");

  c.interface = "=lo";
  auto lo = choose_listen_address(c, 4, 1, env_of({}));
  CHECK(lo.address == "127.0.0.1");
  CHECK_THAT(lo.why, Catch::Contains("interface lo") && Catch::Contains("transport.interface"));
  c.interface.clear();
  auto by_env = choose_listen_address(c, 4, 1, env_of({{"MURMUR_SOCKET_IFNAME", "lo"}}));
  CHECK(by_env.address == "127.0.0.1");
  CHECK_THAT(by_env.why, Catch::Contains("$MURMUR_SOCKET_IFNAME"));

  c.interface = "nosuch";  // the key, the value and what this host has
  CHECK_THROWS_WITH(choose_listen_address(c, 4, 1, env_of({})),
                    Catch::Contains("transport.interface \"nosuch\"") && Catch::Contains("lo (127.0.0.1)"));
  c.interface.clear();
  CHECK_THROWS_WITH(choose_listen_address(c, 4, 1, env_of({{"MURMUR_SOCKET_IFNAME", "=eth99"}})),
                    Catch::Contains("$MURMUR_SOCKET_IFNAME \"=eth99\""));
  CHECK(is_loopback_host("127.0.0.1"));
  CHECK(is_loopback_host("127.3.4.5"));
  CHECK(is_loopback_host("localhost"));
  CHECK_FALSE(is_loopback_host("10.0.0.1"));
}

// Runs `body` in a child process in a network and UTS namespace of its own (root only), with
// `setup` run there first through sh; returns what the child wrote, or "SKIP: why".
std::string in_own_netns(const std::string& setup, const std::function<std::string()>& body) {
  int out[2];
  REQUIRE(pipe(out) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(out[0]);
    std::string text;
    if (unshare(CLONE_NEWNET | CLONE_NEWUTS) != 0) {
      text = "SKIP: unshare(CLONE_NEWNET) failed (needs root)";
    } else if (sethostname("localhost", 9) != 0 ||
               std::system(("ip link set lo up && " + setup + " >/dev/null 2>&1").c_str()) != 0) {
      text = "SKIP: ip (Debian's iproute2) could not set up the namespace: " + setup;
    } else {
      try {
        text = body();
      } catch (const std::exception& e) {
        text = std::string("error: ") + e.what();
      }
    }
    [[maybe_unused]] auto n = write(out[1], text.data(), text.size());
    _exit(0);
  }
  close(out[1]);
  std::string text;
  char buf[512];
  for (ssize_t n; (n = read(out[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<std::size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return text;
}

TEST_CASE("transport.host auto takes the default route's interface, and says when there is none",
          "[transport][address]") {
  if (geteuid() != 0) MURMUR_SKIP("a network namespace of the test's own needs root");
  // veth pairs with both ends here (not dummy links: gVisor-like kernels have none).
  const std::string dummy = "ip link add d0 type veth peer name d0p && ip addr add 10.77.0.5/24 dev d0 && "
                            "ip link set d0 up && ip link set d0p up && "
                            "ip link add d1 type veth peer name d1p && ip addr add 10.78.0.5/24 dev d1 && "
                            "ip link set d1 up && ip link set d1p up";
  auto chosen = [] {
    const auto c = choose_listen_address(auto_host(), 4, 2, env_of({}));
    return c.address + " | " + c.why;
  };
  const std::string routed = in_own_netns(dummy + " && ip route add default via 10.78.0.1 dev d1", chosen);
  if (routed.starts_with("SKIP:")) MURMUR_SKIP(routed.substr(6));
  CHECK(routed == "10.78.0.5 | interface d1 (the default route)");
  // An interface named wins over the route; all peers here, loopback.
  CHECK(in_own_netns(dummy + " && ip route add default via 10.78.0.1 dev d1", [] {
          TransportConfig c = auto_host();
          c.interface = "d0";
          return choose_listen_address(c, 4, 2, env_of({})).address + " " +
                 choose_listen_address(auto_host(), 4, 4, env_of({})).address;
        }) == "10.77.0.5 127.0.0.1");
  // No default route, and the host's name ("localhost" here) resolves to loopback only.
  const std::string none = in_own_netns(dummy, chosen);
  CHECK_THAT(none, Catch::StartsWith("error: transport.host: auto found no address") &&
                       Catch::Contains("2 of the 4 peers") && Catch::Contains("transport.interface") &&
                       Catch::Contains("d0 (10.77.0.5)"));
}

TEST_CASE("a loopback address published from another host is refused, naming both hosts",
          "[transport][address]") {
  auto dir = std::filesystem::temp_directory_path() / ("murmur-rdv-host-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  DirectoryRendezvous rdv(dir);
  rdv.publish(0, "127.0.0.1:4000");  // from this host: fine
  CHECK(rdv.try_lookup(0) == "127.0.0.1:4000");
  std::ofstream(dir / "rank-1.addr") << "127.0.0.1:4001\nhost node-elsewhere\n";
  CHECK_THROWS_WITH(rdv.try_lookup(1), Catch::Contains("rank 1") && Catch::Contains("node-elsewhere") &&
                                           Catch::Contains("127.0.0.1:4001") &&
                                           Catch::Contains("transport.host"));
  std::ofstream(dir / "rank-2.addr") << "10.0.0.3:4002\nhost node-elsewhere\n";  // routable: fine
  CHECK(rdv.try_lookup(2) == "10.0.0.3:4002");
  std::ofstream(dir / "rank-3.addr") << "left 127.0.0.1:4003\nhost node-elsewhere\n";
  CHECK_THROWS_AS(rdv.try_lookup(3), ConfigError);
  std::ofstream(dir / "rank-4.addr") << "127.0.0.1:4004";  // no host line (written by hand)
  CHECK(rdv.try_lookup(4) == "127.0.0.1:4004");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace murmur::transport
