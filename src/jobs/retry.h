// Failure classification: from how an attempt ended (exit code, signal,
// stage, reason token) to retryable / permanent and which budget it is
// charged to. The reasons, their exit codes and classes are the one table in
// core/failure.h; the retry state machine that acts on the class is
// store/retry_decision.h (it runs inside the store's transaction).
//
// A reason the child writes (`reason=<token>` progress line) wins over its
// exit code; a supervisor verdict (hung, timeout, lease_lost) wins over both.
// Unknown tokens are kError: retryable (the retry cap stops a deterministic bug).
#pragma once

#include <string>

#include "core/failure.h"
#include "core/status.h"
#include "store/job_types.h"
#include "store/retry_decision.h"

namespace kestrel::jobs {

// Stored with every job (see store/job_types.h): max_retries, backoff_ms
// (default 300/900/1800 s, the last entry repeats), max_infra_retries.
// Validated and applied by the store (store/retry_decision.h).
using store::RetryPolicy;
using store::ValidateRetryPolicy;

struct FailureInput {
  int exit_code = 0;
  int signal = 0;  // terminating signal, 0 when the child exited
  store::FailureStage stage = store::FailureStage::kNone;
  std::string reason;  // token from the supervisor or the child; may be empty
};

struct Classification {
  store::FailureClass failure_class = store::FailureClass::kRetryable;
  bool infrastructure = false;
  // The input's token parsed (one this version does not know, a newer
  // child's, is kError), or derived from the exit code / signal when empty.
  FailureReason reason = FailureReason::kError;
};

// The exit code of a child that could not start: the dynamic loader's when a
// shared library is missing or fails to load, and the process runner's
// when exec fails. Classified `environment` (docs/failure-behaviour.md).
inline constexpr int kExitCannotStart = 127;

// An empty reason: SIGILL and exit 127 are `environment` (the host cannot
// run the program), SIGKILL `killed`, other signals `crashed`, an exit code
// its table row (core/failure.h).
Classification ClassifyFailure(const FailureInput& in);

// A failed outcome for `reason` with the class and budget of its table row
// (core/failure.h): what the worker reports for its own verdicts
// (worker_lost, worker_stopped, quality_gate).
store::AttemptOutcome FailedOutcome(FailureReason reason, std::string message);

}  // namespace kestrel::jobs
