// Worker tests on SQLite with scripted children (FakeProcessRunner) and a
// fake clock: exact, and each takes well under a second of real time.
#include "jobs/worker.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "app/job_kinds.h"
#include "core/fault_env.h"
#include "core/safetensors.h"
#include "jobs/fake_process_runner.h"
#include "jobs/retry.h"
#include "worker_test_fixture.h"

namespace kestrel::jobs {
namespace {

TEST_F(WorkerTest, SuccessCommitsTheResultAndRegistersTheWorker) {
  options_.exit_when_idle = true;
  options_.devices = *ParseDevices("cpu");
  int64_t id = Submit("a");
  runner_.Push(Success());
  auto c = RunWorker();
  EXPECT_EQ(c.claimed, 1);
  EXPECT_EQ(c.succeeded, 1);
  auto j = Job(id);
  EXPECT_EQ(j.state, JobState::kSucceeded);
  EXPECT_NE(j.result_json.find(weights_), std::string::npos) << j.result_json;
  auto a = Attempts(id);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_TRUE(a[0].succeeded);
  EXPECT_EQ(a[0].worker, "w1");
  EXPECT_EQ(a[0].pid, 1000);
  // The child is this binary's `train --job ID --attempt N`, logging under home.
  const auto& spec = runner_.Children().at(0).spec;
  EXPECT_EQ(spec.argv, (std::vector<std::string>{"/usr/bin/kestrel", "train", "--job", std::to_string(id),
                                                 "--attempt", "1"}));
  EXPECT_EQ(spec.log_path, options_.home + "/jobs/" + std::to_string(id) + "/attempt-1.log");
  auto workers = db_->ListWorkers();
  ASSERT_TRUE(workers.IsOk());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_EQ((*workers)[0].id, "w1");
  EXPECT_NE((*workers)[0].devices_json.find("cpu"), std::string::npos);
}

TEST_F(WorkerTest, QualityGateFailsWhenTheMetricIsLowOrTheWeightsAreMissingOrBroken) {
  options_.exit_when_idle = true;
  int64_t low = Submit("low", "", "cpu", 0, {{3}, {{0}}, 10}, 0.6);
  int64_t ok = Submit("ok", "", "cpu", 0, {{3}, {{0}}, 10}, 0.4);
  int64_t missing = Submit("missing");
  int64_t broken = Submit("broken");
  int64_t no_result = Submit("no_result");
  runner_.Push(Success(25'000, 0.5));  // below 0.6
  runner_.Push(Success(25'000, 0.5));  // reaches 0.4
  FakeChildScript m = Success();
  m.progress.back().second = "result {\"best\":\"" + dir_ + "/nope.safetensors\",\"map50\":0.9}";
  runner_.Push(m);
  std::ofstream(dir_ + "/broken.safetensors") << "not a safetensors file";
  FakeChildScript b = Success();
  b.progress.back().second = "result {\"best\":\"" + dir_ + "/broken.safetensors\",\"map50\":0.9}";
  runner_.Push(b);
  FakeChildScript n = Success();
  n.progress.pop_back();
  runner_.Push(n);
  auto c = RunWorker();
  EXPECT_EQ(c.succeeded, 1);
  EXPECT_EQ(Job(ok).state, JobState::kSucceeded);
  for (int64_t id : {low, missing, broken, no_result}) {
    auto j = Job(id);
    EXPECT_EQ(j.state, JobState::kFailedPermanent) << id;
    auto a = Attempts(id);
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].reason, "quality_gate");
    EXPECT_EQ(a[0].failure_class, store::FailureClass::kPermanent);
    EXPECT_EQ(a[0].exit_code, 0) << "exit code 0 is not success";
  }
  EXPECT_NE(Attempts(low)[0].message.find("below the job's min_map50"), std::string::npos);
  EXPECT_NE(Attempts(missing)[0].message.find("do not exist"), std::string::npos);
  EXPECT_NE(Attempts(broken)[0].message.find("do not load"), std::string::npos);
  EXPECT_NE(Attempts(no_result)[0].message.find("without a result"), std::string::npos);
}

TEST_F(WorkerTest, CrashIsRetriedAsTheNextAttempt) {
  options_.exit_when_idle = true;
  int64_t id = Submit("crash");
  FakeChildScript crash;
  crash.progress = {{100, "stage=train epoch=1"}};
  crash.exit_at_ms = 5'000;
  crash.exit = {0, SIGSEGV};
  runner_.Push(crash);
  runner_.Push(Success());
  auto c = RunWorker();
  EXPECT_EQ(c.claimed, 2);
  auto j = Job(id);
  EXPECT_EQ(j.state, JobState::kSucceeded);
  EXPECT_EQ(j.retries_used, 1);
  auto a = Attempts(id);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].reason, "crashed");
  EXPECT_EQ(a[0].signal, SIGSEGV);
  EXPECT_EQ(a[0].stage, store::FailureStage::kTrain);
  EXPECT_EQ(runner_.Children().at(1).spec.argv.back(), "2") << "the retry runs as attempt 2";
}

TEST_F(WorkerTest, SilentChildIsStoppedAsHung) {
  options_.max_jobs = 1;
  int64_t id = Submit("hang");
  FakeChildScript s;
  s.progress = {{1'000, "stage=train"}};
  s.sigterm_exit_after_ms = 1'000;
  runner_.Push(s);
  RunWorker();
  auto a = Attempts(id);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].reason, "hung");
  EXPECT_EQ(a[0].signal, SIGTERM);
  EXPECT_EQ(Job(id).state, JobState::kFailedRetryable);
  // Stopped 90 s after its last line, SIGTERM only (it left within the grace).
  ASSERT_EQ(runner_.Children().at(0).signals.size(), 2u);  // SIGTERM + SIGCONT
  EXPECT_EQ(runner_.Children().at(0).signals[0], (std::make_pair<int64_t, int>(91'000, SIGTERM)));
}

TEST_F(WorkerTest, StolenLeaseStopsTheChildAndNeverOverwritesTheNewAttempt) {
  options_.max_jobs = 1;
  int64_t id = Submit("stolen");
  runner_.Push(Forever());
  auto hooks = std::make_shared<HookedStore::Hooks>();
  hooks->before_renew = [&](int64_t job, int64_t attempt) -> Status {
    // Another worker reclaims the job as if this one's lease had expired.
    store::ClaimRequest req;
    req.worker = "thief";
    req.devices = {{"cpu", 0, 0}};
    req.now_ms = Now() + 3'600'000;
    auto c = Open()->ClaimJob(req);
    EXPECT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    hooks->before_renew = nullptr;
    return {};
  };
  auto c = RunWorker(hooks);
  EXPECT_EQ(c.fenced, 1);
  EXPECT_EQ(c.failed, 0);
  auto j = Job(id);
  EXPECT_EQ(j.state, JobState::kRunning);
  EXPECT_EQ(j.attempt, 2);
  EXPECT_EQ(j.lease_owner, "thief");
  auto a = Attempts(id);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].reason, "lease_expired") << "the stale worker must not overwrite the closed attempt";
  // The fenced attempt still names its child and host: the pid was recorded
  // when the child started, not left for a completion that never commits.
  EXPECT_EQ(a[0].pid, 1000) << "FakeProcessRunner's first child";
  EXPECT_EQ(a[0].host, "test");
  // Never renewed (the theft came before the first renewal): it was last
  // known alive at its claim and lost when that lease ran out.
  EXPECT_EQ(a[0].ended_ms, a[0].started_ms);
  EXPECT_EQ(a[0].detected_ms, a[0].started_ms + options_.lease_ms);
  EXPECT_EQ(a[1].ended_ms, 0) << "nor touch the new one";
  EXPECT_EQ(a[1].pid, 0) << "the thief never started a child";
  const auto& sig = runner_.Children().at(0).signals;
  ASSERT_FALSE(sig.empty());
  EXPECT_EQ(sig[0], (std::make_pair<int64_t, int>(30'000, SIGTERM))) << "stopped at the failed renewal";
}

TEST_F(WorkerTest, CancelStopsTheChildWithGraceThenKill) {
  options_.max_jobs = 1;
  int64_t id = Submit("cancel");
  FakeChildScript s = Forever();
  s.ignore_sigterm = true;  // needs the SIGKILL
  runner_.Push(s);
  auto hooks = std::make_shared<HookedStore::Hooks>();
  hooks->before_renew = [&](int64_t job, int64_t) -> Status {
    EXPECT_TRUE(Open()->CancelJob(job, Now()).IsOk());
    return {};
  };
  auto c = RunWorker(hooks);
  EXPECT_EQ(c.fenced, 1);
  EXPECT_EQ(Job(id).state, JobState::kCancelled);
  EXPECT_EQ(Attempts(id)[0].reason, "cancelled");
  const auto& sig = runner_.Children().at(0).signals;
  ASSERT_EQ(sig.size(), 3u);
  EXPECT_EQ(sig[0], (std::make_pair<int64_t, int>(30'000, SIGTERM)));
  EXPECT_EQ(sig[2], (std::make_pair<int64_t, int>(40'000, SIGKILL)));
}

TEST_F(WorkerTest, StoreOutageDoesNotKillTheChildWhileTheLeaseHolds) {
  options_.exit_when_idle = true;
  int64_t id = Submit("outage");
  runner_.Push(Success(85'000));  // renewals at 30 s and 60 s fail; the lease (90 s) still holds
  auto hooks = std::make_shared<HookedStore::Hooks>();
  int renew_failures = 0;
  hooks->before_renew = [&](int64_t, int64_t) -> Status {
    ++renew_failures;
    return Status::Unavailable("postgresql connection lost: server closed the connection");
  };
  auto c = RunWorker(hooks);
  EXPECT_EQ(renew_failures, 2);
  EXPECT_EQ(c.succeeded, 1);
  EXPECT_EQ(Job(id).state, JobState::kSucceeded);
  EXPECT_TRUE(runner_.Children().at(0).signals.empty()) << "the child was never signalled";
}

TEST_F(WorkerTest, StoreConflictIsRetriedByTypeNotFencedByMessage) {
  // A lock conflict that outlived the store's own retries is kAborted like
  // fencing; only its kStoreConflict subcode tells them apart (the message
  // is free text and is not read).
  options_.exit_when_idle = true;
  int64_t id = Submit("conflict");
  runner_.Push(Success(85'000));
  auto hooks = std::make_shared<HookedStore::Hooks>();
  int conflicts = 0;
  hooks->before_renew = [&](int64_t, int64_t) -> Status {
    ++conflicts;
    return Status::Aborted("deadlock detected").WithReason(FailureReason::kStoreConflict);
  };
  auto c = RunWorker(hooks);
  EXPECT_EQ(conflicts, 2);
  EXPECT_EQ(c.fenced, 0);
  EXPECT_EQ(c.succeeded, 1);
  EXPECT_EQ(Job(id).state, JobState::kSucceeded);
  EXPECT_TRUE(runner_.Children().at(0).signals.empty()) << "a conflict must not stop the child";
}

TEST_F(WorkerTest, LongStoreOutageStopsTheChildOnlyWhenTheLeaseExpires) {
  options_.max_jobs = 1;
  int64_t id = Submit("long_outage");
  runner_.Push(Forever());
  auto hooks = std::make_shared<HookedStore::Hooks>();
  hooks->before_renew = [](int64_t, int64_t) -> Status { return Status::Unavailable("store down"); };
  RunWorker(hooks);
  const auto& sig = runner_.Children().at(0).signals;
  ASSERT_FALSE(sig.empty());
  EXPECT_EQ(sig[0], (std::make_pair<int64_t, int>(90'000, SIGTERM)))
      << "renewals at 30 and 60 s fail; 90 s = expiry";
  auto a = Attempts(id);
  EXPECT_EQ(a[0].reason, "lease_lost");
  EXPECT_TRUE(a[0].infrastructure);
}

TEST_F(WorkerTest, ClaimErrorsAreRetriedWithBackoff) {
  options_.exit_when_idle = true;
  int64_t id = Submit("flaky");
  runner_.Push(Success());
  auto hooks = std::make_shared<HookedStore::Hooks>();
  int failures = 0;
  hooks->before_claim = [&]() -> Status {
    if (failures < 3) {
      ++failures;
      return Status::Unavailable("cannot connect to postgresql: connection refused");
    }
    return {};
  };
  auto c = RunWorker(hooks);
  EXPECT_EQ(c.store_errors, 3);
  EXPECT_EQ(Job(id).state, JobState::kSucceeded);
}

TEST_F(WorkerTest, StopHandsRunningAttemptsBackAsWorkerStopped) {
  options_.slots = 2;
  clock_.set_yield(true);
  options_.lease_ms = 3'600'000;  // two slots share the fake clock: keep leases and hangs out of the way
  options_.supervisor.hang_timeout_ms = 3'600'000;
  int64_t a = Submit("a"), b = Submit("b");
  runner_.Push(Forever());
  runner_.Push(Forever());
  std::atomic<bool> stop{false};
  std::thread stopper([&] {
    // Both children started: stop the worker.
    while (runner_.Children().size() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    stop.store(true);
  });
  auto c = RunWorker(nullptr, &stop);
  stopper.join();
  EXPECT_EQ(c.stopped, 2);
  for (int64_t id : {a, b}) {
    auto j = Job(id);
    EXPECT_EQ(j.state, JobState::kFailedRetryable);
    EXPECT_EQ(j.infra_retries_used, 1);
    EXPECT_EQ(j.retries_used, 0) << "a worker stop does not spend the job's retry budget";
    auto at = Attempts(id);
    EXPECT_EQ(at[0].reason, "worker_stopped");
    EXPECT_TRUE(at[0].infrastructure);
  }
  for (const auto& child : runner_.Children()) {
    ASSERT_FALSE(child.signals.empty());
    EXPECT_EQ(child.signals[0].second, SIGTERM);
  }
  // A graceful stop marks the worker's row: `kestrel workers` says stopped at once.
  auto workers = db_->ListWorkers();
  ASSERT_TRUE(workers.IsOk());
  ASSERT_EQ(workers->size(), 1u);
  EXPECT_GT((*workers)[0].stopped_ms, 0);
  EXPECT_GE((*workers)[0].stopped_ms, (*workers)[0].heartbeat_ms);
}

TEST_F(WorkerTest, TwoSlotsNeverOversubscribeGpuMemory) {
  options_.slots = 2;
  clock_.set_yield(true);
  options_.exit_when_idle = true;
  options_.lease_ms = 3'600'000;  // two slots share the fake clock: keep leases out of the way
  options_.supervisor.hang_timeout_ms = 3'600'000;
  options_.devices = *ParseDevices("gpu:0:80000");
  std::map<std::string, int64_t> need;
  need[std::to_string(Submit("a", "", "gpu", 50'000))] = 50'000;
  need[std::to_string(Submit("b", "", "gpu", 50'000))] = 50'000;
  need[std::to_string(Submit("c", "", "gpu", 30'000))] = 30'000;
  need[std::to_string(Submit("d", "", "gpu", 30'000))] = 30'000;
  // Track what the children hold: a wrapping runner sees starts and exits.
  struct Tracking : ProcessRunner {
    ProcessRunner& inner;
    std::map<std::string, int64_t>& need;
    std::mutex mu;
    int64_t in_use = 0, peak = 0, peak_children = 0, children = 0;
    Tracking(ProcessRunner& i, std::map<std::string, int64_t>& n) : inner(i), need(n) {}
    struct Child : ChildProcess {
      Tracking& t;
      std::unique_ptr<ChildProcess> c;
      int64_t mb;
      bool done = false;
      Child(Tracking& t, std::unique_ptr<ChildProcess> c, int64_t mb) : t(t), c(std::move(c)), mb(mb) {}
      int64_t Pid() const override { return c->Pid(); }
      std::vector<std::string> ReadProgress() override { return c->ReadProgress(); }
      void Signal(int s) override { c->Signal(s); }
      std::optional<ExitInfo> Poll() override {
        auto e = c->Poll();
        if (e && !done) {
          done = true;
          std::lock_guard<std::mutex> l(t.mu);
          t.in_use -= mb;
          --t.children;
        }
        return e;
      }
    };
    Result<std::unique_ptr<ChildProcess>> Start(const ProcessSpec& spec) override {
      KESTREL_ASSIGN_OR_RETURN(auto c, inner.Start(spec));
      int64_t mb = need.at(spec.argv[3]);
      std::lock_guard<std::mutex> l(mu);
      in_use += mb;
      ++children;
      peak = std::max(peak, in_use);
      peak_children = std::max(peak_children, children);
      EXPECT_EQ(spec.env, std::vector<std::string>{"CUDA_VISIBLE_DEVICES=0"});
      return std::unique_ptr<ChildProcess>(std::make_unique<Child>(*this, std::move(c), mb));
    }
  } tracking(runner_, need);
  for (int i = 0; i < 4; ++i) runner_.Push(Success(60'000));
  StoreFactory factory = [this]() { return store::MetadataStore::Open(url_); };
  Worker w(factory, tracking, clock_, options_);
  std::atomic<bool> never{false};
  ASSERT_TRUE(w.Run(never).IsOk());
  EXPECT_EQ(w.Counters().succeeded, 4);
  EXPECT_LE(tracking.peak, 80'000) << "two jobs shared memory that does not fit";
  EXPECT_EQ(tracking.peak_children, 2) << "two slots ran two jobs at once (50 + 30 GB fit)";
  EXPECT_EQ(w.GpuUsedMb(0), 0) << "every reservation was released";
}

// Two CPU slots share the worker's CPUs out (issue 30): each child is pinned
// to its own half, so two trainings never both spread over every core; with
// pin_cpus=false the children inherit the worker's affinity.
TEST_F(WorkerTest, CpuSlotsArePinnedToDisjointShares) {
  for (const bool pin : {true, false}) {
    SCOPED_TRACE(pin ? "pinned" : "not pinned");
    options_.slots = 2;
    clock_.set_yield(true);
    options_.exit_when_idle = true;
    options_.lease_ms = 3'600'000;
    options_.supervisor.hang_timeout_ms = 3'600'000;
    options_.cpus = {0, 1, 2, 3};
    options_.pin_cpus = pin;
    for (int i = 0; i < 4; ++i) Submit((pin ? "p" : "n") + std::to_string(i));
    struct Recording : ProcessRunner {
      ProcessRunner& inner;
      std::mutex mu;
      std::vector<std::vector<int>> cpus;
      explicit Recording(ProcessRunner& i) : inner(i) {}
      Result<std::unique_ptr<ChildProcess>> Start(const ProcessSpec& spec) override {
        std::lock_guard<std::mutex> l(mu);
        cpus.push_back(spec.cpus);
        return inner.Start(spec);
      }
    } recording(runner_);
    for (int i = 0; i < 4; ++i) runner_.Push(Success(60'000));
    StoreFactory factory = [this]() { return store::MetadataStore::Open(url_); };
    Worker w(factory, recording, clock_, options_);
    std::atomic<bool> never{false};
    ASSERT_TRUE(w.Run(never).IsOk());
    EXPECT_EQ(w.Counters().succeeded, 4);
    ASSERT_EQ(recording.cpus.size(), 4u);
    std::set<std::vector<int>> seen(recording.cpus.begin(), recording.cpus.end());
    if (pin) {
      EXPECT_EQ(seen, (std::set<std::vector<int>>{{0, 1}, {2, 3}})) << "each slot has its own half";
    } else {
      EXPECT_EQ(seen, (std::set<std::vector<int>>{{}})) << "no pinning asked";
    }
  }
}

TEST_F(WorkerTest, DeviceParsingAndOffers) {
  auto d = ParseDevices("cpu:2,gpu:1:16000");
  ASSERT_TRUE(d.IsOk());
  ASSERT_EQ(d->size(), 3u);
  DevicePool pool(*d);
  EXPECT_EQ(pool.FreeOffers().size(), 3u);
  int t1 = pool.Acquire({"gpu", 1, 0}, 10'000);
  EXPECT_GE(t1, 0);
  EXPECT_EQ(pool.Acquire({"gpu", 1, 0}, 10'000), -1) << "does not fit in the 6000 MB left";
  int t2 = pool.Acquire({"cpu", 0, 0}, 0);
  EXPECT_GE(t2, 0);
  EXPECT_EQ(pool.Acquire({"cpu", 0, 0}, 0), -1) << "one job per CPU slot";
  auto offers = pool.FreeOffers();
  ASSERT_EQ(offers.size(), 2u);
  EXPECT_EQ(offers[1].free_memory_mb, 6'000);
  pool.Release(t1);
  pool.Release(t2);
  EXPECT_EQ(pool.UsedMb(1), 0);
  for (const char* bad : {"", "tpu", "gpu:0", "gpu:x:10", "gpu:0:0", "cpu:0", "gpu:0:10,gpu:0:20"}) {
    EXPECT_FALSE(ParseDevices(bad).IsOk()) << bad;
  }
}

TEST_F(WorkerTest, BreakerPausesRetriesUntilASharedReset) {
  options_.exit_when_idle = true;
  options_.breaker = {0.3, 4, 4};
  std::vector<int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(Submit("b" + std::to_string(i), "", "cpu", 0, {3, {600'000}, 10}));
    FakeChildScript crash;
    crash.progress = {{100, "stage=train"}};
    crash.exit_at_ms = 1'000;
    crash.exit = {6, 0};  // io_error
    runner_.Push(crash);
  }
  auto c = RunWorker();
  EXPECT_EQ(c.claimed, 4);
  EXPECT_TRUE(worker_->BreakerOpen());
  EXPECT_NE(worker_->BreakerReason().find("io_error"), std::string::npos) << worker_->BreakerReason();
  // The backoff has passed, but the breaker holds the retries back.
  clock_.AdvanceSeconds(3600);
  c = RunWorker();
  EXPECT_EQ(c.claimed, 0);
  EXPECT_TRUE(worker_->BreakerOpen());
  // `kestrel breaker reset` (any process) closes it for every worker.
  ASSERT_TRUE(PersistBreakerReset(*db_, Now()).IsOk());
  clock_.AdvanceSeconds(1);
  for (int i = 0; i < 4; ++i) runner_.Push(Success());
  c = RunWorker();
  EXPECT_EQ(c.succeeded, 4);
  EXPECT_FALSE(worker_->BreakerOpen());
  for (int64_t id : ids) EXPECT_EQ(Job(id).state, JobState::kSucceeded);
}

int64_t RssKb() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

TEST_F(WorkerTest, RssStaysFlatOver200Jobs) {
  options_.exit_when_idle = true;
  auto batch = [&](int from, int n) {
    for (int i = from; i < from + n; ++i) {
      Submit("rss" + std::to_string(i));
      runner_.Push(Success(1'000));
    }
    return RunWorker();
  };
  EXPECT_EQ(batch(0, 20).succeeded, 20);  // warm-up: allocator pools, SQLite caches
  const int64_t before = RssKb();
  EXPECT_EQ(batch(20, 180).succeeded, 180);
  const int64_t after = RssKb();
  std::printf("[ worker ] RSS after 20 jobs %lld KiB, after 200 jobs %lld KiB\n",
              static_cast<long long>(before), static_cast<long long>(after));
  EXPECT_LT(after - before, 4 * 1024) << "the worker's memory grows with the number of jobs it ran";
}

}  // namespace
}  // namespace kestrel::jobs
