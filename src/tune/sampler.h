// Samplers: what the next trial of a study tries, given the history.
//
// A sampler is a pure function of (space, history, trial number, seed):
// the draws of trial n come from TuneRng(TrialSeed(seed, n)), so the same
// history gives the same suggestion after a restart, and with parallel
// trials the same completion order gives the same suggestions.
//
// Values are in each Param's internal coordinate (space.h: log(value) for
// log params, the choice index for categoricals); Param::ValueText turns
// them into `key=value` text. Two samplers: RandomSampler (the baseline:
// independent uniform draws in the internal coordinate) and TpeSampler
// (tpe.h). Thread-compatible: Suggest is const.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "tune/space.h"

namespace kestrel::tune {

// The states of a trial (docs/tune.md "Trial states").
enum class TrialState {
  kQueued,       // suggested, its train job not started
  kRunning,      // its train job runs; intermediate values arrive
  kSucceeded,    // finished every epoch; `value` is its objective
  kPruned,       // stopped by the pruner at a rung; not a failure
  kFailed,       // the trial's own fault (diverged, bad config): excluded from the model
  kInfraFailed,  // the job system's fault: retried, spends no trial
};
const char* TrialStateName(TrialState s);

enum class Direction { kMinimize, kMaximize };

// One trial as the samplers and pruners see it.
struct Trial {
  int64_t number = 0;  // 0, 1, 2, ... in suggestion order
  TrialState state = TrialState::kQueued;
  std::vector<double> params;   // internal values, one per space param
  std::optional<double> value;  // kSucceeded: the objective
  // Per-epoch objective (metric of epoch e at index e-1) as reported so far.
  std::vector<double> intermediate;
};

// The loss a sampler ranks by: the value for kMinimize, -value for kMaximize.
inline double Loss(Direction d, double value) { return d == Direction::kMinimize ? value : -value; }

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The params of trial `number`. `history` is every other trial of the
  // study in any order (the sampler reads what it needs by state).
  virtual std::vector<double> Suggest(const SearchSpace& space, const std::vector<Trial>& history,
                                      int64_t number) const = 0;
};

// Uniform over each param's internal range (log-uniform for log params,
// every int and choice equally likely), independent per param.
class RandomSampler : public Sampler {
 public:
  explicit RandomSampler(uint64_t seed) : seed_(seed) {}
  std::vector<double> Suggest(const SearchSpace& space, const std::vector<Trial>& history,
                              int64_t number) const override;

 private:
  uint64_t seed_;
};

struct TpeOptions {
  uint64_t seed = 0;
  Direction direction = Direction::kMaximize;
  int startup_trials = 10;    // random suggestions until this many trials finished (succeeded or pruned)
  int ei_candidates = 24;     // draws from l(x) scored by l(x)/g(x) per param
  double prior_weight = 1.0;  // weight of the prior kernel in l (and in g when bad_prior_share is 0)
  // g's (the bad trials' estimator's) prior weight as a share, in [0, 1),
  // of the finished bad trials' weight: 0.5 makes the prior weigh as much
  // as all finished bad observations together; the constant liar's running
  // trials come on top at full weight (docs/tune.md "Why g keeps half its
  // weight on the prior"). 0 gives the prior prior_weight, as in the
  // published TPE. Categorical kernels keep prior_weight for their own
  // smoothing either way.
  double bad_prior_share = 0.5;
  // Running (and queued) trials count as bad observations with the worst
  // loss, so parallel suggestions spread out.
  bool constant_liar = true;
  // One joint estimator over all params instead of one per param
  // (tpe.h, MultivariateSigma0).
  bool multivariate = false;
};
class TpeSampler : public Sampler {
 public:
  explicit TpeSampler(TpeOptions options) : options_(options) {}
  std::vector<double> Suggest(const SearchSpace& space, const std::vector<Trial>& history,
                              int64_t number) const override;

 private:
  TpeOptions options_;
};

// "random" or "tpe"; kInvalidArgument naming `sampler` otherwise, or naming
// the option when a TpeOptions field is out of range (bad_prior_share
// outside [0, 1), prior_weight <= 0, ei_candidates < 1, startup_trials < 0).
Result<std::unique_ptr<Sampler>> MakeSampler(const std::string& name, const TpeOptions& options);

}  // namespace kestrel::tune
