#include "jobs/fake_process_runner.h"

#include <csignal>

namespace kestrel::jobs {
namespace {

class FakeChild final : public ChildProcess {
 public:
  FakeChild(Env& clock, FakeChildScript script, FakeChildLog& log, int64_t pid)
      : clock_(clock), script_(std::move(script)), log_(log), pid_(pid), start_ms_(NowMs()) {
    if (script_.exit_at_ms >= 0) end_ms_ = script_.exit_at_ms;
  }

  int64_t Pid() const override { return pid_; }

  std::optional<ExitInfo> Poll() override {
    if (end_ms_ >= 0 && Elapsed() >= end_ms_) return end_;
    return std::nullopt;
  }

  std::vector<std::string> ReadProgress() override {
    std::vector<std::string> lines;
    int64_t t = Elapsed();
    int64_t horizon = end_ms_ >= 0 ? std::min(t, end_ms_) : t;
    while (next_line_ < script_.progress.size() && script_.progress[next_line_].first <= horizon &&
           !stopped_) {
      lines.push_back(script_.progress[next_line_++].second);
    }
    return lines;
  }

  void Signal(int sig) override {
    int64_t t = Elapsed();
    if (end_ms_ >= 0 && t >= end_ms_) return;  // already dead
    log_.signals.emplace_back(t, sig);
    if (sig == SIGKILL) {
      Die(t, SIGKILL);
    } else if (sig == SIGTERM && !script_.ignore_sigterm) {
      Die(t + script_.sigterm_exit_after_ms, SIGTERM);
    } else if (sig == SIGSTOP) {
      stopped_ = true;
    }
  }

 private:
  int64_t NowMs() { return clock_.NowMicros() / 1000; }
  int64_t Elapsed() { return NowMs() - start_ms_; }
  void Die(int64_t at, int sig) {
    if (end_ms_ >= 0 && end_ms_ <= at) return;  // ends earlier anyway
    end_ms_ = at;
    end_ = ExitInfo{0, sig};
  }

  Env& clock_;
  FakeChildScript script_;
  FakeChildLog& log_;
  int64_t pid_;
  int64_t start_ms_;
  int64_t end_ms_ = -1;
  ExitInfo end_ = script_.exit;
  size_t next_line_ = 0;
  bool stopped_ = false;
};

}  // namespace

Result<std::unique_ptr<ChildProcess>> FakeProcessRunner::Start(const ProcessSpec& spec) {
  if (scripts_.empty()) return Status::FailedPrecondition("fake runner: no script queued for this child");
  FakeChildScript script = std::move(scripts_.front());
  scripts_.pop_front();
  logs_.push_back({spec, {}});
  return std::unique_ptr<ChildProcess>(
      std::make_unique<FakeChild>(clock_, std::move(script), logs_.back(), next_pid_++));
}

}  // namespace kestrel::jobs
