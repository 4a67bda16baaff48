// Hosts in the store (issue 31, migration 15; docs/jobs.md "Quarantine and
// drain"): environment failures counted to a quarantine, a job kept off the
// host it failed on with an environment failure (until an unquarantine),
// drains by worker id and by host, fingerprints once per hash. Both engines.
#include "job_store_fixture.h"

namespace kestrel::store {
namespace {

class HostStoreTest : public JobStoreTest {};

AttemptOutcome EnvironmentFailure() {
  AttemptOutcome o;
  o.failure_class = FailureClass::kRetryable;
  o.infrastructure = true;
  o.reason = FailureReason::kEnvironment;
  o.exit_code = 127;
  o.message = "libtorch_cpu.so: cannot open shared object file";
  return o;
}

TEST_P(HostStoreTest, EnvironmentFailuresQuarantineTheHostAtTheLimitUntilUnquarantined) {
  for (int i = 1; i <= 2; ++i) {
    auto h = store_->RecordEnvironmentFailure("gpu-3", "loader error " + std::to_string(i), 3, Now());
    ASSERT_TRUE(h.IsOk()) << h.GetStatus().ToString();
    EXPECT_EQ(h->env_failures, i);
    EXPECT_EQ(h->quarantined_ms, 0);
  }
  auto h = store_->RecordEnvironmentFailure("gpu-3", "loader error 3", 3, Now());
  ASSERT_TRUE(h.IsOk());
  EXPECT_GT(h->quarantined_ms, 0);
  EXPECT_NE(h->quarantine_reason.find("3 environment failure(s)"), std::string::npos) << h->quarantine_reason;
  EXPECT_NE(h->quarantine_reason.find("loader error 3"), std::string::npos);
  auto c = store_->GetWorkerControl("gpu-3:77", "gpu-3");
  ASSERT_TRUE(c.IsOk());
  EXPECT_TRUE(c->quarantined);
  EXPECT_FALSE(c->draining);
  EXPECT_EQ(c->reason, h->quarantine_reason);
  // Another host is untouched; an unknown host is neither drained nor quarantined.
  auto other = store_->GetWorkerControl("w", "gpu-4");
  ASSERT_TRUE(other.IsOk());
  EXPECT_FALSE(other->quarantined);

  auto u = store_->UnquarantineHost("gpu-3", Now());
  ASSERT_TRUE(u.IsOk());
  EXPECT_EQ(u->env_failures, 0);
  EXPECT_EQ(u->quarantined_ms, 0);
  EXPECT_FALSE(store_->GetWorkerControl("gpu-3:77", "gpu-3")->quarantined);
  EXPECT_EQ(store_->UnquarantineHost("nowhere", Now()).GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->RecordEnvironmentFailure("", "x", 3, Now()).GetStatus().Code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->RecordEnvironmentFailure("h", "x", 0, Now()).GetStatus().Code(),
            StatusCode::kInvalidArgument);
  auto hosts = store_->ListHosts();
  ASSERT_TRUE(hosts.IsOk());
  ASSERT_EQ(hosts->size(), 1u);
  EXPECT_EQ((*hosts)[0].host, "gpu-3");
}

TEST_P(HostStoreTest, AJobIsNotClaimedAgainOnTheHostOfItsEnvironmentFailure) {
  const JobRecord job = Submit(Spec(R"({"epochs":1})"));
  auto c = Claim("a");  // host "host-a"
  ASSERT_TRUE(c.IsOk());
  clock_.AdvanceMicros(1000);
  auto done = store_->CompleteAttempt(job.id, c->job.attempt, "a", EnvironmentFailure(), Now());
  ASSERT_TRUE(done.IsOk()) << done.GetStatus().ToString();
  EXPECT_EQ(done->state, JobState::kFailedRetryable);
  EXPECT_EQ(done->retries_used, 0) << "an environment failure spends the infrastructure budget";
  EXPECT_EQ(done->infra_retries_used, 1);
  // A second worker of the same host is refused; a worker elsewhere gets it.
  ClaimRequest same;
  same.worker = "a2";
  same.host = "host-a";
  same.devices = {{"cpu", 0, 0}};
  same.now_ms = Now();
  EXPECT_EQ(store_->ClaimJob(same).GetStatus().Code(), StatusCode::kNotFound);
  // After an unquarantine the host may take it again (it was fixed).
  ASSERT_TRUE(store_->RecordEnvironmentFailure("host-a", "loader", 3, Now()).IsOk());
  clock_.AdvanceMicros(1000);
  ASSERT_TRUE(store_->UnquarantineHost("host-a", Now()).IsOk());
  same.now_ms = Now();
  same.fingerprint = "fp-1";
  auto again = store_->ClaimJob(same);
  ASSERT_TRUE(again.IsOk()) << again.GetStatus().ToString();
  EXPECT_EQ(again->job.id, job.id);
  auto attempts = store_->ListAttempts(job.id);
  ASSERT_TRUE(attempts.IsOk());
  ASSERT_EQ(attempts->size(), 2u);
  EXPECT_EQ((*attempts)[0].reason, "environment");
  EXPECT_EQ((*attempts)[1].fingerprint, "fp-1");
}

TEST_P(HostStoreTest, AnotherHostClaimsTheExcludedJob) {
  const JobRecord job = Submit(Spec(R"({"epochs":1})"));
  auto c = Claim("a");
  ASSERT_TRUE(c.IsOk());
  ASSERT_TRUE(store_->CompleteAttempt(job.id, c->job.attempt, "a", EnvironmentFailure(), Now()).IsOk());
  EXPECT_EQ(Claim("a").GetStatus().Code(), StatusCode::kNotFound);
  auto b = Claim("b");
  ASSERT_TRUE(b.IsOk());
  EXPECT_EQ(b->job.id, job.id);
}

TEST_P(HostStoreTest, DrainByIdOrHostAndUndrain) {
  for (const char* id : {"h1:1", "h1:2", "h2:1"}) {
    WorkerRecord w;
    w.id = id;
    w.host = std::string(id).substr(0, 2);
    w.fingerprint = "abc";
    ASSERT_TRUE(store_->UpsertWorker(w).IsOk());
  }
  auto one = store_->SetDrain("h2:1", true, Now());
  ASSERT_TRUE(one.IsOk()) << one.GetStatus().ToString();
  EXPECT_EQ(*one, std::vector<std::string>{"h2:1"});
  EXPECT_TRUE(store_->GetWorkerControl("h2:1", "h2")->draining);
  EXPECT_FALSE(store_->GetWorkerControl("h1:1", "h1")->draining);
  // A heartbeat (UpsertWorker) does not clear a drain.
  WorkerRecord again;
  again.id = "h2:1";
  again.host = "h2";
  ASSERT_TRUE(store_->UpsertWorker(again).IsOk());
  EXPECT_TRUE(store_->GetWorkerControl("h2:1", "h2")->draining);

  auto host = store_->SetDrain("h1", true, Now());
  ASSERT_TRUE(host.IsOk());
  EXPECT_EQ(*host, (std::vector<std::string>{"h1:1", "h1:2"}));
  EXPECT_TRUE(store_->GetWorkerControl("h1:2", "h1")->draining);
  EXPECT_TRUE(store_->GetWorkerControl("h1:9", "h1")->draining) << "a worker started later on the host";
  auto workers = store_->ListWorkers();
  ASSERT_TRUE(workers.IsOk());
  EXPECT_EQ((*workers)[0].fingerprint, "abc");
  EXPECT_GT((*workers)[2].drain_ms, 0);

  ASSERT_TRUE(store_->SetDrain("h1", false, Now()).IsOk());
  EXPECT_FALSE(store_->GetWorkerControl("h1:2", "h1")->draining);
  ASSERT_TRUE(store_->SetDrain("h2:1", false, Now()).IsOk());
  EXPECT_FALSE(store_->GetWorkerControl("h2:1", "h2")->draining);
  EXPECT_EQ(store_->SetDrain("nobody", true, Now()).GetStatus().Code(), StatusCode::kNotFound);
}

TEST_P(HostStoreTest, FingerprintsAreStoredOncePerHash) {
  ASSERT_TRUE(store_->PutFingerprint("h1", R"({"os":"a"})", Now()).IsOk());
  ASSERT_TRUE(store_->PutFingerprint("h1", R"({"os":"b"})", Now()).IsOk());
  auto f = store_->GetFingerprint("h1");
  ASSERT_TRUE(f.IsOk());
  EXPECT_EQ(*f, R"({"os":"a"})");
  EXPECT_EQ(store_->GetFingerprint("nope").GetStatus().Code(), StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Backends, HostStoreTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kestrel::store
