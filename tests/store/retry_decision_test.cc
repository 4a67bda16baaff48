// Every transition of the job retry state machine (store/retry_decision.h),
// as pure function calls: no database, no clock. The SQL store applies the
// same functions inside its transactions (job_store_test.cc checks that end
// to end on SQLite and PostgreSQL).
#include "store/retry_decision.h"

#include <gtest/gtest.h>

#include <limits>

namespace kestrel::store {
namespace {

constexpr int64_t kNow = 1'000'000;

JobRecord Running(int retries_used = 0, int infra_used = 0) {
  JobRecord j;
  j.id = 7;
  j.state = JobState::kRunning;
  j.attempt = retries_used + infra_used + 1;
  j.lease_owner = "w1";
  j.lease_until_ms = kNow + 90'000;
  j.not_before_ms = 5;
  j.retries_used = retries_used;
  j.infra_retries_used = infra_used;
  j.created_ms = 1;
  return j;
}

AttemptOutcome Failed(FailureReason r) {
  AttemptOutcome o;
  const FailureKind k = DescribeFailure(r).kind;
  o.failure_class = k == FailureKind::kPermanent ? FailureClass::kPermanent : FailureClass::kRetryable;
  o.infrastructure = k == FailureKind::kInfrastructure;
  o.reason = r;
  return o;
}

RetryPolicy Policy(int max_retries, std::vector<int64_t> backoff, int max_infra) {
  RetryPolicy p;
  p.max_retries = max_retries;
  p.backoff_ms = std::move(backoff);
  p.max_infra_retries = max_infra;
  return p;
}

TEST(RetryDecisionTest, SuccessIsFinalAndClearsTheReason) {
  JobRecord j = Running(1);
  j.last_reason = "oom";
  AttemptOutcome o;
  o.success = true;
  o.failure_class = FailureClass::kNone;
  o.result_json = R"({"map50":0.5})";
  NextJobState n = DecideAfterAttempt(j, o, RetryPolicy{}, kNow);
  EXPECT_EQ(n.state, JobState::kSucceeded);
  EXPECT_EQ(n.finished_ms, kNow);
  EXPECT_EQ(n.result_json, o.result_json);
  EXPECT_EQ(n.last_reason, "");
  EXPECT_EQ(n.charged, RetryBudget::kNone);
  EXPECT_EQ(n.retries_used, 1);
  EXPECT_EQ(n.not_before_ms, 5);
}

TEST(RetryDecisionTest, RetryableWithBudgetLeftWaitsForItsBackoff) {
  const RetryPolicy p = Policy(3, {100, 200, 400}, 10);
  NextJobState n = DecideAfterAttempt(Running(0), Failed(FailureReason::kOom), p, kNow);
  EXPECT_EQ(n.state, JobState::kFailedRetryable);
  EXPECT_EQ(n.not_before_ms, kNow + 100);
  EXPECT_EQ(n.retries_used, 1);
  EXPECT_EQ(n.infra_retries_used, 0);
  EXPECT_EQ(n.charged, RetryBudget::kRetry);
  EXPECT_EQ(n.failure_class, FailureClass::kRetryable);
  EXPECT_EQ(n.last_reason, "oom");
  EXPECT_EQ(n.finished_ms, 0);
  n = DecideAfterAttempt(Running(2), Failed(FailureReason::kIoError), p, kNow);
  EXPECT_EQ(n.not_before_ms, kNow + 400);
  EXPECT_EQ(n.retries_used, 3);
}

TEST(RetryDecisionTest, RetryableWithTheBudgetSpentIsPermanent) {
  const RetryPolicy p = Policy(2, {100}, 10);
  NextJobState n = DecideAfterAttempt(Running(2), Failed(FailureReason::kHung), p, kNow);
  EXPECT_EQ(n.state, JobState::kFailedPermanent);
  EXPECT_EQ(n.last_reason, "retries_exhausted: hung");
  EXPECT_EQ(n.retries_used, 2);  // not charged past the cap
  EXPECT_EQ(n.charged, RetryBudget::kNone);
  EXPECT_EQ(n.finished_ms, kNow);
  EXPECT_EQ(n.not_before_ms, 5);
  // max_retries = 0: the first retryable failure is final.
  n = DecideAfterAttempt(Running(0), Failed(FailureReason::kCrashed), Policy(0, {100}, 10), kNow);
  EXPECT_EQ(n.state, JobState::kFailedPermanent);
  EXPECT_EQ(n.last_reason, "retries_exhausted: crashed");
}

TEST(RetryDecisionTest, InfrastructureUsesItsOwnBudgetWithoutBackoff) {
  const RetryPolicy p = Policy(1, {100}, 2);
  // The retry budget is spent, the infra one is not: still retried, at once.
  for (FailureReason r : {FailureReason::kWorkerLost, FailureReason::kLeaseExpired, FailureReason::kLeaseLost,
                          FailureReason::kHostLost}) {
    NextJobState n = DecideAfterAttempt(Running(1, 1), Failed(r), p, kNow);
    EXPECT_EQ(n.state, JobState::kFailedRetryable) << FailureReasonToken(r);
    EXPECT_EQ(n.not_before_ms, kNow);
    EXPECT_EQ(n.retries_used, 1);
    EXPECT_EQ(n.infra_retries_used, 2);
    EXPECT_EQ(n.charged, RetryBudget::kInfra);
    EXPECT_EQ(n.last_reason, FailureReasonToken(r));
  }
}

TEST(RetryDecisionTest, InfrastructureBudgetSpentIsPermanent) {
  NextJobState n =
      DecideAfterAttempt(Running(0, 2), Failed(FailureReason::kLeaseExpired), Policy(3, {100}, 2), kNow);
  EXPECT_EQ(n.state, JobState::kFailedPermanent);
  EXPECT_EQ(n.infra_retries_used, 3);
  EXPECT_EQ(n.charged, RetryBudget::kInfra);
  EXPECT_EQ(n.last_reason, "infra_retries_exhausted: lease_expired");
  EXPECT_EQ(n.finished_ms, kNow);
  EXPECT_EQ(n.retries_used, 0);
}

TEST(RetryDecisionTest, PermanentFailuresAreFinalAndChargeNothing) {
  for (FailureReason r : {FailureReason::kBadConfig, FailureReason::kDatasetErrors, FailureReason::kDiverged,
                          FailureReason::kQualityGate}) {
    NextJobState n = DecideAfterAttempt(Running(0), Failed(r), RetryPolicy{}, kNow);
    EXPECT_EQ(n.state, JobState::kFailedPermanent) << FailureReasonToken(r);
    EXPECT_EQ(n.failure_class, FailureClass::kPermanent);
    EXPECT_EQ(n.charged, RetryBudget::kNone);
    EXPECT_EQ(n.last_reason, FailureReasonToken(r));
    EXPECT_EQ(n.retries_used, 0);
    EXPECT_EQ(n.finished_ms, kNow);
  }
}

TEST(RetryDecisionTest, QualityGateIsPermanentEvenWithRetriesLeft) {
  NextJobState n =
      DecideAfterAttempt(Running(0), Failed(FailureReason::kQualityGate), Policy(5, {1}, 5), kNow);
  EXPECT_EQ(n.state, JobState::kFailedPermanent);
  EXPECT_EQ(n.last_reason, "quality_gate");
}

TEST(RetryDecisionTest, WorkerStoppedResumesAtOnceOnTheInfraBudget) {
  // The worker stopped the child (checkpoint written): another worker picks
  // the job up immediately; the job's own retries are untouched.
  NextJobState n =
      DecideAfterAttempt(Running(3), Failed(FailureReason::kWorkerStopped), Policy(3, {100}, 10), kNow);
  EXPECT_EQ(n.state, JobState::kFailedRetryable);
  EXPECT_EQ(n.not_before_ms, kNow);
  EXPECT_EQ(n.charged, RetryBudget::kInfra);
  EXPECT_EQ(n.retries_used, 3);
  EXPECT_EQ(n.infra_retries_used, 1);
  // A child stopped by someone else (SIGTERM, exit 8 `stopped`) is an
  // ordinary retryable failure: backoff, retry budget.
  n = DecideAfterAttempt(Running(0), Failed(FailureReason::kStopped), Policy(3, {100}, 10), kNow);
  EXPECT_EQ(n.state, JobState::kFailedRetryable);
  EXPECT_EQ(n.not_before_ms, kNow + 100);
  EXPECT_EQ(n.charged, RetryBudget::kRetry);
}

TEST(RetryDecisionTest, UnclassifiedFailuresAreRetryable) {
  AttemptOutcome o;
  o.failure_class = FailureClass::kNone;  // a careless caller: still not final
  o.reason = FailureReason::kError;
  NextJobState n = DecideAfterAttempt(Running(0), o, Policy(1, {100}, 1), kNow);
  EXPECT_EQ(n.state, JobState::kFailedRetryable);
  EXPECT_EQ(n.failure_class, FailureClass::kRetryable);
  EXPECT_EQ(n.last_reason, "error");
}

TEST(RetryDecisionTest, BackoffListsLastEntryRepeats) {
  const RetryPolicy p = Policy(10, {100, 200}, 10);
  EXPECT_EQ(BackoffMs(p, 0), 100);
  EXPECT_EQ(BackoffMs(p, 1), 200);
  EXPECT_EQ(BackoffMs(p, 2), 200);
  EXPECT_EQ(BackoffMs(p, 9), 200);
  EXPECT_EQ(BackoffMs(p, -3), 100);
  EXPECT_EQ(BackoffMs(Policy(1, {}, 1), 0), 0);
  EXPECT_EQ(BackoffMs(RetryPolicy{}, 7), 1'800'000);
  NextJobState n = DecideAfterAttempt(Running(6), Failed(FailureReason::kOom), p, kNow);
  EXPECT_EQ(n.not_before_ms, kNow + 200);
}

TEST(RetryDecisionTest, HugeBackoffSaturatesInsteadOfOverflowing) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  NextJobState n = DecideAfterAttempt(Running(0), Failed(FailureReason::kOom), Policy(3, {max}, 1), kNow);
  EXPECT_EQ(n.state, JobState::kFailedRetryable);
  EXPECT_EQ(n.not_before_ms, max);
  n = DecideAfterAttempt(Running(0), Failed(FailureReason::kOom), Policy(3, {max - kNow + 1}, 1), kNow);
  EXPECT_EQ(n.not_before_ms, max);
  n = DecideAfterAttempt(Running(0), Failed(FailureReason::kOom), Policy(3, {max - kNow}, 1), kNow);
  EXPECT_EQ(n.not_before_ms, max);
  n = DecideAfterAttempt(Running(0), Failed(FailureReason::kOom), Policy(3, {0}, 1), kNow);
  EXPECT_EQ(n.not_before_ms, kNow);
}

TEST(RetryDecisionTest, OnlyTheCurrentAttemptMayComplete) {
  JobRecord j = Running(0);
  EXPECT_TRUE(IsCurrentAttempt(j, j.attempt, "w1"));
  EXPECT_FALSE(IsCurrentAttempt(j, j.attempt, "w2"));      // lease stolen
  EXPECT_FALSE(IsCurrentAttempt(j, j.attempt + 1, "w1"));  // a later attempt exists
  JobRecord cancelled = j;
  ASSERT_TRUE(DecideCancel(j, kNow).IsOk());
  ApplyNextState(*DecideCancel(j, kNow), cancelled);
  // Cancelled while running: the child's late outcome is stale.
  EXPECT_FALSE(IsCurrentAttempt(cancelled, j.attempt, "w1"));
}

TEST(RetryDecisionTest, CancelEndsEveryLiveStateAndNothingElse) {
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kFailedRetryable}) {
    JobRecord j = Running(1);
    j.state = s;
    auto n = DecideCancel(j, kNow);
    ASSERT_TRUE(n.IsOk()) << JobStateName(s);
    EXPECT_EQ(n->state, JobState::kCancelled);
    EXPECT_EQ(n->last_reason, "cancelled");
    EXPECT_EQ(n->finished_ms, kNow);
    EXPECT_EQ(n->retries_used, 1);
    EXPECT_EQ(n->charged, RetryBudget::kNone);
  }
  for (JobState s : {JobState::kSucceeded, JobState::kFailedPermanent, JobState::kCancelled}) {
    JobRecord j = Running(0);
    j.state = s;
    auto n = DecideCancel(j, kNow);
    ASSERT_FALSE(n.IsOk()) << JobStateName(s);
    EXPECT_EQ(n.GetStatus().Code(), StatusCode::kFailedPrecondition);
  }
}

