// The job retry state machine as pure functions: what a job becomes when an
// attempt ends or the user cancels it. MetadataStore's SQL implementation
// (job_store.cc) calls them inside its transactions and only persists the
// answer; tests drive every transition without a database.
//
// It lives in store, not jobs, because the store must apply it atomically
// with the attempt row and jobs already depends on store (never the other
// way). Pure: no clock, no I/O; time comes in as `now_ms`.
//
// Transitions after an attempt (DecideAfterAttempt), by the outcome's class
// (core/failure.h table; outcome.failure_class/infrastructure as set by the
// classifier):
//
// | outcome                         | next state        | budget charged | not_before      | last_reason |
// |---------------------------------|-------------------|----------------|-----------------|--------------------------------|
// | success                         | succeeded         | none           | unchanged       | "" | | permanent
// (bad_config, gate...) | failed_permanent  | none           | unchanged       | reason | | infrastructure,
// infra budget left| failed_retryable | infra          | now (no backoff)| reason                         |
// | infrastructure, infra exhausted | failed_permanent  | infra          | unchanged       |
// "infra_retries_exhausted: " + r| | retryable, retries left         | failed_retryable  | retry          |
// now + backoff   | reason                         | | retryable, retries exhausted    | failed_permanent  |
// none           | unchanged       | "retries_exhausted: " + r      |
//
// Backoff for retry k (0-based) is backoff_ms[k], the last entry repeating;
// now + backoff saturates at INT64_MAX instead of overflowing.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "store/job_types.h"

namespace kestrel::store {

// kInvalidArgument naming the field (max_retries, max_infra_retries,
// backoff) when a value is out of range. Values are never silently adjusted.
Status ValidateRetryPolicy(const RetryPolicy& p);

// Delay before retry number `retries_used` (0-based; negative counts as 0):
// backoff_ms[retries_used], the last entry repeating; 0 for an empty list.
int64_t BackoffMs(const RetryPolicy& p, int retries_used);

enum class RetryBudget { kNone, kRetry, kInfra };
const char* RetryBudgetName(RetryBudget b);  // "none", "retry", "infra"

// What the store writes to the job row; every field is the new value.
struct NextJobState {
  JobState state = JobState::kQueued;
  int64_t not_before_ms = 0;
  int retries_used = 0;
  int infra_retries_used = 0;
  int64_t finished_ms = 0;  // set when the job reaches a final state, else unchanged
  std::string last_reason;
  std::string result_json;  // the success's result, else unchanged
  RetryBudget charged = RetryBudget::kNone;
  FailureClass failure_class = FailureClass::kNone;  // the class recorded on the attempt
};

// True when `attempt` run by `worker` is still the job's current attempt:
// the job is running that attempt under that worker's lease. Anything else
// (cancelled while running, lease stolen, already completed) is stale and its
// outcome must be discarded (fencing).
bool IsCurrentAttempt(const JobRecord& job, int64_t attempt, const std::string& worker);

// The job after its current attempt ended with `outcome` at now_ms, under
// `policy` (the job's own, job.spec.retry, in the store).
// REQUIRES: the attempt is current (IsCurrentAttempt).
NextJobState DecideAfterAttempt(const JobRecord& job, const AttemptOutcome& outcome,
                                const RetryPolicy& policy, int64_t now_ms);

// The job after a user cancel at now_ms: kFailedPrecondition unless the job
// is live (queued, running, failed_retryable); else cancelled, final.
Result<NextJobState> DecideCancel(const JobRecord& job, int64_t now_ms);

// Writes `next` into `job` (state, counters, times, reasons, result).
void ApplyNextState(const NextJobState& next, JobRecord& job);

}  // namespace kestrel::store
