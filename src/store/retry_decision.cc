#include "store/retry_decision.h"

#include <algorithm>
#include <limits>

namespace kestrel::store {

Status ValidateRetryPolicy(const RetryPolicy& p) {
  auto bad = [](const char* field, const std::string& msg) {
    return Status::InvalidArgument(msg, {"", 0, field});
  };
  if (p.max_retries < 0) return bad("max_retries", "max_retries must be >= 0");
  if (p.max_infra_retries < 0) return bad("max_infra_retries", "max_infra_retries must be >= 0");
  if (p.backoff_ms.empty()) return bad("backoff", "the backoff list must not be empty");
  for (int64_t b : p.backoff_ms) {
    if (b < 0) return bad("backoff", "backoff delays must be >= 0 ms");
  }
  return {};
}

int64_t BackoffMs(const RetryPolicy& p, int retries_used) {
  if (p.backoff_ms.empty()) return 0;
  const size_t k = std::min(static_cast<size_t>(std::max(retries_used, 0)), p.backoff_ms.size() - 1);
  return p.backoff_ms[k];
}

const char* RetryBudgetName(RetryBudget b) {
  switch (b) {
    case RetryBudget::kNone:
      return "none";
    case RetryBudget::kRetry:
      return "retry";
    case RetryBudget::kInfra:
      return "infra";
  }
  return "none";
}

bool IsCurrentAttempt(const JobRecord& job, int64_t attempt, const std::string& worker) {
  return job.state == JobState::kRunning && job.attempt == attempt && job.lease_owner == worker;
}

namespace {

NextJobState Unchanged(const JobRecord& job) {
  NextJobState n;
  n.state = job.state;
  n.not_before_ms = job.not_before_ms;
  n.retries_used = job.retries_used;
  n.infra_retries_used = job.infra_retries_used;
  n.finished_ms = job.finished_ms;
  n.last_reason = job.last_reason;
  n.result_json = job.result_json;
  return n;
}

// now + delay without signed overflow (a policy may hold huge delays).
int64_t SaturatingAdd(int64_t now, int64_t delay) {
  if (delay > 0 && now > std::numeric_limits<int64_t>::max() - delay)
    return std::numeric_limits<int64_t>::max();
  return now + delay;
}

}  // namespace

NextJobState DecideAfterAttempt(const JobRecord& job, const AttemptOutcome& o, const RetryPolicy& p,
                                int64_t now_ms) {
  NextJobState n = Unchanged(job);
  auto final_state = [&](JobState s) {
    n.state = s;
    n.finished_ms = now_ms;
  };
  if (o.success) {
    final_state(JobState::kSucceeded);
    n.result_json = o.result_json;
    n.last_reason.clear();
    return n;
  }
  const std::string token = FailureReasonToken(o.reason);
  n.last_reason = token;
  if (o.failure_class == FailureClass::kPermanent) {
    n.failure_class = FailureClass::kPermanent;
    final_state(JobState::kFailedPermanent);
    return n;
  }
  // Everything else is retryable: a class of kNone from an old or careless
  // caller must not make a failure final.
  n.failure_class = FailureClass::kRetryable;
  if (o.infrastructure) {
    // Not the job's fault: its own budget, retried at once (no backoff).
    n.charged = RetryBudget::kInfra;
    ++n.infra_retries_used;
    if (n.infra_retries_used > p.max_infra_retries) {
      final_state(JobState::kFailedPermanent);
      n.last_reason = "infra_retries_exhausted: " + token;
    } else {
      n.state = JobState::kFailedRetryable;
      n.not_before_ms = now_ms;
    }
    return n;
  }
  if (job.retries_used >= p.max_retries) {
    final_state(JobState::kFailedPermanent);
    n.last_reason = "retries_exhausted: " + token;
    return n;
  }
  n.charged = RetryBudget::kRetry;
  n.state = JobState::kFailedRetryable;
  n.not_before_ms = SaturatingAdd(now_ms, BackoffMs(p, job.retries_used));
  ++n.retries_used;
  return n;
}

Result<NextJobState> DecideCancel(const JobRecord& job, int64_t now_ms) {
  if (!IsLive(job.state)) {
    return Status::FailedPrecondition("job " + std::to_string(job.id) + " is already " +
                                      JobStateName(job.state));
  }
  NextJobState n = Unchanged(job);
  n.state = JobState::kCancelled;
  n.last_reason = FailureReasonToken(FailureReason::kCancelled);
  n.finished_ms = now_ms;
  return n;
}

void ApplyNextState(const NextJobState& next, JobRecord& job) {
  job.state = next.state;
  job.not_before_ms = next.not_before_ms;
  job.retries_used = next.retries_used;
  job.infra_retries_used = next.infra_retries_used;
  job.finished_ms = next.finished_ms;
  job.last_reason = next.last_reason;
  job.result_json = next.result_json;
}

}  // namespace kestrel::store
