// Private to src/train (trainer.cc, epoch_end.cc): the state of one Train()
// call and the parts of the loop that work on it between iterations.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "core/thread_policy.h"
#include "data/loader.h"
#include "data/version.h"
#include "eval/metrics.h"
#include "model/yolo.h"
#include "store/metadata_store.h"
#include "train/checkpoint.h"
#include "train/loss.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/trainer.h"
#include "train/validator.h"

namespace kestrel::train::internal {

// NaN policy (docs/training.md): a non-finite loss or gradient skips the
// step; this many in a row, or more than max(3, 10% of an epoch's batches)
// in one epoch, roll back to the last good checkpoint with half the LR; after
// kMaxRollbacks rollbacks the run ends as diverged.
constexpr int kNonFiniteInARow = 3;
constexpr int kMaxRollbacks = 2;

// Everything one Train() call composes. Owned by TrainImpl (trainer.cc),
// destroyed at return (so back-to-back runs do not accumulate memory).
struct Run {
  TrainOptions opt;
  Env* env = nullptr;
  const TrainHooks* hooks = nullptr;
  std::string run_dir, weights_dir;
  std::unique_ptr<store::MetadataStore> meta;
  std::unique_ptr<store::ArtifactStore> blobs;
  data::VersionView dataset;
  int nc = 0;
  torch::Device device = torch::kCPU;
  std::string threads_why;                       // how the torch thread count was chosen (printed at start)
  int loader_workers = 1;                        // the loader's threads (the budget's share unless workers=N)
  std::vector<int> budget_cpus;                  // the CPUs AdaptiveThreads watches
  std::optional<AdaptiveThreads> thread_policy;  // none on a GPU
  bool amp = false;     // CUDA autocast (bf16) around the forward: amp=true on a CUDA device
  int micro_batch = 0;  // after a CUDA out-of-memory: images per forward (0 = the whole batch)
  std::optional<model::Yolo> model, ema_model;
  std::unique_ptr<ModelEma> ema;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::optional<Schedule> schedule;
  std::optional<DetectionLoss> loss;
  std::unique_ptr<data::Loader> loader;
  std::unique_ptr<Validator> validator;
  RunShape shape;
  CheckpointState state;
  std::vector<EpochRecord> history;
  std::string good_checkpoint;  // bytes of the last checkpoint written (rollback target)
  std::optional<eval::EvalResult> last_eval;
  int64_t consecutive_nonfinite = 0;
  bool mosaic_open = true;  // the loader's mosaic in the epoch started last (the close is announced once)
  TrainSummary summary;
  std::ostream* out = nullptr;
  int64_t setup_steps = 0, setup_done = 0;  // Phase::kSetup progress
  // The setup step in progress and when it began (Env::NowMicros), for the
  // debug-level timing of each step (docs/training.md "Where the first
  // seconds go").
  std::string setup_step;
  int64_t setup_step_us = 0;
};

inline void Print(Run& r, const std::string& text) {
  if (r.out != nullptr) (*r.out) << text << std::flush;
}

inline void ReportPhase(Run& r, Phase phase, int epoch, int64_t done, int64_t total,
                        std::string_view step = {}) {
  if (!r.hooks->on_phase_progress) return;
  PhaseProgress p;
  p.phase = phase;
  p.epoch = epoch;
  p.done = done;
  p.total = total;
  p.step = step;
  r.hooks->on_phase_progress(p);
}

// Puts the run back into the state of a checkpoint (resume and rollback).
Status Restore(Run& r, const ParsedCheckpoint& ckpt, const std::string& origin);

// The checkpointer: weights/last.ckpt (+ last.safetensors, EMA weights), and
// on a new best weights/best.ckpt (+ best.safetensors).
Status WriteCheckpoint(Run& r, bool is_best);

// After the last batch of an epoch: validate the EMA, record, checkpoint.
// Returns true when early stopping ends the run.
Result<bool> EndEpoch(Run& r, int epoch, const IterationPlan& plan, double seconds);

// The NaN policy's rollback. Returns false when the run must end as diverged.
Result<bool> Rollback(Run& r);

}  // namespace kestrel::train::internal
