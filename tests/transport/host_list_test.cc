// transport.rendezvous: hosts: the host list from each source, the local ranks, the addresses,
// and a world of tcp ranks that meets through it alone.
#include <catch2/catch.hpp>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "transport/host_list.h"
#include "transport/rendezvous.h"
#include "transport/tcp/transport.h"

namespace murmur::transport {
namespace {

using Env = std::map<std::string, std::string>;
Getenv env_of(const Env& env) {
  return [&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

// A stand-in for `scontrol show hostnames`: only the lists the tests give.
std::vector<std::string> fake_scontrol(const std::string& list) {
  if (list == "n[1-2],gpu7") return {"n1", "n2", "gpu7"};
  return scontrol_hostnames(list);  // plain comma lists need no scontrol
}

std::vector<std::string> fake_dns(const std::string& host) {
  static const std::map<std::string, std::vector<std::string>> table{
      {"a", {"10.0.0.1"}}, {"b", {"10.0.0.2", "10.0.9.9"}}, {"me", {"127.0.1.1"}},
      {"other", {"127.0.1.1"}}, {"localhost", {"127.0.0.1"}}};
  auto it = table.find(host);
  return it == table.end() ? std::vector<std::string>{} : it->second;
}

TEST_CASE("host entries expand, and local ranks count each host's earlier ranks", "[transport]") {
  CHECK(expand_host_entries({"a*2", "b", "a"}, "x") == std::vector<std::string>{"a", "a", "b", "a"});
  for (const char* bad : {"a*0", "a*", "*2", "a*x", "a:1", "a*2*", ""}) {
    INFO(bad);
    CHECK_THROWS_WITH(expand_host_entries({"ok", bad}, "transport.hosts"),
                      Catch::Contains("transport.hosts[1]"));
  }
  HostList round_robin{{"a", "b", "a", "b", "a"}, "t"};
  CHECK(local_ranks(round_robin) == std::vector<int>{0, 0, 1, 1, 2});
}

TEST_CASE("the host list comes from transport.hosts, $MURMUR_HOSTS, or Slurm's step", "[transport]") {
  TransportConfig c;
  Env env{{"MURMUR_HOSTS", "b*3"}, {"SLURM_STEP_NODELIST", "x"}, {"SLURM_STEP_TASKS_PER_NODE", "3"}};
  c.hosts = {"a*2", "b"};
  auto h = resolve_host_list(c, 3, 0, env_of(env), fake_scontrol);
  CHECK((h.host_of_rank == std::vector<std::string>{"a", "a", "b"} && h.source == "transport.hosts"));
  c.hosts.clear();
  h = resolve_host_list(c, 3, 0, env_of(env), fake_scontrol);
  CHECK((h.host_of_rank == std::vector<std::string>{"b", "b", "b"} && h.source == "$MURMUR_HOSTS"));
  CHECK_THROWS_WITH(resolve_host_list(c, 4, 0, env_of(env), fake_scontrol),
                    Catch::Contains("$MURMUR_HOSTS gives 3 rank(s), for a world of 4"));

  // Slurm: the step's nodes, each with its tasks in a block; the step's variables first.
  env = {{"SLURM_JOB_NODELIST", "n[1-9]"}, {"SLURM_STEP_NODELIST", "n[1-2],gpu7"},
         {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"}, {"SLURM_TASKS_PER_NODE", "9"},
         {"SLURM_NODEID", "1"}, {"SLURM_LOCALID", "1"}};
  h = resolve_host_list(c, 5, 3, env_of(env), fake_scontrol);
  CHECK(h.host_of_rank == std::vector<std::string>{"n1", "n1", "n2", "n2", "gpu7"});
  CHECK_THAT(h.source, Catch::Contains("SLURM_STEP_NODELIST"));
  // A cyclic distribution puts rank 3 elsewhere: every rank would derive a wrong list.
  env["SLURM_NODEID"] = "0";
  CHECK_THROWS_WITH(resolve_host_list(c, 5, 3, env_of(env), fake_scontrol),
                    Catch::Contains("--distribution=block"));
  env["SLURM_STEP_TASKS_PER_NODE"] = "2,3";
  CHECK_THROWS_WITH(resolve_host_list(c, 5, 3, env_of(env), fake_scontrol),
                    Catch::Contains("names 3 node(s)"));
  CHECK_THROWS_WITH(resolve_host_list(c, 5, 0, env_of(Env{}), fake_scontrol),
                    Catch::Contains("transport.hosts") && Catch::Contains("MURMUR_HOSTS"));
}

TEST_CASE("addresses: base port + local rank, loopback names stand for this host", "[transport]") {
  HostList h{{"a", "b", "a", "b"}, "transport.hosts"};
  CHECK(host_list_addresses(h, 5000, fake_dns, "a", "10.0.0.1") ==
        std::vector<std::string>{"10.0.0.1:5000", "10.0.0.2:5000", "10.0.0.1:5001", "10.0.0.2:5001"});
  // Debian names the machine itself 127.0.1.1: its ranks take the address chosen here.
  h = {{"me", "me", "a"}, "$MURMUR_HOSTS"};
  CHECK(host_list_addresses(h, 7000, fake_dns, "me", "10.0.0.5") ==
        std::vector<std::string>{"10.0.0.5:7000", "10.0.0.5:7001", "10.0.0.1:7000"});
  h = {{"localhost", "localhost"}, "t"};
  CHECK(host_list_addresses(h, 7000, fake_dns, "me", "127.0.0.1") ==
        std::vector<std::string>{"127.0.0.1:7000", "127.0.0.1:7001"});
  h = {{"me", "other"}, "$MURMUR_HOSTS"};
  CHECK_THROWS_WITH(host_list_addresses(h, 7000, fake_dns, "me", "10.0.0.5"),
                    Catch::Contains("\"other\"") && Catch::Contains("loopback"));
  h = {{"a", "localhost"}, "$MURMUR_HOSTS"};  // every host would take "localhost" for itself
  CHECK_THROWS_WITH(host_list_addresses(h, 7000, fake_dns, "a", "10.0.0.1"),
                    Catch::Contains("\"localhost\" (rank 1") && Catch::Contains("2 hosts"));
  h = {{"a", "nowhere"}, "transport.hosts"};
  CHECK_THROWS_WITH(host_list_addresses(h, 7000, fake_dns, "a", "10.0.0.1"),
                    Catch::Contains("\"nowhere\" (rank 1, from transport.hosts)"));
  h = {{"a", "a"}, "t"};
  CHECK_THROWS_WITH(host_list_addresses(h, 65535, fake_dns, "a", "10.0.0.1"),
                    Catch::Contains("transport.base_port"));
}

TEST_CASE("tcp ranks meet through transport.rendezvous: hosts alone", "[transport]") {
  TransportConfig c;
  c.rendezvous = "hosts";
  c.hosts = {"localhost*3"};
  c.host = "127.0.0.1";
  c.base_port = 20000 + static_cast<int>(::getpid() % 20000);  // apart from other runs' ports
  c.connect_timeout_ms = 10000;
  constexpr int kRanks = 3;
  std::vector<std::vector<std::byte>> got(kRanks);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(kRanks);
  // spdlog's registry is built on first use, inside libspdlog, which TSan does not see; the
  // ranks' first lines would race on it (a report, not a real race): build it here, first.
  spdlog::default_logger();
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      try {
        tcp::Transport t(c, r, kRanks, make_rendezvous(c, kRanks, r));
        std::vector<std::byte> mine(16, std::byte(r + 1));
        got[r].resize(16);
        Region out(mine), in(got[r]);
        const int next = (r + 1) % kRanks, prev = (r + kRanks - 1) % kRanks;
        Request reqs[] = {t.send(next, 7, out, {0, 16}), t.recv(prev, 7, in, {0, 16})};
        if (!wait_all(t, reqs, deadline_after(std::chrono::seconds(20)))) errors[r] = "timed out";
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    CHECK(errors[r].empty());
    CHECK(got[r] == std::vector<std::byte>(16, std::byte((r + kRanks - 1) % kRanks + 1)));
  }
}

}  // namespace
}  // namespace murmur::transport
