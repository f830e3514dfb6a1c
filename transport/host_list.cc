#include "transport/host_list.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "core/names.h"
#include "transport/address.h"

extern char** environ;

namespace murmur::transport {
namespace {

[[maybe_unused]] const bool kRegistered = register_names("transport.rendezvous", {"auto", "hosts"});

std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    std::string_view item = text.substr(at, comma - at);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    out.emplace_back(item);
    at = comma + 1;
  }
  return out;
}

const char* first_set(const Getenv& getenv, std::initializer_list<const char*> names,
                      const char** which) {
  for (const char* name : names) {
    const char* value = getenv(name);
    if (value != nullptr && *value != '\0') {
      *which = name;
      return value;
    }
  }
  return nullptr;
}

// Slurm's step as a host list: one host per task, the nodes' tasks in blocks.
HostList from_slurm(int rank, const Getenv& getenv, const NodelistExpander& expand) {
  const char* list_var = nullptr;
  const char* tasks_var = nullptr;
  const char* nodelist = first_set(getenv, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"}, &list_var);
  const char* tasks = first_set(getenv, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}, &tasks_var);
  if (nodelist == nullptr || tasks == nullptr) {
    throw ConfigError(
        "transport.rendezvous: hosts needs the host of every rank: set transport.hosts, or "
        "$MURMUR_HOSTS (murmur-launch --hostfile does), or run under srun "
        "($SLURM_STEP_NODELIST and $SLURM_STEP_TASKS_PER_NODE are not set)");
  }
  const std::vector<std::string> nodes = nodelist[0] == '\0' ? std::vector<std::string>{} : expand(nodelist);
  const std::vector<int> counts = slurm_tasks_per_node(tasks, tasks_var);
  if (nodes.size() != counts.size()) {
    throw ConfigError(fmt::format("transport.rendezvous: hosts: ${}={} names {} node(s), ${}={} {}",
                                  list_var, nodelist, nodes.size(), tasks_var, tasks, counts.size()));
  }
  HostList out;
  out.source = fmt::format("${} and ${}", list_var, tasks_var);
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    out.host_of_rank.insert(out.host_of_rank.end(), static_cast<std::size_t>(counts[n]), nodes[n]);
  }
  // Block placement is assumed by every rank alike; a cyclic or arbitrary one would give each
  // rank a different, wrong list. This rank's own node and local id tell.
  const auto node_id = read_int(getenv, "SLURM_NODEID");
  const auto local_id = read_int(getenv, "SLURM_LOCALID");
  if (node_id && local_id && rank >= 0 && rank < static_cast<int>(out.host_of_rank.size())) {
    int first = 0, node = 0;
    while (first + counts[static_cast<std::size_t>(node)] <= rank) first += counts[static_cast<std::size_t>(node++)];
    if (node != *node_id || rank - first != *local_id) {
      throw ConfigError(fmt::format(
          "transport.rendezvous: hosts: Slurm placed rank {} as task {} of node {} ($SLURM_NODEID, "
          "$SLURM_LOCALID), but blocks of ${}={} put it as task {} of node {}: start the step with "
          "srun's default block distribution (--distribution=block), or use "
          "transport.rendezvous_dir", rank, *local_id, *node_id, tasks_var, tasks, rank - first, node));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> scontrol_hostnames(const std::string& nodelist) {
  // A plain comma list needs no scontrol (and works where it is not installed).
  if (nodelist.find('[') == std::string::npos) return split_commas(nodelist);
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw IoError("transport.rendezvous: hosts: cannot make a pipe for scontrol");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  std::string prog = "scontrol", show = "show", what = "hostnames", list = nodelist;
  char* argv[] = {prog.data(), show.data(), what.data(), list.data(), nullptr};
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, "scontrol", &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  std::string text;
  if (rc == 0) {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0) text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  if (rc == 0) ::waitpid(pid, &status, 0);
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw ConfigError(fmt::format("transport.rendezvous: hosts: `scontrol show hostnames {}` failed "
                                  "({}): is Slurm's scontrol on the PATH?", nodelist,
                                  rc != 0 ? "not started" : "nonzero exit"));
  }
  std::vector<std::string> out;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::vector<std::string> expand_host_entries(const std::vector<std::string>& entries,
                                             const std::string& where) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    std::string_view e = entries[i];
    std::string_view name = e;
    int count = 1;
    if (const auto star = e.rfind('*'); star != std::string_view::npos) {
      name = e.substr(0, star);
      const std::string_view n = e.substr(star + 1);
      auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), count);
      if (ec != std::errc() || end != n.data() + n.size() || count < 1 || count > (1 << 20)) {
        throw ConfigError(fmt::format("{}[{}]: \"{}\": expected host or host*COUNT", where, i, e));
      }
    }
    if (name.empty() || name.find_first_of(" \t:,") != std::string_view::npos) {
      throw ConfigError(fmt::format("{}[{}]: \"{}\": not a host name", where, i, e));
    }
    out.insert(out.end(), static_cast<std::size_t>(count), std::string(name));
  }
  return out;
}

