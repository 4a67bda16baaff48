#include "jobs/supervisor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>

#include "core/cpu_budget.h"
#include "core/fault_env.h"
#include "jobs/fake_process_runner.h"
#include "jobs/retry.h"

namespace kestrel::jobs {
namespace {

class FakeSupervisorTest : public ::testing::Test {
 protected:
  Result<SupervisedRun> Run(FakeChildScript script, std::function<Status()> hb = {}) {
    runner_.Push(std::move(script));
    Supervisor sup(runner_, clock_, options_);
    return sup.Run(
        {{"/usr/bin/kestrel", "train", "--job", "1"}, {}, ""}, hb ? hb : [this] {
          ++heartbeats_;
          return Status();
        });
  }
  static std::vector<std::pair<int64_t, std::string>> Ticks(int64_t every, int64_t until) {
    std::vector<std::pair<int64_t, std::string>> p;
    for (int64_t t = every; t <= until; t += every)
      p.emplace_back(t, "stage=train iter=" + std::to_string(t));
    return p;
  }
  bool Got(int sig) const {
    for (auto [t, s] : runner_.Children().back().signals) {
      if (s == sig) return true;
    }
    return false;
  }

  FakeClockEnv clock_{Env::Default()};
  FakeProcessRunner runner_{clock_};
  SupervisorOptions options_;  // defaults: heartbeat 30 s, hang 90 s, grace 10 s
  int heartbeats_ = 0;
};

TEST_F(FakeSupervisorTest, CleanExitIsSuccessWithTheResult) {
  FakeChildScript s;
  s.progress = {{1000, "stage=train epoch=1"}, {2000, "result {\"map50\":0.5}"}};
  s.exit_at_ms = 3000;
  auto r = Run(s);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->end, "exited");
  EXPECT_EQ(r->duration_ms, 3000);
  EXPECT_EQ(r->progress_lines, 2);
  EXPECT_EQ(r->stage, store::FailureStage::kTrain);
  EXPECT_EQ(heartbeats_, 0);
  auto o = ToOutcome(*r);
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.result_json, "{\"map50\":0.5}");
  EXPECT_EQ(o.pid, r->pid);
}

TEST_F(FakeSupervisorTest, CrashBySignalIsRetryable) {
  FakeChildScript s;
  s.progress = {{100, "stage=data"}};
  s.exit_at_ms = 5000;
  s.exit = {0, SIGSEGV};
  auto r = Run(s);
  EXPECT_EQ(r->end, "signaled");
  auto o = ToOutcome(*r);
  EXPECT_FALSE(o.success);
  EXPECT_EQ(o.signal, SIGSEGV);
  EXPECT_EQ(o.reason, FailureReason::kCrashed);
  EXPECT_EQ(o.stage, store::FailureStage::kData);
  EXPECT_EQ(o.failure_class, store::FailureClass::kRetryable);
  EXPECT_FALSE(runner_.Children().back().signals.size());
}

