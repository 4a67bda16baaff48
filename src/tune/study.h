// The study coordinator's decisions as a pure function of the study's
// trials: what to start, continue or stop next. The coordinator (the `tune`
// job kind, not built yet: docs/tune.md "Status") loads the trials from the
// store, applies the actions through the job queue and records each
// resulting state change; because Plan() and OnEpoch() read nothing but
// their arguments, a coordinator restarted after a SIGKILL takes the same
// decisions from the same stored trials, and no trial is run twice.
//
// Trial accounting (docs/tune.md "Trial states"): a study has `trials`
// trials to spend. succeeded, pruned and failed trials spent theirs (a
// failed trial is the trial's own fault: it is left out of the sampler's
// model but not retried); infra-failed trials spent none (the job system's
// fault), so another trial takes their place. A pruned trial may come back:
// an ASHA promotion continues it from its checkpoint (kResume), without a
// new trial.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "tune/pruner.h"
#include "tune/sampler.h"
#include "tune/space.h"

namespace kestrel::tune {

struct StudySettings {
  int trials = 50;                             // trials to spend
  int parallel = 4;                            // trials queued or running at once
  int epochs = 30;                             // each trial's full length (ASHA's max_epochs)
  uint64_t seed = 0;                           // the samplers' seed
  Direction direction = Direction::kMaximize;  // fitness is maximized
  std::string sampler = "tpe";                 // tpe | random
  bool multivariate = false;                   // TPE's joint mode
  std::string pruner = "asha";                 // asha | median | none
  int min_epochs = 1;                          // ASHA's first rung
  int eta = 3;                                 // ASHA's reduction factor

  // kInvalidArgument naming the setting: trials, parallel, epochs >= 1,
  // min_epochs in [1, epochs], eta >= 2, a known sampler and pruner.
  Status Validate() const;
};

struct StudyAction {
  enum class Kind {
    kSubmit,  // start new trial `number` with `params` (queued)
    kResume,  // continue pruned trial `number` from its checkpoint (ASHA promotion)
  };
  Kind kind = Kind::kSubmit;
  int64_t number = 0;
  std::vector<double> params;  // kSubmit: internal values (Param::ValueText for tokens)
};

class StudyPlanner {
 public:
  // REQUIRES: settings.Validate() is OK.
  StudyPlanner(SearchSpace space, StudySettings settings);

  // The actions that fill the free slots (parallel minus queued and
  // running trials), in order: promotions first (ASHA), then new trials
  // while trials remain to spend. Each action sees the ones before it
  // (a suggested trial is a running trial for the constant liar). Empty
  // when nothing is to be started.
  std::vector<StudyAction> Plan(const std::vector<Trial>& trials) const;
  // After `trial` reported epoch trial.intermediate.size(): go on or stop
  // (pruned). kContinue without a pruner.
  PruneDecision OnEpoch(const std::vector<Trial>& trials, const Trial& trial) const;
  // True when every trial is spent, none is queued or running and no
  // pruned trial is due a promotion.
  bool Finished(const std::vector<Trial>& trials) const;

  // Trials that count against settings.trials (all but infra-failed).
  static int Spent(const std::vector<Trial>& trials);

 private:
  AshaOptions Asha() const;

  SearchSpace space_;
  StudySettings settings_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Pruner> pruner_;  // null for pruner=none
};

}  // namespace kestrel::tune
