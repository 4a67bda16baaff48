// CircuitBreaker: pauses automatic retries while too many recent attempts
// fail (a broken disk, a bad driver, a store outage), so a systemic fault
// does not burn every job's retry budget. Open when, among the last `window`
// finished attempts (at least `min_attempts` of them), the share of
// retryable failures (infrastructure included) exceeds `threshold`.
// Permanent failures (bad config, bad data) are the user's, not the
// system's, and count as healthy here.
//
// Not thread-safe. State is in memory; Reset() ignores attempts that ended
// at or before its time, so history cannot reopen a freshly closed breaker.
// `kestrel breaker reset` stores its time in the store setting
// "breaker.reset_ms" (PersistBreakerReset); every worker applies it on its
// next RefreshBreaker, so one reset closes the breaker everywhere.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::jobs {

struct BreakerOptions {
  double threshold = 0.30;  // open above this failure rate, in [0, 1]
  int window = 20;          // last N finished attempts
  int min_attempts = 10;    // fewer finished attempts never open the breaker
};

Status ValidateBreakerOptions(const BreakerOptions& o);

class CircuitBreaker {
 public:
  explicit CircuitBreaker(BreakerOptions options = {}) : options_(options) {}

  // `recent`: newest first, as MetadataStore::RecentAttempts(window) returns.
  void Update(const std::vector<store::AttemptRecord>& recent);
  bool IsOpen() const { return open_; }
  // Why it is open ("" when closed), for stats, the API and the UI.
  const std::string& Reason() const { return reason_; }
  double FailureRate() const { return rate_; }
  // What the last Update() counted: finished attempts in the window (those
  // ended after the last reset) and the retryable failures among them, by
  // reason.
  int Counted() const { return counted_; }
  int Failed() const { return failed_; }
  const std::map<std::string, int>& FailedByReason() const { return failed_by_reason_; }
  // Closes the breaker; attempts ended at or before `now_ms` no longer count.
  void Reset(int64_t now_ms);
  int64_t ResetAtMs() const { return reset_at_ms_; }
  const BreakerOptions& Options() const { return options_; }

 private:
  BreakerOptions options_;
  bool open_ = false;
  double rate_ = 0;
  int counted_ = 0, failed_ = 0;
  std::map<std::string, int> failed_by_reason_;
  std::string reason_;
  int64_t reset_at_ms_ = 0;
};

// Store setting holding the time (Unix ms) of the last shared reset.
inline constexpr const char* kBreakerResetSetting = "breaker.reset_ms";

// Records a reset at `now_ms` that every worker honours (kestrel breaker reset).
Status PersistBreakerReset(store::MetadataStore& store, int64_t now_ms);

// Applies the shared reset when it is newer than the breaker's own, then
// Update()s from the store's recent attempts. On a store error the breaker
// keeps its previous state.
Status RefreshBreaker(CircuitBreaker& breaker, store::MetadataStore& store);

}  // namespace kestrel::jobs
