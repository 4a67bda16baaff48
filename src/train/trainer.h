// The YOLOv8 training loop, composed of small parts: the data loader
// (data/loader.h), the model (model/yolo.h), the loss (loss.h), the schedule
// and optimizer/EMA helpers (schedule.h, optimizer.h), the checkpointer
// (checkpoint.h), the validator (validator.h) and the progress printer
// (progress.h). This header is the whole public API: options, hooks, result.
//
// Side effects at the edges: the trainer never installs signal handlers; the
// CLI does and hands the trainer a stop flag that it polls after every
// iteration. It does set torch's intra-op thread count (`threads`) because
// that is part of the run's configuration (and of its determinism).
//
// Torch-free (checked: src/train/README.md 'Includes'): a caller (`kestrel
// train`, the train job's runner) compiles without the LibTorch headers.
// Everything declared here but Train() is defined in trainer_types.cc
// (kestrel_train_config, built without LibTorch); Train() and its torch
// state (internal/run.h) are kestrel_train's.
//
// Layout of a run directory, checkpoint format, exit codes, NaN policy and
// resume semantics: docs/training.md ("Trainer").
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/options.h"
#include "core/status.h"
#include "data/loader.h"
#include "train/loss_options.h"
#include "train/schedule.h"
#include "train/train_config.h"

namespace kestrel::train {

// Every `kestrel train` key is a TrainConfig field (train_config.h, torch-free,
// so `kestrel submit` binds and validates the very same struct); the trainer
// adds what only the API sets.
struct TrainOptions : TrainConfig {
  std::string home;  // Kestrel home ("" = $KESTREL_HOME or ./.kestrel)
  // Loss settings the keys do not cover (class_weights; the assigner
  // constants). Its gains are ignored: box/cls/dfl of TrainConfig win
  // (EffectiveLoss).
  LossOptions loss;

