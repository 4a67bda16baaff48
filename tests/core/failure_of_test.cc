// FailureReasonOf: the one status -> failure-reason mapping the job runner
// and the CLI's job children share. Every status code once, then the
// explicit subcode winning over the code.
#include "core/failure_of.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace kestrel {
namespace {

TEST(FailureReasonOfTest, EveryStatusCodeMapsToItsReason) {
  const std::vector<std::pair<Status, FailureReason>> cases = {
      {Status(), FailureReason::kError},
      {Status::InvalidArgument("bad key"), FailureReason::kBadConfig},
      {Status::NotFound("no dataset"), FailureReason::kBadConfig},
      {Status::AlreadyExists("exists"), FailureReason::kError},
      {Status::IoError("read failed"), FailureReason::kIoError},
      {Status::Corruption("blob checksum"), FailureReason::kDatasetErrors},
      {Status::FailedPrecondition("state"), FailureReason::kError},
      {Status::ResourceExhausted("disk full"), FailureReason::kIoError},
      {Status::Aborted("lost a race"), FailureReason::kError},
      {Status::Unavailable("no store"), FailureReason::kStoreUnavailable},
      {Status::Internal("bug"), FailureReason::kError},
  };
  ASSERT_EQ(cases.size(), static_cast<size_t>(StatusCode::kInternal) + 1) << "a StatusCode has no case here";
  for (const auto& [status, want] : cases) {
    EXPECT_EQ(FailureReasonOf(status), want) << StatusCodeName(status.Code());
  }
}

TEST(FailureReasonOfTest, ExplicitReasonWinsOverTheCode) {
  // Each of these codes alone would say something else.
  EXPECT_EQ(FailureReasonOf(Status::Internal("alloc").WithReason(FailureReason::kOom)), FailureReason::kOom);
  EXPECT_EQ(FailureReasonOf(Status::InvalidArgument("x").WithReason(FailureReason::kDatasetErrors)),
            FailureReason::kDatasetErrors);
  EXPECT_EQ(FailureReasonOf(Status::IoError("x").WithReason(FailureReason::kStoreUnavailable)),
            FailureReason::kStoreUnavailable);
  EXPECT_EQ(FailureReasonOf(Status::Aborted("busy").WithReason(FailureReason::kStoreConflict)),
            FailureReason::kStoreConflict);
  // Context and location keep the subcode, so a wrapped error classifies the same.
  EXPECT_EQ(
      FailureReasonOf(Status::Corruption("x").WithReason(FailureReason::kDiverged).WithContext("epoch 3")),
      FailureReason::kDiverged);
}

TEST(FailureReasonOfTest, NeverReadsTheMessage) {
  EXPECT_EQ(FailureReasonOf(Status::Internal("out of memory: oom bad_config")), FailureReason::kError);
}

}  // namespace
}  // namespace kestrel
