// Training checkpoints: everything needed to continue a run bit-exactly, in
// one safetensors file written crash-safely (Env::WriteFileAtomic). Format
// (docs/formats.md "Training checkpoint"):
//   tensors  model/<name>   every parameter and buffer of the trained model
//            ema/<name>     the EMA's averaged parameters and buffers
//            grad/<name>    gradients accumulated since the last optimizer
//                           step (only those that are defined)
//            optimizer      U8 [n]: torch::serialize archive of the optimizer
//            rng/cpu        U8 [n]: torch's default CPU generator state
//   metadata format = "kestrel-checkpoint", format_version, state (JSON of
//            CheckpointState), checksum = sha256 over the state and every
//            tensor's name, dtype, shape and bytes.
// Any mismatch (bad checksum, unparsable file, wrong format version, missing
// or mis-shaped tensor) is kCorruption / kInvalidArgument naming the file;
// a checkpoint is never partially applied to a model... except that a
// failed ApplyCheckpoint may leave the modules half-written: callers rebuild
// them (the trainer aborts).
#pragma once
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <optional>
#include <string>

#include "core/env.h"
#include "core/safetensors.h"
#include "core/status.h"
#include "model/yolo.h"
#include "train/optimizer.h"
#include "train/schedule.h"

namespace kestrel::train {

inline constexpr int kCheckpointFormatVersion = 1;

// Running sums of the epoch in progress (so a mid-epoch resume prints and
// records the same epoch means).
struct EpochAccum {
  double box = 0, cls = 0, dfl = 0;  // sums of loss items over finite batches
  int64_t batches = 0;               // finite batches summed
  int64_t instances = 0;             // targets seen
  int64_t nonfinite = 0;             // non-finite iterations this epoch
};

// The scalar part of a checkpoint (metadata "state", JSON).
struct CheckpointState {
  int format_version = kCheckpointFormatVersion;
  ScheduleState schedule;  // next iteration, last step, steps taken
  int64_t batches_per_epoch = 0;
  int epochs = 0;
  double lr_scale = 1.0;  // NaN-policy LR multiplier (halved per rollback)
  int rollbacks = 0;
  double best_fitness = -1.0;  // -1 = no validation yet
  int best_epoch = 0;          // 1-based
  int64_t ema_updates = 0;
  uint64_t loader_seed = 0;
  std::string dataset_version;  // registry version id
  std::string config_json;      // OptionSet::ToJson() of the effective config
  std::string history_json;     // JSON array of epoch records (progress.h)
  EpochAccum accum;
};

// Whether an epoch with `fitness` becomes the run's best: the first recorded
// epoch (best_epoch == 0) always does, a later one only when strictly better.
// Fitness is negative without a val split (minus the train loss), so its
// sign never means "no best yet" -- that reading made every such epoch the
// best and `patience` never stopped the run.
bool IsNewBest(const CheckpointState& s, double fitness);

std::string CheckpointStateToJson(const CheckpointState& s);
Result<CheckpointState> CheckpointStateFromJson(const std::string& text, const std::string& origin);

// Snapshot of model + EMA + gradients + optimizer + RNG + state, as file bytes.
Result<std::string> SerializeCheckpoint(const CheckpointState& state, model::YoloImpl& model,
                                        const ModelEma& ema, torch::optim::Optimizer& optimizer);

// Parses and verifies (checksum, format, version). `origin` names the file in errors.
struct ParsedCheckpoint {
  CheckpointState state;
  SafeTensorFile file;
};
Result<ParsedCheckpoint> ParseCheckpoint(const std::string& bytes, const std::string& origin);
Result<ParsedCheckpoint> ReadCheckpoint(Env& env, const std::string& path);
// The custom graph a checkpoint carries (metadata "graph", GraphYaml; in the
// checksum) with `nc` classes, so a resume rebuilds it without the model
// yaml; nullopt for a built-in family's checkpoint.
Result<std::optional<model::ModelSpec>> CheckpointGraph(const ParsedCheckpoint& ckpt, int nc,
                                                        const std::string& origin);

// Copies model/*, grad/* into `model`, ema/* into `ema_model`, loads the
// optimizer archive and the CPU generator state. The caller then builds a
// ModelEma from `ema_model` with state.ema_updates.
Status ApplyCheckpoint(const ParsedCheckpoint& ckpt, const std::string& origin, model::YoloImpl& model,
                       model::YoloImpl& ema_model, torch::optim::Optimizer& optimizer);

}  // namespace kestrel::train
