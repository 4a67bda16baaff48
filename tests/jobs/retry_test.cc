#include "jobs/retry.h"

#include <gtest/gtest.h>

#include <csignal>

namespace kestrel::jobs {
namespace {

using store::FailureClass;
using store::FailureStage;

TEST(ClassifyTest, FollowsTheIssueTable) {
  struct Case {
    FailureInput in;
    FailureClass cls;
    bool infra;
    const char* reason;
  };
  const Case cases[] = {
      {{0, SIGKILL, FailureStage::kTrain, ""}, FailureClass::kRetryable, false, "killed"},
      {{0, SIGSEGV, FailureStage::kTrain, ""}, FailureClass::kRetryable, false, "crashed"},
      {{kTrainExitOom, 0, FailureStage::kTrain, ""}, FailureClass::kRetryable, false, "oom"},
      {{kTrainExitIoError, 0, FailureStage::kData, ""}, FailureClass::kRetryable, false, "io_error"},
      {{0, SIGTERM, FailureStage::kTrain, "hung"}, FailureClass::kRetryable, false, "hung"},
      {{0, SIGTERM, FailureStage::kTrain, "timeout"}, FailureClass::kRetryable, false, "timeout"},
      {{0, SIGTERM, FailureStage::kTrain, "lease_lost"}, FailureClass::kRetryable, true, "lease_lost"},
      {{0, 0, FailureStage::kNone, "worker_lost"}, FailureClass::kRetryable, true, "worker_lost"},
      {{kTrainExitBadConfig, 0, FailureStage::kBuild, ""}, FailureClass::kPermanent, false, "bad_config"},
      {{kTrainExitDatasetErrors, 0, FailureStage::kData, ""},
       FailureClass::kPermanent,
       false,
       "dataset_errors"},
      {{kTrainExitDiverged, 0, FailureStage::kTrain, ""}, FailureClass::kPermanent, false, "diverged"},
      {{kTrainExitQualityGate, 0, FailureStage::kEval, ""}, FailureClass::kPermanent, false, "quality_gate"},
      {{1, 0, FailureStage::kTrain, "diverged"}, FailureClass::kPermanent, false, "diverged"},
      {{1, 0, FailureStage::kTrain, ""}, FailureClass::kRetryable, false, "error"},
      // A token this version does not know (a newer child's): error, retryable.
      {{42, 0, FailureStage::kExport, "something_new"}, FailureClass::kRetryable, false, "error"},
      {{42, 0, FailureStage::kTrain, ""}, FailureClass::kRetryable, false, "error"},
      {{kTrainExitStopped, 0, FailureStage::kTrain, ""}, FailureClass::kRetryable, false, "stopped"},
      {{1, 0, FailureStage::kTrain, "worker_stopped"}, FailureClass::kRetryable, true, "worker_stopped"},
      {{1, 0, FailureStage::kTrain, "lease_expired"}, FailureClass::kRetryable, true, "lease_expired"},
      // The host's, not the job's (issue 31): the infrastructure budget, not the retries.
      {{kExitCannotStart, 0, FailureStage::kNone, ""}, FailureClass::kRetryable, true, "environment"},
      {{0, SIGILL, FailureStage::kTrain, ""}, FailureClass::kRetryable, true, "environment"},
      {{kTrainExitEnvironment, 0, FailureStage::kBuild, ""}, FailureClass::kRetryable, true, "environment"},
      {{1, 0, FailureStage::kTrain, "environment"}, FailureClass::kRetryable, true, "environment"},
  };
  for (const auto& c : cases) {
    Classification got = ClassifyFailure(c.in);
    EXPECT_EQ(got.failure_class, c.cls) << c.reason;
    EXPECT_EQ(got.infrastructure, c.infra) << c.reason;
    EXPECT_STREQ(FailureReasonToken(got.reason), c.reason);
  }
}

}  // namespace
}  // namespace kestrel::jobs

namespace kestrel::jobs {
namespace {

TEST(FailedOutcomeTest, TakesClassAndBudgetFromTheTable) {
  store::AttemptOutcome g = FailedOutcome(FailureReason::kQualityGate, "quality gate: no map50");
  EXPECT_FALSE(g.success);
  EXPECT_EQ(g.failure_class, store::FailureClass::kPermanent);
  EXPECT_FALSE(g.infrastructure);
  EXPECT_EQ(g.reason, FailureReason::kQualityGate);
  store::AttemptOutcome w = FailedOutcome(FailureReason::kWorkerStopped, "worker w1 stopped");
  EXPECT_EQ(w.failure_class, store::FailureClass::kRetryable);
  EXPECT_TRUE(w.infrastructure);
  EXPECT_EQ(w.reason, FailureReason::kWorkerStopped);
  EXPECT_EQ(w.message, "worker w1 stopped");
}

}  // namespace
}  // namespace kestrel::jobs