HostList resolve_host_list(const TransportConfig& config, int world_size, int rank,
                           const Getenv& getenv, const NodelistExpander& expand) {
  HostList out;
  if (!config.hosts.empty()) {
    out = {expand_host_entries(config.hosts, "transport.hosts"), "transport.hosts"};
  } else if (const char* env = getenv("MURMUR_HOSTS"); env != nullptr && *env != '\0') {
    out = {expand_host_entries(split_commas(env), "$MURMUR_HOSTS"), "$MURMUR_HOSTS"};
  } else {
    out = from_slurm(rank, getenv, expand);
  }
  if (static_cast<int>(out.host_of_rank.size()) != world_size) {
    throw ConfigError(fmt::format("transport.rendezvous: hosts: {} gives {} rank(s), for a world of {}",
                                  out.source, out.host_of_rank.size(), world_size));
  }
  return out;
}

std::vector<int> local_ranks(const HostList& hosts) {
  std::map<std::string, int> seen;
  std::vector<int> out;
  out.reserve(hosts.host_of_rank.size());
  for (const std::string& h : hosts.host_of_rank) out.push_back(seen[h]++);
  return out;
}

std::vector<std::string> host_list_addresses(
    const HostList& hosts, int base_port,
    const std::function<std::vector<std::string>(const std::string&)>& resolve,
    const std::string& this_host, const std::string& this_address) {
  const std::vector<int> local = local_ranks(hosts);
  std::map<std::string, std::string> address;  // each host resolved once
  const std::set<std::string> distinct(hosts.host_of_rank.begin(), hosts.host_of_rank.end());
  std::vector<std::string> out;
  out.reserve(local.size());
  for (std::size_t r = 0; r < local.size(); ++r) {
    const std::string& host = hosts.host_of_rank[r];
    auto it = address.find(host);
    if (it == address.end()) {
      if (distinct.size() > 1 && is_loopback_host(host)) {  // each host would take it for itself
        throw ConfigError(fmt::format("transport.rendezvous: hosts: \"{}\" (rank {}, from {}) in a "
                                      "list of {} hosts: name every host as the others reach it",
                                      host, r, hosts.source, distinct.size()));
      }
      const std::vector<std::string> found = resolve(host);
      if (found.empty()) {
        throw ConfigError(fmt::format("transport.rendezvous: hosts: host \"{}\" (rank {}, from {}) "
                                      "does not resolve to an IPv4 address", host, r, hosts.source));
      }
      std::string chosen = found.front();
      if (is_loopback_host(chosen)) {
        if (host != this_host && !is_loopback_host(host)) {
          throw ConfigError(fmt::format(
              "transport.rendezvous: hosts: host \"{}\" (rank {}, from {}) resolves to the loopback "
              "address {} on {}: name hosts as the other hosts reach them (their DNS names or "
              "addresses) in {}", host, r, hosts.source, chosen, this_host, hosts.source));
        }
        chosen = this_address;
      }
      it = address.emplace(host, chosen).first;
    }
    const int port = base_port + local[r];
    if (port > 65535) {
      throw ConfigError(fmt::format("transport.base_port: {} + local rank {} (rank {} on {}) is past "
                                    "port 65535", base_port, local[r], r, host));
    }
    out.push_back(fmt::format("{}:{}", it->second, port));
  }
  return out;
}

}  // namespace murmur::transport
