#include "jobs/retry.h"

#include <algorithm>
#include <csignal>

namespace kestrel::jobs {

Status ValidateRetryPolicy(const RetryPolicy& p) {
  if (p.max_retries < 0) return Status::InvalidArgument("max_retries must be >= 0", {"", 0, "max_retries"});
  if (p.max_infra_retries < 0) {
    return Status::InvalidArgument("max_infra_retries must be >= 0", {"", 0, "max_infra_retries"});
  }
  if (p.backoff_ms.empty()) return Status::InvalidArgument("backoff list is empty", {"", 0, "backoff"});
  for (int64_t b : p.backoff_ms) {
    if (b < 0) return Status::InvalidArgument("backoff delays must be >= 0 ms", {"", 0, "backoff"});
  }
  return {};
}

int64_t BackoffMs(const RetryPolicy& p, int retries_used) {
  if (p.backoff_ms.empty()) return 0;
  size_t k = std::min(static_cast<size_t>(std::max(retries_used, 0)), p.backoff_ms.size() - 1);
  return p.backoff_ms[k];
}

namespace {

std::string ReasonFromExit(int exit_code, int signal) {
  if (signal == SIGKILL) return "killed";
  if (signal != 0) return "crashed";
  switch (exit_code) {
    case kExitBadConfig:
      return "bad_config";
    case kExitDatasetErrors:
      return "dataset_errors";
    case kExitDiverged:
      return "diverged";
    case kExitQualityGate:
      return "quality_gate";
    case kExitIoError:
      return "io_error";
    case kExitOom:
      return "oom";
    default:
      return "error";
  }
}

}  // namespace

Classification ClassifyFailure(const FailureInput& in) {
  Classification c;
  c.reason = in.reason.empty() ? ReasonFromExit(in.exit_code, in.signal) : in.reason;
  static const char* const kPermanent[] = {"bad_config", "dataset_errors", "diverged", "quality_gate"};
  static const char* const kInfra[] = {"lease_lost", "lease_expired", "worker_lost", "host_lost"};
  for (const char* p : kPermanent) {
    if (c.reason == p) c.failure_class = store::FailureClass::kPermanent;
  }
  for (const char* p : kInfra) {
    if (c.reason == p) c.infrastructure = true;
  }
  return c;
}

}  // namespace kestrel::jobs
