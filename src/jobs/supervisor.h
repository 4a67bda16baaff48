// Supervisor: runs one attempt as a child process and watches it until it
// ends: exit code or signal, progress heartbeats (no progress for
// hang_timeout_ms -> killed as "hung"), a wall-clock limit ("timeout"), and
// the worker's lease (the heartbeat callback failing -> "lease_lost", which
// also covers cancellation). Stopping is SIGTERM to the child's process group,
// grace_ms to checkpoint, then SIGKILL.
//
// All waiting goes through Env (SleepMicros/NowMicros), so with a
// FakeClockEnv and FakeProcessRunner a test runs hours of supervision
// exactly and instantly. Not thread-safe; one Supervisor per attempt.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/env.h"
#include "jobs/process_runner.h"
#include "store/job_types.h"

namespace kestrel::jobs {

struct SupervisorOptions {
  int64_t heartbeat_ms = 30'000;     // how often the lease is renewed
  int64_t hang_timeout_ms = 90'000;  // no progress line for this long -> hung
  int64_t grace_ms = 10'000;         // SIGTERM -> SIGKILL
  int64_t poll_ms = 100;             // how often the child is checked
  int64_t wall_clock_limit_ms = 0;   // per attempt; 0 = none
};

Status ValidateSupervisorOptions(const SupervisorOptions& o);

struct SupervisedRun {
  int64_t pid = 0;
  ExitInfo exit;
  // "exited" / "signaled" when the child ended by itself; "hung",
  // "timeout", "lease_lost" when the supervisor stopped it.
  std::string end;
  bool sigkill_needed = false;  // the child outlived the grace period
  int64_t duration_ms = 0;
  int64_t progress_lines = 0;
  std::string last_progress;
  store::FailureStage stage = store::FailureStage::kNone;  // last "stage=" seen
  std::string child_reason;                                // last "reason=" seen
  std::string result_json;                                 // last "result " line
};

class Supervisor {
 public:
  Supervisor(ProcessRunner& runner, Env& env, SupervisorOptions options)
      : runner_(runner), env_(env), options_(options) {}

  // Runs the child to its end. `heartbeat` is called every heartbeat_ms
  // (renew the lease); a non-OK status stops the child as "lease_lost".
  // Fails only when the child cannot be started.
  Result<SupervisedRun> Run(const ProcessSpec& spec, const std::function<Status()>& heartbeat);

 private:
  ProcessRunner& runner_;
  Env& env_;
  SupervisorOptions options_;
};

// What the worker passes to MetadataStore::CompleteAttempt. Success needs
// exit code 0 by itself (not stopped by the supervisor); the quality gate on
// the result is the worker's to check.
store::AttemptOutcome ToOutcome(const SupervisedRun& run);

}  // namespace kestrel::jobs
