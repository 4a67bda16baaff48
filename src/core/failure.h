// Why something failed, as a type: the failure reasons of jobs and their one
// table of `kestrel train` exit codes, retry classes and budgets.
//
// A FailureReason rides on a Status as its subcode (Status::WithReason), set
// where the error starts: the loader's unreadable-images limit says
// kDatasetErrors, a torch allocation failure kOom, a store lock conflict
// kStoreConflict. Nothing downstream parses message text to find it out.
//
// Each reason has one stable lowercase token, the string stored in the
// `attempts.reason` and `jobs.last_reason` columns and sent in webhooks;
// tokens never change meaning, so old databases read the same.
//
// The table (FailureTable(), docs/jobs.md "Failure reasons and exit codes"):
//
// | exit | reason            | kind           | when                                        |
// |------|-------------------|----------------|---------------------------------------------|
// | 0    | -                 | -              | completed / early-stopped (then the gate)   |
// | 1    | error             | retryable      | unclassified error (unknown tokens too)     |
// | 1    | store_unavailable | retryable      | the child cannot reach the store            |
// | 1    | store_conflict    | retryable      | a store lock conflict outlived its retries  |
// | 1    | lease_lost        | infrastructure | the attempt is no longer the current one    |
// | 2    | bad_config        | permanent      | options/config do not bind or validate      |
// | 3    | dataset_errors    | permanent      | too many unreadable images, corrupt dataset |
// | 4    | diverged          | permanent      | non-finite loss after the NaN rollbacks     |
// | 5    | quality_gate      | permanent      | (the worker's verdict on a result)          |
// | 6    | io_error          | retryable      | file I/O failed, disk full                  |
// | 7    | oom               | retryable      | out of memory (torch, allocator)            |
// | 8    | stopped           | retryable      | SIGTERM/SIGINT: checkpoint written          |
// | 9    | environment       | infrastructure | this host cannot run it (no CUDA, a library |
// |      |                   |                | fails to load: exit 127, SIGILL); elsewhere |
// | -    | killed, crashed   | retryable      | SIGKILL / another signal                    |
// | -    | hung, timeout     | retryable      | supervisor: no progress / wall-clock limit  |
// | -    | lease_expired, worker_lost, worker_stopped, host_lost | infrastructure | store / worker |
// | -    | cancelled         | none           | the user cancelled the job (not a failure)  |
//
// Torch-free and dependency-free on purpose: the trainer, the CLI, the
// supervisor and the store all read this one table.
#pragma once

#include <optional>
#include <span>
#include <string>

namespace kestrel {

enum class FailureReason {
  kNone,  // not a failure, or not classified where it started
  kError,
  kStoreUnavailable,
  kStoreConflict,
  kLeaseLost,
  kBadConfig,
  kDatasetErrors,
  kDiverged,
  kQualityGate,
  kIoError,
  kOom,
  kStopped,
  kEnvironment,
  kKilled,
  kCrashed,
  kHung,
  kTimeout,
  kLeaseExpired,
  kWorkerLost,
  kWorkerStopped,
  kHostLost,
  kCancelled,
};

// How a failed attempt is retried.
enum class FailureKind {
  kNone,            // not a failure (kNone, kCancelled)
  kRetryable,       // retried with backoff, charged to the retry budget
  kInfrastructure,  // retried at once, charged to the infrastructure budget
  kPermanent,       // never retried automatically
};

// Exit codes of `kestrel train` (plain and `--job`), beside the CLI's own
// 0 = ok and 2 = usage (which is what bad_config is).
inline constexpr int kTrainExitOk = 0;
inline constexpr int kTrainExitError = 1;
inline constexpr int kTrainExitBadConfig = 2;
inline constexpr int kTrainExitDatasetErrors = 3;
inline constexpr int kTrainExitDiverged = 4;
inline constexpr int kTrainExitQualityGate = 5;
inline constexpr int kTrainExitIoError = 6;
inline constexpr int kTrainExitOom = 7;
inline constexpr int kTrainExitStopped = 8;
inline constexpr int kTrainExitEnvironment = 9;

struct FailureInfo {
  FailureReason reason;
  const char* token;  // stored / shown: "oom", "bad_config"...; "" for kNone
  int exit_code;      // the child's exit code; -1 when it never exits with it
  FailureKind kind;
  const char* when;  // one line for docs and --help
};

// Every reason once, in enum order.
std::span<const FailureInfo> FailureTable();
const FailureInfo& DescribeFailure(FailureReason r);
inline const char* FailureReasonToken(FailureReason r) { return DescribeFailure(r).token; }
// nullopt for a token this version does not know (a newer writer's).
std::optional<FailureReason> ParseFailureReason(const std::string& token);
// The exit code `kestrel train` uses for `r`: its own, else 1.
int ExitCodeFor(FailureReason r);
// The reason an exit code stands for when the child said nothing: 0 -> kNone,
// unknown codes -> kError.
FailureReason ReasonForExitCode(int exit_code);
// The kind of a token; unknown tokens are retryable (the retry cap stops a
// deterministic bug).
FailureKind FailureKindOfToken(const std::string& token);

}  // namespace kestrel
