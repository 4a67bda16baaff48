// Training as use cases: the train kind's attempt runner (the child
// `kestrel train --job ID --attempt N` runs it through app::RunAttempt), with
// the resume fallback through earlier attempts' checkpoints; and the JSON
// view of a training summary. Torch-free: the training itself is the
// program's train backend (app/backends.h; kestrel-torch's is train::Train).
#pragma once

#include <nlohmann/json.hpp>

#include "app/job_kinds.h"
#include "core/status.h"

namespace kestrel::train {
struct TrainSummary;
}

namespace kestrel::app {

// The train kind's attempt runner (app/job_kinds.h JobKindSpec::run, lent
// to kestrel-torch's table by its LibTorch backend): after RunAttempt's preamble, rebuilds the training
// options from the job's stored config, trains in ctx.AttemptDir() (the
// process's working directory from then on: the checkpoint stores run_dir
// "."), resuming from the newest earlier attempt's last.ckpt — a corrupted
// one falls back to the next older, then to scratch — and, when a resumed
// attempt has no best.safetensors of its own, carries the newest earlier
// one over (or the last epoch's weights after a crash between last.ckpt and
// best.*). Posts the job's live metrics; calls io.before_training right
// before training. The result: best, last, checkpoint, validated, map50 and
// map50_95 (or not_validated), run_dir; details best_epoch, epochs,
// exit_reason, warnings, note.
Result<AttemptResult> RunTrainAttempt(AttemptContext& ctx);

// `kestrel train --json`'s summary: ok, exit_reason, message, run_dir,
// epochs_completed, best, weights, rollbacks, nonfinite_iterations,
// images_per_second, epochs[].
nlohmann::json TrainSummaryJson(const train::TrainSummary& summary);

}  // namespace kestrel::app