  // `loss` with the gains of the keys.
  LossOptions EffectiveLoss() const;
  // TrainConfig::Validate plus the loss extras.
  Status Validate() const;
};

// The folder a new run writes to: `run_dir` when set, else project/name
// (default runs/detect/train, relative to the working directory, as the
// reference trainer) when it does not exist or exist_ok, else the first free
// project/name2, name3, ... Looks at the file system through `env`; creates
// nothing. A resumed run keeps its checkpoint's folder instead.
std::string ResolveRunDir(Env& env, const TrainConfig& c);

enum class ExitReason { kCompleted, kEarlyStopped, kStopped, kDiverged, kHalted };
const char* ExitReasonName(ExitReason r);  // "completed", "early_stopped", "stopped", "diverged", "halted"

// One epoch's results (a results.csv row).
struct EpochRecord {
  int epoch = 0;                     // 1-based
  double box = 0, cls = 0, dfl = 0;  // mean train loss items
  std::array<double, 3> lr{};        // last LR per param group
  double precision = 0, recall = 0, map50 = 0, map5095 = 0, fitness = 0;
  double val_box = 0, val_cls = 0, val_dfl = 0;  // mean loss items on the val split (0 without val)
  double seconds = 0;                            // wall time of the epoch (not part of determinism)
};

struct TrainSummary {
  ExitReason reason = ExitReason::kCompleted;
  std::string message;  // why it ended, human-readable
  std::string run_dir;
  int epochs_completed = 0;
  int best_epoch = 0;  // 1-based, 0 = none
  double best_fitness = 0, best_map50 = 0, best_map5095 = 0;
  // Whether the epochs were scored on the val split. false (val=false, or no
  // usable val split): best_epoch is the lowest train loss, best_map50 and
  // best_map5095 are not measurements (0) and must not be shown or compared
  // as such; `not_validated` says why ("val=false", "no val split: ...").
  bool validated = false;
  std::string not_validated;
  // Accepted settings that have no effect (label_smoothing=0.1), each
  // printed at setup; the job result and `train --json` carry them.
  std::vector<std::string> warnings;
  int rollbacks = 0;  // NaN-policy rollbacks taken
  int64_t nonfinite_iterations = 0;
  int64_t iterations = 0;        // trained in this process
  double images_per_second = 0;  // train throughput in this process
  std::string device;            // where it trained: "cpu" or "cuda:N"
  bool amp = false;              // whether CUDA autocast (bf16) ran (amp=true on the CPU: false)
  int batch = 0;                 // the loader's batch size (batch=-1 resolved)
  // CUDA out-of-memory steps absorbed by halving the micro-batch, and the
  // micro-batch at the end (0 = whole batches, no OOM happened).
  int oom_retries = 0;
  int micro_batch = 0;
  std::vector<EpochRecord> history;
  // The epoch whose weights (weights/best.*) the final validation scored,
  // as the reference's final validation of best.pt: the per-class table
  // printed at the end, the plots and val_batch*_labels/pred.jpg grids are
  // that validation's. 0 = none (stopped, diverged, or nothing validated).
  int final_val_epoch = 0;
  // How the run ended as a failure reason: kNone (completed, early-stopped),
  // kDiverged, kStopped (checkpoint written, resumable), kError (halted).
  FailureReason Failure() const;
  // Its `kestrel train` exit code from the one table (core/failure.h):
  // 0, kTrainExitDiverged (4), kTrainExitStopped (8), 1.
  int ExitCode() const;
};

// A long phase outside the training iterations, making progress. The job
// runner turns these into progress lines so the supervisor's hang detector
// (docs/jobs.md) sees a big validation set or a slow setup step advance.
enum class Phase {
  kSetup,  // before the first iteration; units: setup steps (see `step`)
  kVal,    // one epoch's validation; units: val images
  kPlots,  // the evaluation plots after the last epoch; units: plot sets (1)
};
const char* PhaseName(Phase p);  // "setup", "val", "plots"

struct PhaseProgress {
  Phase phase = Phase::kSetup;
  int epoch = 0;      // kVal: the 1-based epoch being validated; else 0
  int64_t done = 0;   // units finished: 0 when the phase begins, nondecreasing, == total at its end
  int64_t total = 0;  // units in this run of the phase, >= 1
  // kSetup: the step starting now ("checkpoint", "dataset", "model",
  // "loaders", "restore"); "" in the final call (done == total).
  std::string_view step;
};

// One trained iteration, as a live-metrics observer sees it (the job runner
// turns these into store events: app/metric_events.h).
struct IterationReport {
  int epoch = 0, epochs = 0;       // 1-based epoch of this iteration
  int64_t batch = 0, batches = 0;  // 1-based batch within the epoch
  int64_t iteration = 0;           // 0-based global iteration (as in the schedule)
  int64_t total_iterations = 0;    // of the whole run
  bool finite = true;              // false: skipped by the NaN policy (loss is 0)
  std::array<double, 3> loss{};    // box, cls, dfl loss items of this iteration
  double it_per_s = 0;             // this epoch so far, in this process
  double eta_s = 0;                // the rest of the run at that rate
};

// A CUDA out-of-memory absorbed in a training step (docs/training.md
// "Out of memory"): the step's gradients were dropped and the same batch is
// run again in micro-batches of `to` images (gradients accumulated over
// them), for the rest of this process.
struct OomReport {
  int epoch = 0;          // 1-based
  int64_t iteration = 0;  // 0-based global iteration
  int batch = 0;          // images in the batch
  int from = 0, to = 0;   // micro-batch before and after
  std::string message;    // LibTorch's, without backtrace
};

// Test and CLI seams. All optional.
struct TrainHooks {
  const std::atomic<bool>* stop = nullptr;  // polled after every iteration
  std::ostream* out = nullptr;              // progress; nullptr = silent
  bool tty = false;                         // redraw the progress line (\r)
  // Tests: return ExitReason::kHalted right after this many iterations of this
  // process, WITHOUT writing a checkpoint (what SIGKILL leaves behind).
  int64_t halt_after_iterations = -1;
  // Tests: also checkpoint after every N iterations (0 = off), like save_period_min.
  int64_t checkpoint_every_iterations = 0;
  // Tests: the loss of every iteration >= this global iteration becomes NaN
  // (-1 = off), to exercise the NaN policy deterministically. (A huge lr0 is
  // not a reliable trigger: OptimizerOptions caps lr0 at 10, and gradient
  // clipping plus BatchNorm keep such runs finite.)
  int64_t nan_from_iteration = -1;
  // Tests: called before every forward of a training step (each micro-batch)
  // with the global iteration and the micro-batch's images. It may throw to
  // inject a fault: model::ThrowOutOfMemory (torch_compat.h) is what a CUDA
  // out-of-memory looks like, so the halving runs on the CPU too.
  std::function<void(int64_t iteration, int images)> before_forward;
  // After a CUDA out-of-memory was absorbed (the job runner posts an event).
  std::function<void(const OomReport&)> on_oom;
  std::function<void(const EpochRecord&)> on_epoch;  // after each validated epoch
  // After every trained iteration (finite or skipped): 1-based epoch, global
  // iteration (0-based, as in the schedule) and total iterations. The job
  // runner turns this into heartbeat progress lines.
  std::function<void(int epoch, int64_t iteration, int64_t total_iterations)> on_iteration;
  // Progress of the long phases between iterations: at the start of each
  // phase (done = 0), after every setup step and every val batch, and at its
  // end (done == total). Called on the training thread, possibly thousands
  // of times per second on tiny data: rate-limit any output.
  std::function<void(const PhaseProgress&)> on_phase_progress;
  // After every trained iteration, like on_iteration, with the iteration's
  // loss items, rate and ETA. Called on the training thread: keep it cheap
  // (sample, hand off to another thread).
  std::function<void(const IterationReport&)> on_iteration_report;
  // After a resume restored its checkpoint, before the first iteration: the
  // epochs the checkpoint had already recorded (oldest first), which
  // on_epoch will not be called for again.
  std::function<void(const std::vector<EpochRecord>&)> on_resumed;
};

// The checks `kestrel train` (and bench/train_throughput's travel_trainer)
// make before Train(), with `kestrel submit`'s messages: Validate(),
// ValidateFiles() and whether this machine has `device`; with resume= only
// that the checkpoint file is there (its stored config wins). In
// kestrel_train with Train() (start_checks.cc: the device check needs LibTorch).
Status CheckBeforeStart(const TrainOptions& options);

// Runs (or resumes) a training. Setup problems (bad options, unknown dataset,
// corrupted checkpoint, I/O) are errors; how the run ended is in the summary.
Result<TrainSummary> Train(const TrainOptions& options, const TrainHooks& hooks = {},
                           Env& env = Env::Default());

}  // namespace kestrel::train
