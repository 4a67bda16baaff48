// FakeProcessRunner: scripted children that live on an Env clock (use a
// FakeClockEnv), so supervisor tests are exact and take no real time.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "jobs/process_runner.h"

namespace kestrel::jobs {

// What one fake child does; times are ms after its start.
struct FakeChildScript {
  std::vector<std::pair<int64_t, std::string>> progress;  // (at, line)
  int64_t exit_at_ms = -1;                                // -1 = runs until signalled
  ExitInfo exit;                                          // how it ends at exit_at_ms
  bool ignore_sigterm = false;
  int64_t sigterm_exit_after_ms = 0;  // time to checkpoint, then dies of SIGTERM
};

// Everything a fake child saw, for assertions (kept after the child is gone).
struct FakeChildLog {
  ProcessSpec spec;
  std::vector<std::pair<int64_t, int>> signals;  // (ms after start, signal)
};

class FakeProcessRunner final : public ProcessRunner {
 public:
  explicit FakeProcessRunner(Env& clock) : clock_(clock) {}
  // The next Start() runs `script` (FIFO). Start fails when none is queued.
  void Push(FakeChildScript script) { scripts_.push_back(std::move(script)); }
  Result<std::unique_ptr<ChildProcess>> Start(const ProcessSpec& spec) override;
  // One entry per started child, in start order.
  const std::deque<FakeChildLog>& Children() const { return logs_; }

 private:
  Env& clock_;
  std::deque<FakeChildScript> scripts_;
  std::deque<FakeChildLog> logs_;  // deque: stable addresses for the children
  int64_t next_pid_ = 1000;
};

}  // namespace kestrel::jobs
