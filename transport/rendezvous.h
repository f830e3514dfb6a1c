// How ranks find each other's addresses without a central process. An address is opaque text
// ("host:port" for tcp); rendezvous never learns which backend it carries. Three sources: a static
// list (transport.peers or transport.hostfile), a shared directory where each rank writes its own
// file atomically (transport.rendezvous_dir), and an in-process table for threads in tests.
// Thread-safety: every implementation may be called from any thread.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "transport/transport.h"

namespace murmur::transport {

// What a rank that left the run in order (finished, or stopped by a signal) publishes in place of
// its address ("left 127.0.0.1:4000"), so that a peer looking for it later (one restarted after
// the others finished) learns at once that nobody will answer, instead of dialing until its
// connect timeout.
inline constexpr std::string_view kLeftMark = "left ";
inline bool has_left(std::string_view published) { return published.starts_with(kLeftMark); }

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // Makes `address` the address of `rank`, for the other ranks to look up (kLeftMark first: it
  // has left; a static list keeps its entries as they are).
  virtual void publish(int rank, const std::string& address) = 0;
  // Returns the address of `rank` if it is known now; never blocks.
  virtual std::optional<std::string> try_lookup(int rank) = 0;
  // Where this rank should listen when the source fixes it (a static list); nullopt otherwise.
  virtual std::optional<std::string> fixed_address(int rank) { return std::nullopt; }
  // Waits for the address of `rank`; throws PeerLost naming the rank and the source if it is not
  // there by `deadline`.
  std::string lookup(int rank, Deadline deadline);
  // Where addresses come from, for error messages ("directory /tmp/x", "static list").
  virtual std::string describe() const = 0;
};

// A fixed list, one "host:port" per rank, in rank order.
class StaticRendezvous : public Rendezvous {
 public:
  explicit StaticRendezvous(std::vector<std::string> addresses);
  // Reads one "host:port" per line; blank lines and '#' comments are skipped. Throws ConfigError.
  static std::vector<std::string> read_hostfile(const std::filesystem::path& file);
  void publish(int rank, const std::string& address) override {}
  std::optional<std::string> try_lookup(int rank) override;
  std::optional<std::string> fixed_address(int rank) override { return try_lookup(rank); }
  std::string describe() const override { return "static list"; }

 private:
  std::vector<std::string> addresses_;
};

// A shared directory: rank r writes "<dir>/<prefix>rank-<r>.addr" through a temp file and
// rename, so a reader sees either nothing or the whole address. A second line names the host it
// came from ("host node3"): a loopback address published on another host than the reader's is a
// ConfigError (the peers of a multi-host run were told, or left, to listen on 127.0.0.1).
class DirectoryRendezvous : public Rendezvous {
 public:
  explicit DirectoryRendezvous(std::filesystem::path dir, std::string prefix = "");
  void publish(int rank, const std::string& address) override;
  std::optional<std::string> try_lookup(int rank) override;
  std::string describe() const override { return "directory " + dir_.string(); }

 private:
  std::filesystem::path file_of(int rank) const;
  std::filesystem::path dir_;
  std::string prefix_;
};

// A table shared by the threads of one process (tests that run tcp ranks as threads).
class MemoryRendezvous : public Rendezvous {
 public:
  void publish(int rank, const std::string& address) override;
  std::optional<std::string> try_lookup(int rank) override;
  std::string describe() const override { return "in-memory table"; }

 private:
  std::mutex mu_;  // guards addresses_
  std::map<int, std::string> addresses_;
};

// The rendezvous the config asks for: transport.rendezvous: hosts (transport/host_list.h: a
// static list derived by every rank alike; `rank` checks Slurm's placement), else peers, else
// hostfile, else rendezvous_dir (with `prefix` before the file names, so two transports may
// share one directory). Throws ConfigError if none is set or a static list does not have one
// address per rank.
std::shared_ptr<Rendezvous> make_rendezvous(const TransportConfig& config, int world_size,
                                            int rank = -1, const std::string& prefix = "");

}  // namespace murmur::transport
