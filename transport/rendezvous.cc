#include "transport/rendezvous.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string_view>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "transport/address.h"
#include "transport/host_list.h"

namespace murmur::transport {

std::string Rendezvous::lookup(int rank, Deadline deadline) {
  // Polling keeps the directory source free of inotify and works on network file systems.
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    if (auto a = try_lookup(rank)) return *a;
    if (Clock::now() >= deadline) {
      throw PeerLost(fmt::format("rendezvous: no address for rank {} in {} before the deadline",
                                 rank, describe()));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

StaticRendezvous::StaticRendezvous(std::vector<std::string> addresses)
    : addresses_(std::move(addresses)) {}

std::vector<std::string> StaticRendezvous::read_hostfile(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ConfigError(fmt::format("{}: transport.hostfile: cannot be read", file.string()));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string word;
    if (words >> word) out.push_back(word);
  }
  return out;
}

std::optional<std::string> StaticRendezvous::try_lookup(int rank) {
  if (rank < 0 || rank >= static_cast<int>(addresses_.size())) return std::nullopt;
  return addresses_[rank];
}

DirectoryRendezvous::DirectoryRendezvous(std::filesystem::path dir, std::string prefix)
    : dir_(std::move(dir)), prefix_(std::move(prefix)) {
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw IoError(fmt::format("rendezvous: cannot create {}: {}", dir_.string(), ec.message()));
}

std::filesystem::path DirectoryRendezvous::file_of(int rank) const {
  return dir_ / fmt::format("{}rank-{}.addr", prefix_, rank);
}

void DirectoryRendezvous::publish(int rank, const std::string& address) {
  // temp + rename: readers never see a half-written address.
  auto final_path = file_of(rank);
  auto tmp = final_path;
  tmp += fmt::format(".tmp.{}", ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    // The host it was published from, second: a loopback address is only of use on that host.
    out << address << "\nhost " << host_name() << "\n";
    if (!out.flush()) throw IoError("rendezvous: cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, final_path, ec);
  if (ec) throw IoError(fmt::format("rendezvous: rename to {}: {}", final_path.string(), ec.message()));
}

std::optional<std::string> DirectoryRendezvous::try_lookup(int rank) {
  std::ifstream in(file_of(rank), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream content;
  content << in.rdbuf();
  const std::string text = content.str();
  const auto newline = text.find('\n');
  std::string address = text.substr(0, newline);
  if (newline == std::string::npos) return address;  // written by hand, or by an older peer
  std::string_view rest = std::string_view(text).substr(newline + 1);
  if (!rest.starts_with("host ")) return address;
  rest.remove_prefix(5);
  const std::string from(rest.substr(0, rest.find('\n')));
  std::string_view where = address;
  if (has_left(where)) where.remove_prefix(kLeftMark.size());
  const std::string host(where.substr(0, where.rfind(':')));
  if (is_loopback_host(host) && from != host_name()) {
    throw ConfigError(fmt::format(
        "rendezvous {}: rank {} published the loopback address {} from host {}, and this rank "
        "runs on {}: it cannot be reached from here. Leave transport.host at auto (or set "
        "transport.interface, or $MURMUR_SOCKET_IFNAME) so that every peer publishes an address "
        "the other hosts can reach", dir_.string(), rank, address, from, host_name()));
  }
  return address;
}

void MemoryRendezvous::publish(int rank, const std::string& address) {
  std::lock_guard lock(mu_);
  addresses_[rank] = address;
}

std::optional<std::string> MemoryRendezvous::try_lookup(int rank) {
  std::lock_guard lock(mu_);
  auto it = addresses_.find(rank);
  if (it == addresses_.end()) return std::nullopt;
  return it->second;
}

std::shared_ptr<Rendezvous> make_rendezvous(const TransportConfig& config, int world_size,
                                            int rank, const std::string& prefix) {
  if (config.rendezvous == "hosts") {
    const HostList hosts = resolve_host_list(config, world_size, rank,
                                             [](const char* n) { return std::getenv(n); },
                                             scontrol_hostnames);
    // transport.host is concrete here (the factory chose it): a loopback name stands for it.
    const std::string here = config.host == "auto" ? "127.0.0.1" : config.host;
    std::vector<std::string> addresses =
        host_list_addresses(hosts, config.base_port, addresses_of, host_name(), here);
    if (rank >= 0 && rank < world_size) {
      spdlog::info("rank {}: listens on {} (transport.rendezvous: hosts, from {})", rank,
                   addresses[static_cast<std::size_t>(rank)], hosts.source);
    }
    return std::make_shared<StaticRendezvous>(std::move(addresses));
  }
  std::vector<std::string> list = config.peers;
  const char* key = "transport.peers";
  if (list.empty() && !config.hostfile.empty()) {
    list = StaticRendezvous::read_hostfile(config.hostfile);
    key = "transport.hostfile";
  }
  if (!list.empty()) {
    if (static_cast<int>(list.size()) != world_size) {
      throw ConfigError(fmt::format("{}: {} addresses for a world of {} ranks", key, list.size(),
                                    world_size));
    }
    return std::make_shared<StaticRendezvous>(std::move(list));
  }
  if (!config.rendezvous_dir.empty()) {
    return std::make_shared<DirectoryRendezvous>(config.rendezvous_dir, prefix);
  }
  throw ConfigError(
      "transport: no way to find peers: set transport.peers, transport.hostfile, "
      "transport.rendezvous_dir, or transport.rendezvous: hosts");
}

}  // namespace murmur::transport
