#include "jobs/retry.h"

#include <gtest/gtest.h>

#include <csignal>

namespace kestrel::jobs {
namespace {

using store::FailureClass;
using store::FailureStage;

TEST(RetryPolicyTest, BackoffUsesTheListAndRepeatsTheLast) {
  RetryPolicy p;
  EXPECT_EQ(p.max_retries, 3);
  EXPECT_EQ(BackoffMs(p, 0), 300'000);
  EXPECT_EQ(BackoffMs(p, 1), 900'000);
  EXPECT_EQ(BackoffMs(p, 2), 1'800'000);
  EXPECT_EQ(BackoffMs(p, 7), 1'800'000);
  EXPECT_TRUE(ValidateRetryPolicy(p).IsOk());
  p.backoff_ms = {};
  EXPECT_EQ(ValidateRetryPolicy(p).Where().field, "backoff");
  p.backoff_ms = {5, -1};
  EXPECT_FALSE(ValidateRetryPolicy(p).IsOk());
  p.backoff_ms = {5};
  p.max_retries = -1;
  EXPECT_EQ(ValidateRetryPolicy(p).Where().field, "max_retries");
}

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
      {{kExitOom, 0, FailureStage::kTrain, ""}, FailureClass::kRetryable, false, "oom"},
      {{kExitIoError, 0, FailureStage::kData, ""}, FailureClass::kRetryable, false, "io_error"},
      {{0, SIGTERM, FailureStage::kTrain, "hung"}, FailureClass::kRetryable, false, "hung"},
      {{0, SIGTERM, FailureStage::kTrain, "timeout"}, FailureClass::kRetryable, false, "timeout"},
      {{0, SIGTERM, FailureStage::kTrain, "lease_lost"}, FailureClass::kRetryable, true, "lease_lost"},
      {{0, 0, FailureStage::kNone, "worker_lost"}, FailureClass::kRetryable, true, "worker_lost"},
      {{kExitBadConfig, 0, FailureStage::kBuild, ""}, FailureClass::kPermanent, false, "bad_config"},
      {{kExitDatasetErrors, 0, FailureStage::kData, ""}, FailureClass::kPermanent, false, "dataset_errors"},
      {{kExitDiverged, 0, FailureStage::kTrain, ""}, FailureClass::kPermanent, false, "diverged"},
      {{kExitQualityGate, 0, FailureStage::kEval, ""}, FailureClass::kPermanent, false, "quality_gate"},
      {{1, 0, FailureStage::kTrain, "diverged"}, FailureClass::kPermanent, false, "diverged"},
      {{1, 0, FailureStage::kTrain, ""}, FailureClass::kRetryable, false, "error"},
      {{42, 0, FailureStage::kExport, "something_new"}, FailureClass::kRetryable, false, "something_new"},
  };
  for (const auto& c : cases) {
    Classification got = ClassifyFailure(c.in);
    EXPECT_EQ(got.failure_class, c.cls) << c.reason;
    EXPECT_EQ(got.infrastructure, c.infra) << c.reason;
    EXPECT_EQ(got.reason, c.reason);
  }
}

}  // namespace
}  // namespace kestrel::jobs
