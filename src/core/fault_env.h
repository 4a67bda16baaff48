// Test doubles for Env: a fake clock and fault injection on writes.
// Used by unit tests and by the soak test's fault injector.
#pragma once

#include <atomic>
#include <string>

#include "core/env.h"
#include "core/thread_annotations.h"

namespace kestrel {

// Env whose clock only moves when told. Files go to the target Env.
class FakeClockEnv : public EnvWrapper {
 public:
  explicit FakeClockEnv(Env& target, int64_t start_unix_seconds = 1'700'000'000)
      : EnvWrapper(target), micros_(start_unix_seconds * 1'000'000) {}
  void AdvanceMicros(int64_t d) { micros_ += d; }
  void AdvanceSeconds(int64_t s) { micros_ += s * 1'000'000; }
  int64_t NowMicros() override { return micros_; }
  int64_t UnixSeconds() override { return micros_ / 1'000'000; }
  int64_t UnixMillis() override { return micros_ / 1'000; }
  // Sleeping advances the fake clock instead of blocking.
  void SleepMicros(int64_t micros) override { micros_ += micros; }

 private:
  std::atomic<int64_t> micros_;
};

// Env that fails writes on demand: after `n` more successful atomic writes,
// or for any path containing a substring. Failed writes leave no file.
// Thread-safety: any method from any thread; `n` counts writes from all of
// them (exactly n succeed however many threads write at once).
class FaultInjectionEnv : public EnvWrapper {
 public:
  explicit FaultInjectionEnv(Env& target) : EnvWrapper(target) {}

  // Allow `n` more WriteFileAtomic/WriteFileDeferred/Rename calls, then fail every one.
  void FailWritesAfter(int n) EXCLUDES(mu_) {
    MutexLock l(mu_);
    writes_left_ = n;
  }
  void FailPathsContaining(std::string needle) EXCLUDES(mu_) {
    MutexLock l(mu_);
    needle_ = std::move(needle);
  }
  void Heal() EXCLUDES(mu_) {
    MutexLock l(mu_);
    writes_left_ = -1;
    needle_.clear();
  }
  int FailedWrites() const { return failed_; }

  Status WriteFileAtomic(const std::string& path, std::string_view data) override {
    if (ShouldFail(path)) return Status::IoError("injected write fault", {path});
    return EnvWrapper::WriteFileAtomic(path, data);
  }
  Status WriteFileDeferred(const std::string& path, std::string_view data) override {
    if (ShouldFail(path)) return Status::IoError("injected write fault", {path});
    return EnvWrapper::WriteFileDeferred(path, data);
  }
  Status Rename(const std::string& from, const std::string& to) override {
    if (ShouldFail(to)) return Status::IoError("injected rename fault", {to});
    return EnvWrapper::Rename(from, to);
  }

 private:
  // The count is read and decremented under the lock: as two atomic steps,
  // two writers could both take the last allowed write and leave -1, which
  // means "never fail".
  bool ShouldFail(const std::string& path) EXCLUDES(mu_) {
    MutexLock l(mu_);
    if (!needle_.empty() && path.find(needle_) != std::string::npos) {
      ++failed_;
      return true;
    }
    if (writes_left_ < 0) return false;
    if (writes_left_ == 0) {
      ++failed_;
      return true;
    }
    --writes_left_;
    return false;
  }

  Mutex mu_;
  int writes_left_ GUARDED_BY(mu_) = -1;  // < 0: no limit
  std::string needle_ GUARDED_BY(mu_);    // "": no path fails
  std::atomic<int> failed_{0};
};

}  // namespace kestrel
