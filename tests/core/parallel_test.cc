#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace kestrel {
namespace {

TEST(ParallelForTest, VisitsEveryIndexOnce) {
  for (int threads : {0, 1, 3, 64}) {
    std::vector<std::atomic<int>> hits(1000);
    Status s = ParallelFor(hits.size(), threads, [&](size_t i) -> Status {
      ++hits[i];
      return {};
    });
    ASSERT_TRUE(s.IsOk());
    for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
  EXPECT_TRUE(ParallelFor(0, 4, [](size_t) -> Status { return Status::Internal("never called"); }).IsOk());
}

TEST(ParallelForTest, ReturnsAnErrorAndStopsStartingWork) {
  std::atomic<int> calls{0};
  Status s = ParallelFor(100000, 2, [&](size_t i) -> Status {
    ++calls;
    if (i == 10) return Status::IoError("disk gone", {"x.jpg"});
    return {};
  });
  EXPECT_EQ(s.Code(), StatusCode::kIoError);
  EXPECT_EQ(s.Where().file, "x.jpg");
  EXPECT_LT(calls.load(), 100000);
}

}  // namespace
}  // namespace kestrel
