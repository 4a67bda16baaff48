#include "jobs/retry.h"

#include <csignal>
#include <utility>

namespace kestrel::jobs {
namespace {

FailureReason ReasonFromExit(int exit_code, int signal) {
  if (signal == SIGKILL) return FailureReason::kKilled;
  // An instruction this CPU lacks (a build for AVX-512 on an AVX2 host) is
  // the host's, not the job's: another host may run it.
  if (signal == SIGILL) return FailureReason::kEnvironment;
  if (signal != 0) return FailureReason::kCrashed;
  // The dynamic loader's exit when a library is missing or does not load
  // ("error while loading shared libraries"), and the runner's when exec
  // fails: the program cannot start on this host.
  if (exit_code == kExitCannotStart) return FailureReason::kEnvironment;
  // Exit 0 without success means a verdict came with a reason; without one
  // it is unexplained.
  const FailureReason r = ReasonForExitCode(exit_code);
  return r == FailureReason::kNone ? FailureReason::kError : r;
}

void SetClass(FailureKind kind, store::FailureClass* cls, bool* infra) {
  *cls = kind == FailureKind::kPermanent ? store::FailureClass::kPermanent : store::FailureClass::kRetryable;
  *infra = kind == FailureKind::kInfrastructure;
}

}  // namespace

Classification ClassifyFailure(const FailureInput& in) {
  Classification c;
  c.reason = in.reason.empty() ? ReasonFromExit(in.exit_code, in.signal)
                               : ParseFailureReason(in.reason).value_or(FailureReason::kError);
  SetClass(DescribeFailure(c.reason).kind, &c.failure_class, &c.infrastructure);
  return c;
}

store::AttemptOutcome FailedOutcome(FailureReason reason, std::string message) {
  store::AttemptOutcome o;
  o.success = false;
  SetClass(DescribeFailure(reason).kind, &o.failure_class, &o.infrastructure);
  o.reason = reason;
  o.message = std::move(message);
  return o;
}

}  // namespace kestrel::jobs
