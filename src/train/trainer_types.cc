// The torch-free definitions of trainer.h: everything it declares but
// Train(). In kestrel_train_config, so a caller that only builds options,
// names an exit reason or maps a summary to its exit code links no LibTorch.
#include "train/trainer.h"

namespace kestrel::train {

LossOptions TrainOptions::EffectiveLoss() const {
  LossOptions lo = loss;
  lo.box_gain = box;
  lo.cls_gain = cls;
  lo.dfl_gain = dfl;
  return lo;
}

Status TrainOptions::Validate() const {
  KESTREL_RETURN_IF_ERROR(TrainConfig::Validate());
  return EffectiveLoss().Validate();
}

std::string ResolveRunDir(Env& env, const TrainConfig& c) {
  if (!c.run_dir.empty()) return c.run_dir;
  std::string base = JoinPath(c.project, c.name);
  if (c.exist_ok || !env.Stat(base).exists) return base;
  for (int i = 2;; ++i) {
    std::string cand = base + std::to_string(i);
    if (!env.Stat(cand).exists) return cand;
  }
}

const char* ExitReasonName(ExitReason r) {
  switch (r) {
    case ExitReason::kCompleted:
      return "completed";
    case ExitReason::kEarlyStopped:
      return "early_stopped";
    case ExitReason::kStopped:
      return "stopped";
    case ExitReason::kDiverged:
      return "diverged";
    case ExitReason::kHalted:
      return "halted";
  }
  return "unknown";
}

const char* PhaseName(Phase p) {
  switch (p) {
    case Phase::kSetup:
      return "setup";
    case Phase::kVal:
      return "val";
    case Phase::kPlots:
      return "plots";
  }
  return "unknown";
}

FailureReason TrainSummary::Failure() const {
  switch (reason) {
    case ExitReason::kCompleted:
    case ExitReason::kEarlyStopped:
      return FailureReason::kNone;
    case ExitReason::kStopped:
      return FailureReason::kStopped;
    case ExitReason::kDiverged:
      return FailureReason::kDiverged;
    case ExitReason::kHalted:
      return FailureReason::kError;
  }
  return FailureReason::kError;
}

int TrainSummary::ExitCode() const { return ExitCodeFor(Failure()); }

}  // namespace kestrel::train
