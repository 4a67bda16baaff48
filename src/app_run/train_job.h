// Training as use cases: one job attempt as `kestrel worker` runs it (the
// child `kestrel train --job ID --attempt N`), with the resume fallback
// through earlier attempts' checkpoints and the result contract the
// supervisor reads; and the JSON view of a training summary. Torch-free
// header (train/trainer.h, which pulls in torch types, is included only by
// train_job.cc).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>

#include "core/failure.h"
#include "core/status.h"

namespace kestrel::train {
struct TrainSummary;
}

namespace kestrel::app {

// Where an attempt reports to. Every member may be empty/null.
struct AttemptIo {
  // One line (without newline) to the supervisor: `stage=...` progress,
  // `reason=<token>` on failure, `result {json}` at the end (docs/jobs.md).
  std::function<void(const std::string&)> progress;
  std::ostream* out = nullptr;              // human log lines (resuming, fallbacks, the summary line)
  const std::atomic<bool>* stop = nullptr;  // raised: the trainer checkpoints and stops
  // Called once, right before the first training run (the CLI installs its
  // SIGTERM/SIGINT handlers there, so an earlier signal still ends the
  // process as before).
  std::function<void()> before_training;
};

struct AttemptOutcome {
  int exit_code = kTrainExitOk;                  // core/failure.h's table
  FailureReason failure = FailureReason::kNone;  // kNone when it succeeded
  Status error;                                  // why it failed (OK when it succeeded)
  nlohmann::json result;  // the result contract (success only): best, last, checkpoint, map50, ...
};

// Runs attempt `attempt` of stored job `job_id` under Kestrel home `home`
// (made absolute): checks that the attempt is current, rebuilds the training
// options from the job's stored config, trains in
// <home>/jobs/<id>/attempt-<n>/ (the process's working directory from then
// on: the checkpoint stores run_dir "."), resuming from the newest earlier
// attempt's last.ckpt — a corrupted one falls back to the next older, then
// to scratch — and, when a resumed attempt has no best.safetensors of its
// own, carries the newest earlier one over (or the last epoch's weights
// after a crash between last.ckpt and best.*). Reports `reason=` on failure
// and `result {json}` on success through io.progress.
AttemptOutcome RunJobAttempt(const std::string& home, int64_t job_id, int64_t attempt, const AttemptIo& io);

// `kestrel train --job --json`'s document: {"ok": true, "job_id", "result"}
// or {"ok": false, "job_id", "attempt", "reason", "error": {code, message,
// file, line, field}} (code "usage" for exit code 2).
nlohmann::json AttemptOutcomeJson(int64_t job_id, int64_t attempt, const AttemptOutcome& outcome);

// `kestrel train --json`'s summary: ok, exit_reason, message, run_dir,
// epochs_completed, best, weights, rollbacks, nonfinite_iterations,
// images_per_second, epochs[].
nlohmann::json TrainSummaryJson(const train::TrainSummary& summary);

}  // namespace kestrel::app
