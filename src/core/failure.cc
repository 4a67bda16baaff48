#include "core/failure.h"

#include <array>

namespace kestrel {
namespace {

using K = FailureKind;
using R = FailureReason;

// In enum order (checked below): DescribeFailure indexes it.
constexpr std::array<FailureInfo, 22> kTable = {{
    {R::kNone, "", 0, K::kNone, "not a failure"},
    {R::kError, "error", kTrainExitError, K::kRetryable, "unclassified error"},
    {R::kStoreUnavailable, "store_unavailable", kTrainExitError, K::kRetryable,
     "the attempt could not reach the metadata store or the artifact (S3) store"},
    {R::kStoreConflict, "store_conflict", kTrainExitError, K::kRetryable,
     "a store lock conflict (SQLite busy, PostgreSQL deadlock/serialization) outlived the store's retries"},
    {R::kLeaseLost, "lease_lost", kTrainExitError, K::kInfrastructure,
     "the attempt is no longer the job's current one (lease stolen, job cancelled)"},
    {R::kBadConfig, "bad_config", kTrainExitBadConfig, K::kPermanent,
     "the config does not bind or validate, a named file or dataset is missing"},
    {R::kDatasetErrors, "dataset_errors", kTrainExitDatasetErrors, K::kPermanent,
     "more unreadable images than max_bad_fraction, an empty split, a corrupted dataset blob"},
    {R::kDiverged, "diverged", kTrainExitDiverged, K::kPermanent,
     "non-finite loss/gradients after the NaN policy's rollbacks"},
    {R::kQualityGate, "quality_gate", kTrainExitQualityGate, K::kPermanent,
     "the worker refused the result (no loadable best weights, map50 below min_map50)"},
    {R::kIoError, "io_error", kTrainExitIoError, K::kRetryable, "a file read/write failed, disk full"},
    {R::kOom, "oom", kTrainExitOom, K::kRetryable, "out of memory (torch or the allocator)"},
    {R::kStopped, "stopped", kTrainExitStopped, K::kRetryable,
     "SIGTERM/SIGINT: the step finished and weights/last.ckpt was written; resumable"},
    {R::kEnvironment, "environment", kTrainExitEnvironment, K::kInfrastructure,
     "this host cannot run it: a library fails to load (exit 127), CUDA init fails, illegal instruction "
     "(SIGILL), the worker's doctor fails; the retry goes to another host, K of them quarantine the host"},
    {R::kKilled, "killed", -1, K::kRetryable, "the child died of SIGKILL"},
    {R::kCrashed, "crashed", -1, K::kRetryable, "the child died of another signal"},
    {R::kHung, "hung", -1, K::kRetryable, "supervisor: no progress line for hang_timeout"},
    {R::kTimeout, "timeout", -1, K::kRetryable, "supervisor: the job's wall-clock limit"},
    {R::kLeaseExpired, "lease_expired", -1, K::kInfrastructure,
     "store: the worker stopped renewing its lease (it died or lost the store)"},
    {R::kWorkerLost, "worker_lost", -1, K::kInfrastructure,
     "worker: the child could not be started or placed"},
    {R::kWorkerStopped, "worker_stopped", -1, K::kInfrastructure,
     "worker: the worker was stopped and stopped the child (checkpoint written); another worker resumes"},
    {R::kHostLost, "host_lost", -1, K::kInfrastructure,
     "the host went away (reserved, read from older stores)"},
    {R::kCancelled, "cancelled", -1, K::kNone, "the user cancelled the job"},
}};

constexpr bool InEnumOrder() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<size_t>(kTable[i].reason) != i) return false;
  }
  return true;
}
static_assert(InEnumOrder(), "kTable must list every FailureReason in enum order");
static_assert(static_cast<size_t>(R::kCancelled) + 1 == kTable.size(), "a FailureReason lacks its table row");

}  // namespace

std::span<const FailureInfo> FailureTable() { return kTable; }

const FailureInfo& DescribeFailure(FailureReason r) { return kTable[static_cast<size_t>(r)]; }

std::optional<FailureReason> ParseFailureReason(const std::string& token) {
  for (const auto& e : kTable) {
    if (token == e.token) return e.reason;
  }
  return std::nullopt;
}

int ExitCodeFor(FailureReason r) {
  const int code = DescribeFailure(r).exit_code;
  return code >= 0 ? code : kTrainExitError;
}

FailureReason ReasonForExitCode(int exit_code) {
  if (exit_code == kTrainExitOk) return R::kNone;
  if (exit_code == kTrainExitError) return R::kError;  // shared by several reasons
  for (const auto& e : kTable) {
    if (e.exit_code == exit_code) return e.reason;
  }
  return R::kError;
}

FailureKind FailureKindOfToken(const std::string& token) {
  auto r = ParseFailureReason(token);
  return r ? DescribeFailure(*r).kind : K::kRetryable;
}

}  // namespace kestrel
