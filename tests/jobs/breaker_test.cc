#include "jobs/breaker.h"

#include <gtest/gtest.h>

namespace kestrel::jobs {
namespace {

// n attempts, newest first, ending at 1000, 999, ...; the first `failed`
// (newest) are retryable failures with `reason`.
std::vector<store::AttemptRecord> History(int n, int failed, const std::string& reason = "oom",
                                          int64_t newest = 1000) {
  std::vector<store::AttemptRecord> out;
  for (int i = 0; i < n; ++i) {
    store::AttemptRecord a;
    a.ended_ms = newest - i;
    a.succeeded = i >= failed;
    a.failure_class = a.succeeded ? store::FailureClass::kNone : store::FailureClass::kRetryable;
    a.reason = a.succeeded ? "" : reason;
    out.push_back(a);
  }
  return out;
}

TEST(CircuitBreakerTest, OpensAboveThresholdOverTheWindow) {
  CircuitBreaker b;  // 30% over 20
  b.Update(History(20, 6));
  EXPECT_FALSE(b.IsOpen());  // exactly 30% is not above
  EXPECT_DOUBLE_EQ(b.FailureRate(), 0.3);
  b.Update(History(20, 7, "io_error"));
  EXPECT_TRUE(b.IsOpen());
  EXPECT_NE(b.Reason().find("7 of the last 20"), std::string::npos) << b.Reason();
  EXPECT_NE(b.Reason().find("io_error"), std::string::npos);
  // Only the newest `window` attempts count.
  auto h = History(20, 0, "oom", 1000);
  auto old = History(20, 20, "oom", 500);
  h.insert(h.end(), old.begin(), old.end());
  b.Update(h);
  EXPECT_FALSE(b.IsOpen());
}

TEST(CircuitBreakerTest, NeedsMinimumAttemptsAndIgnoresPermanentFailures) {
  CircuitBreaker b;
  b.Update(History(9, 9));
  EXPECT_FALSE(b.IsOpen());
  auto h = History(20, 20);
  for (auto& a : h) a.failure_class = store::FailureClass::kPermanent;
  b.Update(h);
  EXPECT_FALSE(b.IsOpen());
}

TEST(CircuitBreakerTest, ResetClosesAndForgetsOlderAttempts) {
  CircuitBreaker b;
  auto h = History(20, 15);
  b.Update(h);
  ASSERT_TRUE(b.IsOpen());
  b.Reset(1000);
  EXPECT_FALSE(b.IsOpen());
  EXPECT_EQ(b.Reason(), "");
  b.Update(h);  // same history: all ended at or before the reset
  EXPECT_FALSE(b.IsOpen());
  b.Update(History(10, 10, "oom", 2000));  // new failures after the reset
  EXPECT_TRUE(b.IsOpen());
}

TEST(CircuitBreakerTest, ValidatesOptions) {
  EXPECT_TRUE(ValidateBreakerOptions({}).IsOk());
  EXPECT_FALSE(ValidateBreakerOptions({1.5, 20, 10}).IsOk());
  EXPECT_FALSE(ValidateBreakerOptions({0.3, 0, 1}).IsOk());
  EXPECT_FALSE(ValidateBreakerOptions({0.3, 5, 10}).IsOk());
}

}  // namespace
}  // namespace kestrel::jobs
