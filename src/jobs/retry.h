// Retry policy and failure classification: from how an attempt ended (exit
// code, signal, stage, reason token) to retryable / permanent, and whether it
// counts against the infrastructure budget instead of the retry budget.
//
// | reason token                           | class      | budget |
// |----------------------------------------|------------|--------|
// | killed, crashed (any signal), oom,     | retryable  | retry  |
// | io_error, hung, timeout, error         |            |        |
// | lease_lost, lease_expired, worker_lost,| retryable  | infra  |
// | host_lost                              |            |        |
// | bad_config, dataset_errors, diverged,  | permanent  | -      |
// | quality_gate                           |            |        |
// Unknown reasons are retryable (the retry cap stops a deterministic bug).
#pragma once

#include <string>

#include "core/status.h"
#include "store/job_types.h"

namespace kestrel::jobs {

// Stored with every job (see store/job_types.h): max_retries, backoff_ms
// (default 300/900/1800 s, the last entry repeats), max_infra_retries.
using store::RetryPolicy;

// kInvalidArgument naming the field when a value is out of range. Values are
// never silently adjusted.
Status ValidateRetryPolicy(const RetryPolicy& p);
// Delay before retry number `retries_used` (0-based).
int64_t BackoffMs(const RetryPolicy& p, int retries_used);

// Exit codes of `kestrel train --job` (the child a worker supervises).
inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;          // unclassified error: retryable
inline constexpr int kExitBadConfig = 2;      // permanent
inline constexpr int kExitDatasetErrors = 3;  // permanent
inline constexpr int kExitDiverged = 4;       // permanent (NaN after rollbacks)
inline constexpr int kExitQualityGate = 5;    // permanent
inline constexpr int kExitIoError = 6;        // retryable
inline constexpr int kExitOom = 7;            // retryable

struct FailureInput {
  int exit_code = 0;
  int signal = 0;  // terminating signal, 0 when the child exited
  store::FailureStage stage = store::FailureStage::kNone;
  std::string reason;  // token from the supervisor or the child; may be empty
};

struct Classification {
  store::FailureClass failure_class = store::FailureClass::kRetryable;
  bool infrastructure = false;
  std::string reason;  // the token used (derived from code/signal when empty)
};

Classification ClassifyFailure(const FailureInput& in);

}  // namespace kestrel::jobs
