// Pruners: after each epoch a running trial reports its objective (the
// validation fitness, fitness.h), and the pruner says whether it goes on.
// A pure function of the trials' reported values, like the samplers, so a
// restarted coordinator takes the same decisions (docs/tune.md "Pruning").
//
//   AshaPruner    asynchronous successive halving (Li et al., "A System for
//                 Massively Parallel Hyperparameter Tuning", MLSys 2020):
//                 rungs at min_epochs * eta^k epochs; at a rung a trial goes
//                 on while it is in the top 1/eta (at least the best one) of
//                 the values reported at that rung so far, else it stops
//                 there (state pruned, checkpoint kept). AshaPromotion finds
//                 a stopped trial that has since entered its rung's top
//                 1/eta, to be continued from its checkpoint.
//   MedianPruner  stops a trial whose best value so far is worse than the
//                 median of the succeeded trials' values at the same epoch.
//
// Thread-compatible: Decide is const.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tune/sampler.h"

namespace kestrel::tune {

enum class PruneDecision { kContinue, kPrune };

class Pruner {
 public:
  virtual ~Pruner() = default;
  // `trial` has just reported epoch trial.intermediate.size(). `trials` is
  // the whole study (it may contain `trial` itself; matched by number).
  virtual PruneDecision Decide(const std::vector<Trial>& trials, const Trial& trial) const = 0;
};

struct AshaOptions {
  Direction direction = Direction::kMaximize;
  int min_epochs = 1;  // the first rung
  int eta = 3;         // reduction factor: rung k+1 is eta times rung k; top 1/eta go on
  int max_epochs = 1;  // the trials' full length: the last rung is below it
};
// The rungs (epochs) below max_epochs: min_epochs * eta^k < max_epochs.
// REQUIRES: eta >= 2, min_epochs >= 1 (MakePruner checks them).
std::vector<int> AshaRungs(const AshaOptions& options);

class AshaPruner : public Pruner {
 public:
  explicit AshaPruner(AshaOptions options) : options_(options) {}
  PruneDecision Decide(const std::vector<Trial>& trials, const Trial& trial) const override;

 private:
  AshaOptions options_;
};
// The trial to continue next, if any: the best trial that was pruned at a
// rung (its intermediate values end at that rung) and is now in the top
// 1/eta of the values reported there, higher rungs first.
std::optional<int64_t> AshaPromotion(const std::vector<Trial>& trials, const AshaOptions& options);

struct MedianOptions {
  Direction direction = Direction::kMaximize;
  int startup_trials = 5;  // never prune before this many trials succeeded
  int warmup_epochs = 0;   // never prune at epochs <= this
};
class MedianPruner : public Pruner {
 public:
  explicit MedianPruner(MedianOptions options) : options_(options) {}
  PruneDecision Decide(const std::vector<Trial>& trials, const Trial& trial) const override;

 private:
  MedianOptions options_;
};

// "asha", "median" or "none" (nullptr: every trial runs its full length);
// kInvalidArgument naming `pruner` otherwise.
Result<std::unique_ptr<Pruner>> MakePruner(const std::string& name, const AshaOptions& asha,
                                           const MedianOptions& median);

// The objective the tuner maximizes by default: 0.1 * mAP50 + 0.9 *
// mAP50-95, the trainer's fitness (eval::Metrics::fitness).
inline double Fitness(double map50, double map5095) { return 0.1 * map50 + 0.9 * map5095; }

}  // namespace kestrel::tune
