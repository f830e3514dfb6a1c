// transport.rendezvous: hosts. Ranks meet without a shared directory and without a coordinator:
// every rank derives every rank's address from the same ordered host list. Rank r runs on
// host(r) and listens on base_port + local(r), where local(r) is how many ranks before r share
// its host, so a block placement ("a*2,b*2") and a round-robin one ("a,b,a,b") both work.
//
// The list, one host per rank in rank order ("name*N" for N ranks in a row), comes from
//   1. transport.hosts, else
//   2. $MURMUR_HOSTS (a comma list; murmur-launch --hostfile sets it from its placement), else
//   3. Slurm's step: $SLURM_STEP_NODELIST (else $SLURM_JOB_NODELIST) expanded by
//      `scontrol show hostnames`, with $SLURM_STEP_TASKS_PER_NODE (else $SLURM_TASKS_PER_NODE)
//      ranks on each node in turn: srun's block distribution, which is checked against this
//      rank's own $SLURM_NODEID and $SLURM_LOCALID.
// Host names are resolved to IPv4 addresses on each rank. Thread-safe; no state.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "transport/world.h"

namespace murmur::transport {

struct HostList {
  std::vector<std::string> host_of_rank;  // one per rank
  std::string source;                     // "transport.hosts", "$MURMUR_HOSTS", "Slurm ..."
};

// Expands a nodelist that may be compressed ("node[1-3,7],gpu2") into host names; the real one
// runs `scontrol show hostnames`.
using NodelistExpander = std::function<std::vector<std::string>(const std::string&)>;
std::vector<std::string> scontrol_hostnames(const std::string& nodelist);

// "name*N" entries (or "name") into one host per rank. Throws ConfigError naming `where`.
std::vector<std::string> expand_host_entries(const std::vector<std::string>& entries,
                                             const std::string& where);

// The host list of a world of `world_size`, from the sources above, checked to hold one host
// per rank (and, under Slurm, to put rank `rank` where Slurm did). Throws ConfigError naming the
// source.
HostList resolve_host_list(const TransportConfig& config, int world_size, int rank,
                           const Getenv& getenv, const NodelistExpander& expand);

// The local rank of every rank: how many ranks before it share its host.
std::vector<int> local_ranks(const HostList& hosts);

// Every rank's "address:port", which is also where that rank listens. `resolve` gives a host's
// IPv4 addresses (the first is taken). A host that resolves to a loopback address (Debian maps
// a machine's own name to 127.0.1.1) can only be this one, `this_host`: its ranks get
// `this_address`, the address transport.host chose here, which every rank of this host chooses
// alike. Another host that resolves to loopback here, or to nothing, is a ConfigError naming it
// and the list's source; a port past 65535 one naming transport.base_port.
std::vector<std::string> host_list_addresses(
    const HostList& hosts, int base_port,
    const std::function<std::vector<std::string>(const std::string&)>& resolve,
    const std::string& this_host, const std::string& this_address);

}  // namespace murmur::transport
