// Worker tests of environment failures, quarantine and drain (issue 31;
// docs/jobs.md "Quarantine and drain"), on worker_test_fixture.h.
#include <gtest/gtest.h>

#include "jobs/retry.h"
#include "worker_test_fixture.h"

namespace kestrel::jobs {
namespace {

FakeChildScript CannotLoad() {
  FakeChildScript s;
  s.exit_at_ms = 5;
  s.exit.exit_code = kExitCannotStart;  // the dynamic loader's exit
  return s;
}

TEST_F(WorkerTest, LoaderFailuresSpendNoRetriesAndQuarantineTheHostAfterK) {
  options_.exit_when_idle = true;
  options_.host = "broken";
  options_.fingerprint_json = R"({"os":"test"})";
  options_.fingerprint_hash = "fp-broken";
  const int64_t a = Submit("a"), b = Submit("b"), c = Submit("c"), d = Submit("d");
  for (int i = 0; i < 3; ++i) runner_.Push(CannotLoad());
  auto counters = RunWorker();
  // Three jobs failed here once each (none twice: each is excluded from this
  // host after its environment failure), then the host is quarantined and
  // the worker exits idle with the fourth job still queued.
  EXPECT_EQ(counters.claimed, 3);
  EXPECT_TRUE(worker_->Quarantined());
  for (int64_t id : {a, b, c}) {
    auto j = Job(id);
    EXPECT_EQ(j.state, JobState::kFailedRetryable) << id;
    EXPECT_EQ(j.retries_used, 0) << "environment failures do not spend the job's retries";
    EXPECT_EQ(j.infra_retries_used, 1);
    auto at = Attempts(id);
    ASSERT_EQ(at.size(), 1u);
    EXPECT_EQ(at[0].reason, "environment");
    EXPECT_EQ(at[0].host, "broken");
    EXPECT_EQ(at[0].fingerprint, "fp-broken");
  }
  EXPECT_EQ(Job(d).state, JobState::kQueued);
  auto hosts = db_->ListHosts();
  ASSERT_TRUE(hosts.IsOk());
  ASSERT_EQ(hosts->size(), 1u);
  EXPECT_EQ((*hosts)[0].env_failures, 3);
  EXPECT_GT((*hosts)[0].quarantined_ms, 0);
  EXPECT_EQ(*db_->GetFingerprint("fp-broken"), options_.fingerprint_json);

  // A healthy host runs all four; the quarantined one claims nothing.
  options_.host = "healthy";
  options_.id = "w2";
  for (int i = 0; i < 4; ++i) runner_.Push(Success());
  auto healthy = RunWorker();
  EXPECT_EQ(healthy.succeeded, 4);
  for (int64_t id : {a, b, c, d}) EXPECT_EQ(Job(id).state, JobState::kSucceeded) << id;
}

TEST_F(WorkerTest, AFailingPreflightCountsAnEnvironmentFailureAndClaimsNothing) {
  options_.host = "h";
  options_.preflight = [] { return Status::FailedPrecondition("libtorch_cpu.so does not load"); };
  const int64_t id = Submit("a");
  StoreFactory factory = [this]() { return store::MetadataStore::Open(url_); };
  Worker w(factory, runner_, clock_, options_);
  std::atomic<bool> never{false};
  Status s = w.Run(never);
  EXPECT_EQ(s.Code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.Message().find("libtorch_cpu.so"), std::string::npos) << s.ToString();
  EXPECT_EQ(Job(id).state, JobState::kQueued);
  EXPECT_TRUE(runner_.Children().empty());
  auto hosts = db_->ListHosts();
  ASSERT_TRUE(hosts.IsOk());
  ASSERT_EQ(hosts->size(), 1u);
  EXPECT_EQ((*hosts)[0].env_failures, 1);
}

TEST_F(WorkerTest, ADrainedWorkerFinishesItsRunningJobClaimsNothingAndExits) {
  options_.devices = *ParseDevices("cpu");
  const int64_t first = Submit("a"), second = Submit("b");
  store::WorkerRecord rec;
  rec.id = "w1";
  rec.host = "test";
  ASSERT_TRUE(db_->UpsertWorker(rec).IsOk());
  // The drain arrives while the first job runs (its child's first progress
  // line: the worker renews leases only on heartbeats, so the hook runs on
  // the slot thread before the second claim).
  auto hooks = std::make_shared<HookedStore::Hooks>();
  int claims = 0;
  hooks->before_claim = [&]() -> Status {
    if (++claims == 1) {
      auto d = db_->SetDrain("w1", true, Now());
      EXPECT_TRUE(d.IsOk());
    }
    return {};
  };
  runner_.Push(Success());
  runner_.Push(Success());
  auto c = RunWorker(hooks);  // returns: a drained worker exits (OK) without exit_when_idle
  EXPECT_EQ(c.succeeded, 1);
  EXPECT_TRUE(worker_->Draining());
  EXPECT_EQ(Job(first).state, JobState::kSucceeded);
  EXPECT_EQ(Job(second).state, JobState::kQueued);
  auto workers = db_->ListWorkers();
  ASSERT_TRUE(workers.IsOk());
  EXPECT_GT((*workers)[0].stopped_ms, 0);
  // undrain: the same worker id claims again.
  ASSERT_TRUE(db_->SetDrain("w1", false, Now()).IsOk());
  options_.exit_when_idle = true;
  auto again = RunWorker();
  EXPECT_EQ(again.succeeded, 1);
  EXPECT_EQ(Job(second).state, JobState::kSucceeded);
}

}  // namespace
}  // namespace kestrel::jobs
