// Stochastic Gradient Push (`sgp`, Assran et al. 2019, "Stochastic Gradient Push for
// Distributed Deep Learning"): push-sum gossip, for directed and time-varying graphs with
// column-stochastic weights. Each peer keeps the biased numerator x_i and a weight w_i; it sends
// (x_i, w_i) to its out-neighbors, who scale them by the sender's push weight, and its model is
// z_i = x_i / w_i. The parameter arena always holds z_i: the local optimizer steps z and the
// step is carried over to x. Overlap SGP (algorithm.tau = T > 0, or overlap with T = 1): a
// round's messages are posted without waiting and consumed T rounds later, so a message may be
// up to T steps late and mass is never lost. A dead out-neighbor's push weight stays with the
// sender and a dead in-neighbor's message is skipped (renormalize, kColumn): the surviving mass
// keeps x / w an unbiased average of the live peers. When the live set changes (a death, a
// rejoin), each peer restarts its weight at 1 (x <- x / w, z unchanged), and does so again every
// round for two peer timeouts after: the mass lost with a dead peer otherwise leaves survivors
// with w well below 1, and since the optimizer steps z by lr / w, with several times the
// learning rate. One reset is not enough: a survivor that learns of the death later (its sends
// to the dead peer still complete, into a socket buffer) pushes half its mass into the void every
// round it sends there, and the others' weights, restarted already, drain with it (to 0.02 in
// 50 rounds; the runs blew up). Every survivor learns of a death within a peer timeout of the
// first. The consensus then tends to another convex combination of the live models, as
// push-sum does from any positive weights. x and the messages live on the peer's device; w is a
// host scalar that rides as the last float of each message. One-sided (algorithm.one_sided): the
// messages are written into the receivers' windows (put_windows.h) instead of sent, the same
// arithmetic on the same floats; a restarted peer is not taken back there. Not thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "optimizers/algorithm.h"
#include "optimizers/mixing_schedule.h"
#include "optimizers/put_windows.h"
#include "optimizers/recv_slots.h"
#include "transport/tag.h"

namespace murmur::optimizers {

extern const AlgorithmInfo kSgp;

class Sgp final : public Averaging {
 public:
  // x starts as the parameters and w as 1.
  explicit Sgp(const AveragingContext& ctx);
  ~Sgp() override;
  void after_step(std::int64_t step) override;
  // Consumes every round still in flight and waits until our own messages have been taken.
  void flush() override;
  // out <- x / w (what the arena holds after flush()); returns true.
  bool debiased(std::span<float> out) override;

  // A restarted peer taken back holds its answerers' mean model: x starts over as that model,
  // with weight 1 (what its checkpoint restored belongs to the run it left).
  void rejoined() override;

  std::vector<std::pair<std::string, std::span<float>>> state() override;
  std::map<std::string, std::string> scalars() const override;
  void restore_scalars(const std::map<std::string, std::string>& scalars) override;

  double weight() const { return w_; }

 private:
  struct Round {  // one round in flight: what was sent, where its messages land
    std::int64_t round = -1;
    std::vector<transport::Request> sends, recvs;
    std::vector<double> recv_weights;
    std::vector<int> sources;  // one-sided: whose messages this round takes
    std::unique_ptr<RecvSlots> slots;
  };
  void consume(Round& r);  // waits for r's messages and adds them to (x, w)
  void publish();          // params <- x / w

  membership::Neighborhood& hood_;
  transport::Transport& transport_;
  device::Device& device_;
  std::span<float> params_;
  int local_steps_, tau_;
  unsigned purpose_;
  transport::TagLayout layout_;
  MixingSchedule schedule_;
  device::Array x_;
  double w_ = 1.0;
  // tau + 1 send buffers of n + 1 floats (x then w), one registration.
  std::size_t stride_;
  device::Array send_;
  std::unique_ptr<transport::Region> send_region_;
  std::vector<Round> rounds_;   // round t uses rounds_[t % (tau + 1)]
  std::unique_ptr<PutWindows> windows_;  // the one-sided path, else null
  std::int64_t consumed_ = -1;  // every round <= consumed_ has been added
  std::int64_t posted_ = -1;
  std::vector<int> live_;       // the ranks taking part in the last round (empty before the first)
  // After a change of the live set, w restarts at 1 every round until settle_until_.
  std::chrono::steady_clock::duration settle_;
  std::chrono::steady_clock::time_point settle_until_{};
};

}  // namespace murmur::optimizers
