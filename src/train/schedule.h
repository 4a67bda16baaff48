// Optimizer choice and the per-iteration learning-rate / momentum / gradient
// accumulation schedule of YOLOv8 training. Torch-free: pure arithmetic, so it
// compiles fast and can be tested against the reference trainer's rows.
//
// Vocabulary (the reference trainer's names):
//   nb  = batches per epoch, ni = global iteration = batch_in_epoch + nb*epoch,
//   nw  = warmup iterations = max(round(warmup_epochs*nb), 100), or -1 when
//         warmup_epochs <= 0 (no warmup),
//   nbs = nominal batch size (64); gradients are accumulated over `accumulate`
//         batches so one optimizer step sees ~nbs images,
//   lf(e) = LR factor of epoch e (linear or cosine, see LrFactor).
// Parameter groups (the reference order): 0 = every bias (no decay; warmup
// starts at warmup_bias_lr), 1 = weights with decay, 2 = normalization-layer
// weights (no decay). See docs/training.md for every formula.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/options.h"
#include "core/status.h"

namespace kestrel::train {

// The Ultralytics keys and defaults for the optimizer and its schedule.
struct OptimizerOptions {
  std::string optimizer = "auto";  // auto | SGD | Adam | AdamW (case-insensitive)
  double lr0 = 0.01;               // initial LR (ignored by optimizer=auto)
  double lrf = 0.01;               // final LR = lr0 * lrf
  double momentum = 0.937;         // SGD momentum / Adam beta1
  double weight_decay = 5e-4;      // before scaling by batch*accumulate/nbs
  double warmup_epochs = 3.0;      // fractional allowed; <= 0 disables warmup
  double warmup_momentum = 0.8;    // SGD momentum at iteration 0
  double warmup_bias_lr = 0.1;     // group-0 LR at iteration 0 (auto forces 0)
  int nbs = 64;                    // nominal batch size
  bool cos_lr = false;             // cosine instead of linear LR factor

  // Binds the fields above under their Ultralytics key names (`optimizer`
  // takes the canonical spellings auto/SGD/Adam/AdamW; Validate accepts any case).
  void Bind(OptionSet& set);
  // The bound ranges applied to values set in code (the optimizer name in
  // any case); errors name the field.
  Status Validate() const;
};

// Shape of the training run, known once the data loader exists.
struct RunShape {
  int epochs = 0;                 // total epochs (> 0)
  int64_t batches_per_epoch = 0;  // len(train loader), partial last batch included (> 0)
  int64_t num_train_images = 0;   // dataset size; only optimizer=auto reads it (>= 0)
  int batch_size = 0;             // images per batch (> 0)
  int num_classes = 0;            // only optimizer=auto reads it (> 0)
};

enum class OptimizerKind { kSgd, kAdam, kAdamW };
const char* OptimizerKindName(OptimizerKind kind);  // "SGD", "Adam", "AdamW"

// What optimizer=auto (or an explicit name) resolves to.
struct ResolvedOptimizer {
  OptimizerKind kind = OptimizerKind::kSgd;
  double lr = 0.01;             // initial LR of all three groups ("initial_lr")
  double momentum = 0.937;      // SGD momentum / Adam(W) beta1 at construction
  double beta2 = 0.999;         // Adam(W) only
  bool nesterov = true;         // SGD only
  double weight_decay = 5e-4;   // scaled; applies to group 1 only
  double warmup_bias_lr = 0.1;  // after auto's override to 0
  int base_accumulate = 1;      // max(round(nbs/batch), 1)
};

// Resolves the optimizer as the reference does:
//   auto: iterations = ceil(num_train_images / max(batch, nbs)) * epochs;
//         > 10000 -> SGD lr 0.01 momentum 0.9, else AdamW with
//         lr = round(0.002*5/(4+nc), 6) and beta1 0.9; warmup_bias_lr = 0.
//   SGD: lr0, momentum, Nesterov. Adam/AdamW: lr0, betas (momentum, 0.999).
//   weight_decay = weight_decay * batch * base_accumulate / nbs.
Result<ResolvedOptimizer> ResolveOptimizer(const OptimizerOptions& options, const RunShape& shape);

// Everything a resume needs to continue the schedule exactly. Serializable.
struct ScheduleState {
  int64_t next_iteration = 0;        // ni of the next batch to train
  int64_t last_step_iteration = -1;  // ni of the last optimizer step, -1 = none yet
  int64_t steps_taken = 0;           // optimizer steps so far
};
std::string ScheduleStateToJson(const ScheduleState& state);  // {"next_iteration":..,...}
Result<ScheduleState> ScheduleStateFromJson(const std::string& text);

// What the trainer does at one iteration. Values equal those of the
// reference optimizer's param groups after that iteration's optimizer logic.
struct IterationPlan {
  int epoch = 0;
  int64_t iteration = 0;                 // ni
  int64_t batch_in_epoch = 0;            // i
  int accumulate = 1;                    // batches per optimizer step at this iteration
  bool optimizer_step = false;           // step (clip, step, zero_grad, EMA) after this backward
  int64_t steps_taken = 0;               // optimizer steps including this one
  std::array<double, 3> lr{};            // per param group 0, 1, 2
  double momentum = 0.0;                 // SGD momentum; Adam(W): beta1 (constant)
  std::array<double, 3> weight_decay{};  // per param group (only group 1 non-zero)
};

// Per-iteration schedule. Not thread-safe.
class Schedule {
 public:
  // Validates the options and state (state.next_iteration within the run).
  static Result<Schedule> Create(const OptimizerOptions& options, const RunShape& shape,
                                 const ScheduleState& state = {});

  const ResolvedOptimizer& Optimizer() const { return resolved_; }
  int64_t WarmupIterations() const { return warmup_iterations_; }  // nw, -1 = none
  int64_t TotalIterations() const { return shape_.batches_per_epoch * shape_.epochs; }
  bool Done() const { return state_.next_iteration >= TotalIterations(); }
  const ScheduleState& State() const { return state_; }

  // lf(epoch): linear max(1 - e/epochs, 0)*(1 - lrf) + lrf, or cosine
  // max((1 - cos(e*pi/epochs))/2, 0)*(lrf - 1) + 1.
  double LrFactor(int epoch) const;
  // The plan of iteration State().next_iteration; advances the state.
  // REQUIRES: !Done().
  IterationPlan Next();

 private:
  Schedule(OptimizerOptions options, RunShape shape, ResolvedOptimizer resolved, ScheduleState state);

  OptimizerOptions options_;
  RunShape shape_;
  ResolvedOptimizer resolved_;
  ScheduleState state_;
  int64_t warmup_iterations_ = -1;
};

// numpy.interp for two knots (x0, y0) < (x1, y1) with the reference's exact
// double arithmetic: y0 at x0, y1 at x >= x1, else (y1-y0)/(x1-x0)*(x-x0)+y0.
double Interp2(double x, double x0, double x1, double y0, double y1);
// Python's round() to an integer: nearest, ties to even.
int64_t RoundHalfEven(double x);

}  // namespace kestrel::train
