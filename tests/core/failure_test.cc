// The failure-reason table (core/failure.h): tokens stay stable for stored
// rows, exit codes are unique per reason that owns one, and a Status keeps
// its reason subcode through context and location.
#include "core/failure.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/status.h"

namespace kestrel {
namespace {

TEST(FailureTableTest, TokensAreTheStoredOnesAndRoundTrip) {
  // Written to existing databases by earlier versions: must keep parsing.
  for (const char* t :
       {"error",         "bad_config",  "dataset_errors", "diverged",  "quality_gate", "io_error",
        "oom",           "killed",      "crashed",        "hung",      "timeout",      "lease_lost",
        "lease_expired", "worker_lost", "worker_stopped", "host_lost", "stopped",      "store_unavailable",
        "cancelled",     "environment", "store_conflict"}) {
    auto r = ParseFailureReason(t);
    ASSERT_TRUE(r.has_value()) << t;
    EXPECT_STREQ(FailureReasonToken(*r), t);
  }
  EXPECT_FALSE(ParseFailureReason("something_new").has_value());
  std::set<std::string> seen;
  for (const auto& e : FailureTable()) EXPECT_TRUE(seen.insert(e.token).second) << e.token;
}

TEST(FailureTableTest, OneExitCodePerReasonExceptTheSharedOne) {
  std::map<int, int> owners;
  for (const auto& e : FailureTable()) {
    if (e.reason == FailureReason::kNone) continue;
    if (e.exit_code > 1) ++owners[e.exit_code];
    // Exit 1 is shared; it reads back as kError.
    const bool owns = e.exit_code > 1 || e.reason == FailureReason::kError;
    EXPECT_EQ(ReasonForExitCode(ExitCodeFor(e.reason)) == e.reason, owns) << e.token;
  }
  for (const auto& [code, n] : owners) EXPECT_EQ(n, 1) << "exit code " << code;
  EXPECT_EQ(ReasonForExitCode(0), FailureReason::kNone);
  EXPECT_EQ(ReasonForExitCode(1), FailureReason::kError);
  EXPECT_EQ(ReasonForExitCode(42), FailureReason::kError);
  EXPECT_EQ(ExitCodeFor(FailureReason::kHung), 1);
}

TEST(FailureTableTest, KindsMatchTheRetryRules) {
  EXPECT_EQ(DescribeFailure(FailureReason::kBadConfig).kind, FailureKind::kPermanent);
  EXPECT_EQ(DescribeFailure(FailureReason::kDatasetErrors).kind, FailureKind::kPermanent);
  EXPECT_EQ(DescribeFailure(FailureReason::kDiverged).kind, FailureKind::kPermanent);
  EXPECT_EQ(DescribeFailure(FailureReason::kQualityGate).kind, FailureKind::kPermanent);
  EXPECT_EQ(DescribeFailure(FailureReason::kOom).kind, FailureKind::kRetryable);
  EXPECT_EQ(DescribeFailure(FailureReason::kWorkerStopped).kind, FailureKind::kInfrastructure);
  EXPECT_EQ(DescribeFailure(FailureReason::kLeaseExpired).kind, FailureKind::kInfrastructure);
  EXPECT_EQ(DescribeFailure(FailureReason::kCancelled).kind, FailureKind::kNone);
  EXPECT_EQ(FailureKindOfToken("something_new"), FailureKind::kRetryable);
  EXPECT_EQ(FailureKindOfToken("lease_lost"), FailureKind::kInfrastructure);
}

TEST(StatusReasonTest, SurvivesContextAndLocation) {
  Status s =
      Status::FailedPrecondition("3 of 4 images are unreadable").WithReason(FailureReason::kDatasetErrors);
  EXPECT_EQ(s.Reason(), FailureReason::kDatasetErrors);
  EXPECT_EQ(s.WithContext("train").Reason(), FailureReason::kDatasetErrors);
  EXPECT_EQ(s.WithLocation({"data.yaml", 0, ""}).Reason(), FailureReason::kDatasetErrors);
  EXPECT_EQ(Status::IoError("x").Reason(), FailureReason::kNone);
  EXPECT_TRUE(Status().WithReason(FailureReason::kOom).IsOk());
  EXPECT_EQ(Status().WithReason(FailureReason::kOom).Reason(), FailureReason::kNone);
  Result<int> r = Status::Aborted("busy").WithReason(FailureReason::kStoreConflict);
  EXPECT_EQ(r.GetStatus().Reason(), FailureReason::kStoreConflict);
}

}  // namespace
}  // namespace kestrel
