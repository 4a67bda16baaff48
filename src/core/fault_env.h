// Test doubles for Env: a fake clock and fault injection on writes.
// Used by unit tests and by the soak test's fault injector.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "core/env.h"

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
  // Sleeping advances the fake clock instead of blocking.
  void SleepMicros(int64_t micros) override { micros_ += micros; }

 private:
  std::atomic<int64_t> micros_;
};

// Env that fails writes on demand: after `n` more successful atomic writes,
// or for any path containing a substring. Failed writes leave no file.
class FaultInjectionEnv : public EnvWrapper {
 public:
  explicit FaultInjectionEnv(Env& target) : EnvWrapper(target) {}

  // Allow `n` more WriteFileAtomic/WriteFileDeferred/Rename calls, then fail every one.
  void FailWritesAfter(int n) { writes_left_ = n; }
  void FailPathsContaining(std::string needle) {
    std::lock_guard<std::mutex> l(mu_);
    needle_ = std::move(needle);
  }
  void Heal() {
    writes_left_ = -1;
    std::lock_guard<std::mutex> l(mu_);
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
  bool ShouldFail(const std::string& path) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!needle_.empty() && path.find(needle_) != std::string::npos) {
        ++failed_;
        return true;
      }
    }
    int left = writes_left_.load();
    if (left < 0) return false;
    if (left == 0) {
      ++failed_;
      return true;
    }
    --writes_left_;
    return false;
  }

  std::atomic<int> writes_left_{-1};
  std::atomic<int> failed_{0};
  std::mutex mu_;
  std::string needle_;
};

}  // namespace kestrel