TEST(RetryDecisionTest, ApplyWritesEveryDecidedField) {
  JobRecord j = Running(0);
  NextJobState n = DecideAfterAttempt(j, Failed(FailureReason::kOom), Policy(3, {100}, 1), kNow);
  ApplyNextState(n, j);
  EXPECT_EQ(j.state, JobState::kFailedRetryable);
  EXPECT_EQ(j.not_before_ms, kNow + 100);
  EXPECT_EQ(j.retries_used, 1);
  EXPECT_EQ(j.last_reason, "oom");
  EXPECT_EQ(j.lease_owner, "w1");  // the lease is the store's to clear
}

TEST(RetryPolicyTest, ValidationNamesTheField) {
  RetryPolicy p;
  EXPECT_TRUE(ValidateRetryPolicy(p).IsOk());
  p.backoff_ms = {};
  EXPECT_EQ(ValidateRetryPolicy(p).Where().field, "backoff");
  p.backoff_ms = {5, -1};
  EXPECT_EQ(ValidateRetryPolicy(p).Where().field, "backoff");
  p.backoff_ms = {5};
  p.max_retries = -1;
  EXPECT_EQ(ValidateRetryPolicy(p).Where().field, "max_retries");
  p.max_retries = 0;
  p.max_infra_retries = -1;
  EXPECT_EQ(ValidateRetryPolicy(p).Where().field, "max_infra_retries");
  EXPECT_EQ(ValidateRetryPolicy(p).Code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kestrel::store
