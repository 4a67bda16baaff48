// Job checkpoints on a shared artifact store (docs/disk.md "Job checkpoints
// on S3"): the record is fenced like the attempt's pid, so a stale
// attempt's checkpoint never becomes the job's resume point. Both backends
// (PostgreSQL with KESTREL_TEST_PG), milliseconds.
#include "job_store_fixture.h"

namespace kestrel::store {
namespace {

class CheckpointStoreTest : public JobStoreTest {};

TEST_P(CheckpointStoreTest, StaleAttemptsCheckpointIsRefusedAndNewestAttemptComesFirst) {
  const int64_t id = Submit(Spec("{}")).id;
  ASSERT_TRUE(Claim("w1", 1000).IsOk());
  EXPECT_TRUE(store_->ListCheckpoints(id)->empty());
  ASSERT_TRUE(store_->RecordCheckpoint(id, 1, R"({"epoch":1})", Now()).IsOk());
  ASSERT_TRUE(store_->RecordCheckpoint(id, 1, R"({"epoch":2})", Now()).IsOk());  // the newest wins
  EXPECT_EQ(store_->RecordCheckpoint(id, 2, R"({"epoch":9})", Now()).Code(), StatusCode::kAborted)
      << "no such attempt yet";
  EXPECT_EQ(store_->RecordCheckpoint(id, 1, "", Now()).Code(), StatusCode::kInvalidArgument);
  // w1 goes silent; after its lease w2 re-claims the job (attempt 2). w1's
  // late record (epoch 3, written after it lost the job) is refused.
  clock_.AdvanceMicros(1'000'000);
  ASSERT_TRUE(Claim("w2", 1000).IsOk());
  Status stale = store_->RecordCheckpoint(id, 1, R"({"epoch":3})", Now());
  EXPECT_EQ(stale.Code(), StatusCode::kAborted) << stale.ToString();
  auto list = store_->ListCheckpoints(id);
  ASSERT_TRUE(list.IsOk()) << list.GetStatus().ToString();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].attempt, 1);
  EXPECT_EQ((*list)[0].json, R"({"epoch":2})") << "the resume point is the last one recorded while current";
  // The current attempt records; it is listed first.
  clock_.AdvanceMicros(5'000);
  ASSERT_TRUE(store_->RecordCheckpoint(id, 2, R"({"epoch":4})", Now()).IsOk());
  list = store_->ListCheckpoints(id);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].attempt, 2);
  EXPECT_EQ((*list)[0].recorded_ms, Now());
  EXPECT_EQ((*list)[1].attempt, 1);
  // Completed (or cancelled): nothing more is recorded.
  ASSERT_TRUE(store_->CompleteAttempt(id, 2, "w2", Ok(), Now()).IsOk());
  EXPECT_EQ(store_->RecordCheckpoint(id, 2, R"({"epoch":5})", Now()).Code(), StatusCode::kAborted);
  EXPECT_EQ(store_->ListCheckpoints(id)->at(0).json, R"({"epoch":4})");
}

INSTANTIATE_TEST_SUITE_P(Backends, CheckpointStoreTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kestrel::store