TEST_F(FakeSupervisorTest, NoProgressForTheHangTimeoutKillsAsHung) {
  FakeChildScript s;
  s.progress = {{1000, "stage=train"}, {2000, "stage=train iter=2"}};
  s.sigterm_exit_after_ms = 500;  // checkpoints, then dies of SIGTERM
  auto r = Run(s);
  EXPECT_EQ(r->end, "hung");
  EXPECT_EQ(runner_.Children().back().signals.at(0), std::make_pair(int64_t{92'000}, SIGTERM));
  EXPECT_EQ(r->duration_ms, 92'500);
  EXPECT_FALSE(r->sigkill_needed);
  EXPECT_EQ(heartbeats_, 3);  // 30, 60, 90 s
  auto o = ToOutcome(*r);
  EXPECT_EQ(o.reason, FailureReason::kHung);
  EXPECT_EQ(o.failure_class, store::FailureClass::kRetryable);
  EXPECT_FALSE(o.infrastructure);
}

// A 20k-image validation runs for minutes with no training iteration; its
// progress lines alone must keep the child alive, and the line it was on
// is the last progress of a child that does go silent.
TEST_F(FakeSupervisorTest, PhaseProgressLinesKeepALongValidationAlive) {
  FakeChildScript s;
  s.progress.emplace_back(0, "stage=eval epoch=3 val=0/20000");
  for (int64_t t = 5'000; t <= 600'000; t += 5'000) {
    s.progress.emplace_back(t, "stage=eval epoch=3 val=" + std::to_string(t / 30) + "/20000");
  }
  s.exit_at_ms = 601'000;
  auto r = Run(s);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->end, "exited");  // ten minutes, more than six hang timeouts
  EXPECT_EQ(r->duration_ms, 601'000);
  EXPECT_EQ(r->stage, store::FailureStage::kEval);
  EXPECT_EQ(r->last_progress, "stage=eval epoch=3 val=20000/20000");
  EXPECT_TRUE(runner_.Children().back().signals.empty());

  FakeChildScript silent;
  silent.progress = {{0, "stage=eval epoch=3 val=0/20000"}, {5'000, "stage=eval epoch=3 val=166/20000"}};
  silent.exit_at_ms = 601'000;
  silent.sigterm_exit_after_ms = 100;
  r = Run(silent);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->end, "hung");
  EXPECT_EQ(runner_.Children().back().signals.at(0), std::make_pair(int64_t{95'000}, SIGTERM));
  auto o = ToOutcome(*r);
  EXPECT_EQ(o.stage, store::FailureStage::kEval);
  EXPECT_NE(o.message.find("last progress: stage=eval epoch=3 val=166/20000"), std::string::npos)
      << o.message;
}

TEST_F(FakeSupervisorTest, WallClockLimitThenSigkillAfterGrace) {
  options_.wall_clock_limit_ms = 60'000;
  FakeChildScript s;
  s.progress = Ticks(1000, 200'000);
  s.ignore_sigterm = true;
  auto r = Run(s);
  EXPECT_EQ(r->end, "timeout");
  EXPECT_TRUE(r->sigkill_needed);
  EXPECT_EQ(r->exit.signal, SIGKILL);
  EXPECT_EQ(r->duration_ms, 70'000);
  const auto& sigs = runner_.Children().back().signals;
  EXPECT_EQ(sigs.front(), std::make_pair(int64_t{60'000}, SIGTERM));
  EXPECT_EQ(sigs.back(), std::make_pair(int64_t{70'000}, SIGKILL));
  EXPECT_EQ(ToOutcome(*r).reason, FailureReason::kTimeout);
}

TEST_F(FakeSupervisorTest, SigtermGraceLetsTheChildCheckpoint) {
  options_.wall_clock_limit_ms = 10'000;
  FakeChildScript s;
  s.progress = Ticks(500, 100'000);
  s.sigterm_exit_after_ms = 9'000;  // just inside the 10 s grace
  auto r = Run(s);
  EXPECT_FALSE(r->sigkill_needed);
  EXPECT_EQ(r->exit.signal, SIGTERM);
  EXPECT_EQ(r->duration_ms, 19'000);
  EXPECT_FALSE(Got(SIGKILL));
}

TEST_F(FakeSupervisorTest, HeartbeatsRenewAndALostLeaseStopsTheChild) {
  FakeChildScript s;
  s.progress = Ticks(10'000, 500'000);
  s.sigterm_exit_after_ms = 1'000;
  int calls = 0;
  auto r = Run(s, [&] { return ++calls < 2 ? Status() : Status::Aborted("attempt no longer current"); });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(r->end, "lease_lost");
  EXPECT_EQ(r->duration_ms, 61'000);
  auto o = ToOutcome(*r);
  EXPECT_TRUE(o.infrastructure);
  EXPECT_EQ(o.reason, FailureReason::kLeaseLost);
}

TEST_F(FakeSupervisorTest, ChildReasonAndExitCodeClassifyPermanentFailures) {
  FakeChildScript s;
  s.exit_at_ms = 100;
  s.exit = {kTrainExitBadConfig, 0};
  auto o = ToOutcome(*Run(s));
  EXPECT_EQ(o.reason, FailureReason::kBadConfig);
  EXPECT_EQ(o.failure_class, store::FailureClass::kPermanent);
  FakeChildScript d;
  d.progress = {{50, "stage=train reason=diverged"}};
  d.exit_at_ms = 100;
  d.exit = {1, 0};
  o = ToOutcome(*Run(d));
  EXPECT_EQ(o.reason, FailureReason::kDiverged);
  EXPECT_EQ(o.failure_class, store::FailureClass::kPermanent);
}

// A token this worker does not know (a newer child's) is recorded as error,
// retryable, as unknown tokens always were classified; the message keeps
// the child's word.
TEST_F(FakeSupervisorTest, UnknownChildReasonIsAnErrorThatKeepsTheTokenInTheMessage) {
  FakeChildScript s;
  s.progress = {{50, "stage=train reason=something_new"}};
  s.exit_at_ms = 100;
  s.exit = {1, 0};
  auto o = ToOutcome(*Run(s));
  EXPECT_EQ(o.reason, FailureReason::kError);
  EXPECT_EQ(o.failure_class, store::FailureClass::kRetryable);
  EXPECT_FALSE(o.infrastructure);
  EXPECT_NE(o.message.find("reason 'something_new' is unknown to this worker, recorded as error"),
            std::string::npos)
      << o.message;
}

class PosixSupervisorTest : public ::testing::Test {
 protected:
  PosixSupervisorTest() {
    options_.heartbeat_ms = 50;
    options_.hang_timeout_ms = 300;
    options_.grace_ms = 200;
    options_.poll_ms = 5;
  }
  Result<SupervisedRun> Sh(const std::string& script) {
    Supervisor sup(runner_, Env::Default(), options_);
    return sup.Run({{"/bin/sh", "-c", script}, {}, ""}, [] { return Status(); });
  }
  PosixProcessRunner runner_;
  SupervisorOptions options_;
};

TEST_F(PosixSupervisorTest, ReadsProgressAndResultFromFd3) {
  auto r = Sh("echo stage=eval >&3; echo 'result {\"ok\":1}' >&3; echo to-log; exit 0");
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->end, "exited");
  EXPECT_EQ(r->stage, store::FailureStage::kEval);
  auto o = ToOutcome(*r);
  EXPECT_TRUE(o.success);
  EXPECT_EQ(o.result_json, "{\"ok\":1}");
  auto crash = Sh("kill -SEGV $$");
  EXPECT_EQ(crash->exit.signal, SIGSEGV);
  EXPECT_EQ(Sh("exit 7")->exit.exit_code, 7);
}

// ProcessSpec::cpus pins the child before exec (a worker's CPU slot share,
// issue 30): the child reads its own allowed list from /proc.
TEST_F(PosixSupervisorTest, ChildIsPinnedToTheSpecsCpus) {
  const int last = ProcessCpuBudget().affinity.back();
  Supervisor sup(runner_, Env::Default(), options_);
  ProcessSpec spec{
      {"/bin/sh", "-c",
       R"(echo "result {\"cpus\":\"$(grep Cpus_allowed_list /proc/self/status | cut -f2)\"}" >&3)"},
      {},
      ""};
  spec.cpus = {last};
  auto r = sup.Run(spec, [] { return Status(); });
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(ToOutcome(*r).result_json, "{\"cpus\":\"" + std::to_string(last) + "\"}");
  spec.cpus = {-1};
  EXPECT_FALSE(sup.Run(spec, [] { return Status(); }).IsOk())
      << "an impossible CPU id is refused before fork";
}

TEST_F(PosixSupervisorTest, HungChildIgnoringSigtermIsKilledWithItsGroup) {
  auto t0 = std::chrono::steady_clock::now();
  // Ignores SIGTERM; its `sleep` grandchild is in the same process group.
  auto r = Sh("trap '' TERM; echo stage=train >&3; sleep 30; echo never >&3");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->end, "hung");
  EXPECT_TRUE(r->sigkill_needed);
  EXPECT_EQ(r->exit.signal, SIGKILL);
  EXPECT_EQ(r->progress_lines, 1);
  EXPECT_LT(secs, 20.0) << "killed, not waited for: the child sleeps 30 s";
  EXPECT_GE(r->duration_ms, 500);  // 300 ms hang + 200 ms grace
}

// Real pipe, real clock: 2 s of phase-progress lines only (over 3 hang
// timeouts) and the child exits by itself; the same time in silence is hung.
TEST_F(PosixSupervisorTest, PhaseProgressOnlyChildOutlivesTheHangTimeoutAndASilentOneDoesNot) {
  options_.hang_timeout_ms = 600;  // a line every 100 ms: slack for a loaded machine
  auto r = Sh(
      "i=0; while [ $i -lt 20 ]; do echo \"stage=eval epoch=1 val=$i/20\" >&3; i=$((i+1)); sleep 0.1; done;"
      " echo 'stage=eval epoch=1 val=20/20' >&3; exit 0");
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->end, "exited");
  EXPECT_EQ(r->exit.exit_code, 0);
  EXPECT_GE(r->duration_ms, 2'000);
  EXPECT_EQ(r->progress_lines, 21);
  EXPECT_EQ(r->stage, store::FailureStage::kEval);
  EXPECT_EQ(r->last_progress, "stage=eval epoch=1 val=20/20");

  auto silent = Sh("echo 'stage=eval epoch=1 val=0/20' >&3; sleep 2; exit 0");
  ASSERT_TRUE(silent.IsOk());
  EXPECT_EQ(silent->end, "hung");
  EXPECT_EQ(silent->progress_lines, 1);
}

TEST_F(PosixSupervisorTest, StoppedChildIsKilledAsHung) {
  auto r = Sh("echo stage=train >&3; kill -STOP $$; exit 0");
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->end, "hung");
  EXPECT_NE(r->exit.signal, 0);
}

}  // namespace
}  // namespace kestrel::jobs
