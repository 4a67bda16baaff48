// What every `kestrel <kind> --job ID --attempt N` child shares (docs/jobs.md
// "Job attempts"): the progress pipe to its supervisor, the check that the
// attempt is the job's current one, and the failure report (a `reason=`
// line, the exit code from core/failure.h, the JSON error document). `val
// --job` uses it; `train --job` (train_cmd.cc) uses only ProgressPipe: its
// attempt, reason mapping and JSON views are app::RunJobAttempt's
// (app_run/train_job.h).
#pragma once

#include <cstdint>
#include <string>

#include "cli/cli.h"
#include "core/failure.h"
#include "core/status.h"
#include "store/job_types.h"

namespace kestrel::cli {

// Whole lines to the fd named by KESTREL_PROGRESS_FD (nothing without one).
// A gone supervisor never kills the child (SIGPIPE is ignored).
class ProgressPipe {
 public:
  ProgressPipe();
  void Line(const std::string& line);

 private:
  int fd_ = -1;
};

// One attempt of a job, as its child sees it.
class JobChild {
 public:
  JobChild(Context& ctx, int64_t job_id, int64_t attempt) : ctx_(ctx), job_id_(job_id), attempt_(attempt) {}

  // Says `stage=data job=… attempt=…`, opens the store (home made absolute),
  // loads the job and checks that this attempt is its current running one.
  // On failure returns the exit code through *exit_code (already reported).
  bool Begin(Stores* stores, store::JobRecord* job, int* exit_code);
  // Reports the failure (`reason=` on the pipe, the error on stderr, the
  // JSON error document with --json) and returns its exit code.
  int Fail(FailureReason reason, const Status& why);
  // Reports success: `result {json}` on the pipe and, with --json,
  // {"ok": true, "job_id", "result"}. Returns 0.
  int Succeed(const nlohmann::json& result);

  ProgressPipe& Progress() { return progress_; }
  // $KESTREL_HOME/jobs/<id> and its attempt-<n> folder (absolute).
  std::string JobDir() const;
  std::string AttemptDir() const;
  const std::string& Home() const { return home_; }

 private:
  Context& ctx_;
  int64_t job_id_, attempt_;
  std::string home_;
  ProgressPipe progress_;
};

}  // namespace kestrel::cli
