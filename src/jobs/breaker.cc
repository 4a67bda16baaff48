#include "jobs/breaker.h"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace kestrel::jobs {

Status ValidateBreakerOptions(const BreakerOptions& o) {
  if (!(o.threshold >= 0.0 && o.threshold <= 1.0)) {
    return Status::InvalidArgument("breaker threshold must be in [0, 1]", {"", 0, "breaker_threshold"});
  }
  if (o.window < 1) return Status::InvalidArgument("breaker window must be >= 1", {"", 0, "breaker_window"});
  if (o.min_attempts < 1 || o.min_attempts > o.window) {
    return Status::InvalidArgument("breaker min_attempts must be in [1, window]", {"", 0, "breaker_min"});
  }
  return {};
}

void CircuitBreaker::Update(const std::vector<store::AttemptRecord>& recent) {
  int total = 0, failed = 0;
  std::map<std::string, int> reasons;
  for (const auto& a : recent) {
    if (total >= options_.window) break;
    if (a.ended_ms == 0 || a.ended_ms <= reset_at_ms_) continue;
    ++total;
    if (!a.succeeded && a.failure_class == store::FailureClass::kRetryable) {
      ++failed;
      ++reasons[a.reason];
    }
  }
  counted_ = total;
  failed_ = failed;
  failed_by_reason_ = reasons;
  rate_ = total > 0 ? static_cast<double>(failed) / total : 0.0;
  open_ = total >= options_.min_attempts && rate_ > options_.threshold;
  reason_.clear();
  if (!open_) return;
  std::string top;
  int top_n = 0;
  for (const auto& [r, n] : reasons) {
    if (n > top_n) top = r, top_n = n;
  }
  char buf[256];
  std::snprintf(
      buf, sizeof buf,
      "automatic retries paused: %d of the last %d attempts failed (%.0f%% > %.0f%%), most often '%s'",
      failed, total, rate_ * 100, options_.threshold * 100, top.c_str());
  reason_ = buf;
}

Status PersistBreakerReset(store::MetadataStore& store, int64_t now_ms) {
  return store.PutSetting(kBreakerResetSetting, std::to_string(now_ms), now_ms);
}

Status RefreshBreaker(CircuitBreaker& breaker, store::MetadataStore& store) {
  auto setting = store.GetSetting(kBreakerResetSetting);
  if (setting.IsOk()) {
    char* end = nullptr;
    long long at = std::strtoll(setting->c_str(), &end, 10);
    if (end != setting->c_str() && at > breaker.ResetAtMs()) breaker.Reset(at);
  } else if (setting.GetStatus().Code() != StatusCode::kNotFound) {
    return setting.GetStatus();
  }
  KESTREL_ASSIGN_OR_RETURN(auto recent, store.RecentAttempts(breaker.Options().window));
  breaker.Update(recent);
  return {};
}

void CircuitBreaker::Reset(int64_t now_ms) {
  reset_at_ms_ = now_ms;
  open_ = false;
  rate_ = 0;
  counted_ = failed_ = 0;
  failed_by_reason_.clear();
  reason_.clear();
}

}  // namespace kestrel::jobs
