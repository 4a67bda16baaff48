// The job-store suite, run against every backend: SQLite always, PostgreSQL
// when KESTREL_TEST_PG holds a libpq URL (scripts/pg-test-server.sh start).
// Each PostgreSQL test gets its own schema, so tests may run in parallel.
// Recovery figures (lost workers, MTTR, stats) are in job_store_recovery_test.cc.
#include <cmath>

#include "job_store_fixture.h"

namespace kestrel::store {
namespace {

TEST_P(JobStoreTest, MigratesAndKeepsDatasetRegistry) {
  EXPECT_EQ(*store_->SchemaVersion(), LatestSchemaVersion());
  DatasetVersionRecord r;
  r.dataset = "birds";
  r.version_id = Sha256Hex("a");
  r.manifest_sha = r.report_sha = Sha256Hex("m");
  r.summary_json = "{}";
  bool created = false;
  EXPECT_EQ(store_->AddDatasetVersion(r, &created)->seq, 1);
  EXPECT_TRUE(created);
  r.version_id = Sha256Hex("b");
  EXPECT_EQ(store_->AddDatasetVersion(r, &created)->seq, 2);
  r.version_id = Sha256Hex("a");
  EXPECT_EQ(store_->AddDatasetVersion(r, &created)->seq, 1);
  EXPECT_FALSE(created);
  EXPECT_EQ(store_->ListDatasets()->at(0).num_versions, 2);
  EXPECT_EQ(store_->GetVersion("birds", "v2")->version_id, Sha256Hex("b"));
  // A second open of a migrated database applies nothing.
  auto again = Open();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(*again->SchemaVersion(), LatestSchemaVersion());
}

TEST_P(JobStoreTest, SettingsAreSharedAndOverwritten) {
  EXPECT_EQ(store_->GetSetting("breaker.reset_ms").GetStatus().Code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->PutSetting("breaker.reset_ms", "123", 1).IsOk());
  ASSERT_TRUE(store_->PutSetting("breaker.reset_ms", "456", 2).IsOk());
  EXPECT_FALSE(store_->PutSetting("", "x", 3).IsOk());
  // Another connection sees the last value.
  auto again = Open();
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(*again->GetSetting("breaker.reset_ms"), "456");
}

TEST_P(JobStoreTest, CompareAndSetSettingWritesOnlyOnMatch) {
  // Unset: only an "expect unset" CAS may create it.
  EXPECT_FALSE(*store_->CompareAndSetSetting("cursor", std::string("0"), "1", 1));
  EXPECT_EQ(store_->GetSetting("cursor").GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_TRUE(*store_->CompareAndSetSetting("cursor", std::nullopt, "1", 1));
  EXPECT_FALSE(*store_->CompareAndSetSetting("cursor", std::nullopt, "9", 2));
  EXPECT_EQ(*store_->GetSetting("cursor"), "1");
  // Set: the expected value must match exactly.
  EXPECT_FALSE(*store_->CompareAndSetSetting("cursor", std::string("0"), "9", 3));
  EXPECT_TRUE(*store_->CompareAndSetSetting("cursor", std::string("1"), "2", 3));
  EXPECT_FALSE(*store_->CompareAndSetSetting("cursor", std::string("1"), "3", 4));
  EXPECT_EQ(*store_->GetSetting("cursor"), "2");
  EXPECT_FALSE(store_->CompareAndSetSetting("", std::nullopt, "x", 5).IsOk());
}

TEST_P(JobStoreTest, CompareAndSetSettingLosesNoIncrementUnderContention) {
  // 8 connections increment one counter with read + CAS loops: a lost update
  // (two CAS from the same old value both winning) would show as a short total.
  constexpr int kThreads = 8, kEach = 25;
  std::atomic<int> failures{0}, wins{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      auto s = Open();
      if (s == nullptr) {
        ++failures;
        return;
      }
      for (int i = 0; i < kEach; ++i) {
        while (true) {
          auto cur = s->GetSetting("counter");
          std::optional<std::string> expected;
          if (cur.IsOk()) expected = *cur;
          int64_t next = (cur.IsOk() ? std::stoll(*cur) : 0) + 1;
          auto r = s->CompareAndSetSetting("counter", expected, std::to_string(next), next);
          if (!r.IsOk()) {
            ++failures;
            return;
          }
          if (*r) {
            ++wins;
            break;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(wins.load(), kThreads * kEach);
  EXPECT_EQ(*store_->GetSetting("counter"), std::to_string(kThreads * kEach));
}

TEST_P(JobStoreTest, ClaimsByPriorityThenFifo) {
  int64_t low = Submit(Spec(R"({"n":1})", JobPriority::kLow)).id;
  int64_t n1 = Submit(Spec(R"({"n":2})")).id;
  int64_t high = Submit(Spec(R"({"n":3})", JobPriority::kHigh)).id;
  int64_t n2 = Submit(Spec(R"({"n":4})")).id;
  std::vector<int64_t> order;
  for (int i = 0; i < 4; ++i) {
    auto c = Claim("w");
    ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    EXPECT_EQ(c->job.attempt, 1);
    EXPECT_EQ(c->job.state, JobState::kRunning);
    order.push_back(c->job.id);
  }
  EXPECT_EQ(order, (std::vector<int64_t>{high, n1, n2, low}));
  EXPECT_EQ(Claim("w").GetStatus().Code(), StatusCode::kNotFound);
}

TEST_P(JobStoreTest, SubmitIsIdempotentWhileLive) {
  bool created = false;
  auto a = store_->SubmitJob(Spec(R"({"lr0":0.01,"epochs":5})"), Now(), &created);
  ASSERT_TRUE(a.IsOk());
  EXPECT_TRUE(created);
  // Same config with keys in another order and other whitespace: same job.
  auto b = store_->SubmitJob(Spec(R"({ "epochs": 5, "lr0": 0.01 })"), Now(), &created);
  EXPECT_FALSE(created);
  EXPECT_EQ(b->id, a->id);
  EXPECT_EQ(b->dedup_key, *JobDedupKey(Spec(R"({"lr0":0.01,"epochs":5})")));
  // The key computed before migration 10, when min_map50 rode in the config.
  EXPECT_EQ(b->dedup_key,
            Sha256Hex(Sha256Hex("birds") + "\n" + R"({"epochs":5,"lr0":0.01,"min_map50":0.0})"));
  // Running is still live.
  auto c = Claim("w");
  ASSERT_TRUE(c.IsOk());
  EXPECT_EQ(store_->SubmitJob(Spec(R"({"epochs":5,"lr0":0.01})"), Now(), &created)->id, a->id);
  EXPECT_FALSE(created);
  // Finished: a new submission is a new job.
  ASSERT_TRUE(store_->CompleteAttempt(a->id, 1, "w", Ok(), Now()).IsOk());
  auto d = store_->SubmitJob(Spec(R"({"epochs":5,"lr0":0.01})"), Now(), &created);
  EXPECT_TRUE(created);
  EXPECT_NE(d->id, a->id);
  EXPECT_EQ(store_->SubmitJob(Spec("not json"), Now(), &created).GetStatus().Code(),
            StatusCode::kInvalidArgument);
}

// min_map50 is a job column (migration 10), not a config key, and still part
// of what makes two submissions the same job.
TEST_P(JobStoreTest, MinMap50IsAColumnAndKeepsSubmitsThatDifferInItApart) {
  bool created = false;
  JobSpec gated = Spec(R"({"epochs":5})");
  gated.min_map50 = 0.25;
  auto a = store_->SubmitJob(gated, Now(), &created);
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  EXPECT_TRUE(created);
  EXPECT_EQ(a->spec.min_map50, 0.25);
  EXPECT_EQ(a->spec.config_json, R"({"epochs":5})");
  EXPECT_EQ(store_->GetJob(a->id)->spec.min_map50, 0.25);
  EXPECT_EQ(a->dedup_key, Sha256Hex(Sha256Hex("birds") + "\n" + R"({"epochs":5,"min_map50":0.25})"));
  // Only the gate differs: another job.
  JobSpec stricter = gated;
  stricter.min_map50 = 0.5;
  auto b = store_->SubmitJob(stricter, Now(), &created);
  ASSERT_TRUE(b.IsOk()) << b.GetStatus().ToString();
  EXPECT_TRUE(created);
  EXPECT_NE(b->id, a->id);
  // The same gate again while live: the same job.
  auto c = store_->SubmitJob(gated, Now(), &created);
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  EXPECT_FALSE(created);
  EXPECT_EQ(c->id, a->id);
  auto claimed = Claim("w");
  ASSERT_TRUE(claimed.IsOk()) << claimed.GetStatus().ToString();
  EXPECT_EQ(claimed->job.id, a->id);
  EXPECT_EQ(claimed->job.spec.min_map50, 0.25) << "the worker's claim carries the gate";
  // Any double comes back exactly (17 digits of text).
  JobSpec odd = Spec(R"({"epochs":6})");
  odd.min_map50 = 0.1 + 0.2;
  auto d = store_->SubmitJob(odd, Now(), &created);
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  EXPECT_EQ(store_->GetJob(d->id)->spec.min_map50, 0.1 + 0.2);
  // One home for the gate, and a range.
  Status both = store_->SubmitJob(Spec(R"({"epochs":5,"min_map50":0.25})"), Now(), &created).GetStatus();
  EXPECT_EQ(both.Code(), StatusCode::kInvalidArgument) << both.ToString();
  EXPECT_EQ(both.Where().field, "min_map50") << both.ToString();
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    JobSpec s = Spec(R"({"epochs":8})");
    s.min_map50 = bad;
    Status st = store_->SubmitJob(s, Now(), &created).GetStatus();
    EXPECT_EQ(st.Code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(st.Where().field, "min_map50") << bad;
  }
}

TEST_P(JobStoreTest, TenConcurrentIdenticalSubmitsFromThreadsMakeOneJob) {
  constexpr int kN = 10;
  std::vector<int64_t> ids(kN, 0);
  std::vector<int> made(kN, 0);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      auto s = MetadataStore::Open(url_);
      if (!s.IsOk()) return;
      ++ready;
      while (ready.load() < kN) std::this_thread::yield();
      bool created = false;
      auto j = (*s)->SubmitJob(Spec(R"({"same":true})"), 1000, &created);
      if (j.IsOk()) {
        ids[static_cast<size_t>(i)] = j->id;
        made[static_cast<size_t>(i)] = created ? 1 : 0;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(std::set<int64_t>(ids.begin(), ids.end()).size(), 1u);
  EXPECT_NE(ids[0], 0);
  EXPECT_EQ(std::accumulate(made.begin(), made.end(), 0), 1);
  EXPECT_EQ(store_->ListJobs({})->size(), 1u);
}

TEST_P(JobStoreTest, TenConcurrentIdenticalSubmitsFromProcessesMakeOneJob) {
  constexpr int kN = 10;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < kN; ++i) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]);
      int code = 3;
      {
        auto s = MetadataStore::Open(url_);
        char c;
        if (::read(go[0], &c, 1) == 0 && s.IsOk()) {  // EOF = start signal
          bool created = false;
          auto j = (*s)->SubmitJob(Spec(R"({"same":"process"})"), 1000, &created);
          code = j.IsOk() ? (created ? 1 : 0) : 2;
        }
      }
      ::_exit(code);  // never run the parent's destructors (its connection)
    }
    kids.push_back(pid);
  }
  ::close(go[0]);
  ::close(go[1]);  // all children start at once
  int created = 0;
  for (pid_t pid : kids) {
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st));
    ASSERT_LE(WEXITSTATUS(st), 1) << "child failed to submit";
    created += WEXITSTATUS(st);
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(store_->ListJobs({})->size(), 1u);
}

TEST_P(JobStoreTest, ExpiredLeaseIsReclaimedByAnotherWorker) {
  int64_t id = Submit(Spec("{}")).id;
  auto a = Claim("w1", 1000);
  ASSERT_TRUE(a.IsOk());
  EXPECT_EQ(a->job.lease_until_ms, Now() + 1000);
  clock_.AdvanceMicros(999'000);
  EXPECT_EQ(Claim("w2", 1000).GetStatus().Code(), StatusCode::kNotFound);
  clock_.AdvanceMicros(1'000);
  auto b = Claim("w2", 1000);
  ASSERT_TRUE(b.IsOk()) << b.GetStatus().ToString();
  EXPECT_EQ(b->job.id, id);
  EXPECT_EQ(b->job.attempt, 2);
  EXPECT_EQ(b->job.lease_owner, "w2");
  EXPECT_EQ(b->job.infra_retries_used, 1);
  EXPECT_EQ(b->job.retries_used, 0);
  auto attempts = *store_->ListAttempts(id);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].worker, "w1");
  EXPECT_EQ(attempts[0].reason, "lease_expired");
  EXPECT_TRUE(attempts[0].infrastructure);
  // Never renewed: last known alive at its claim, detected at the expiry
  // (here the same moment as the re-claim).
  EXPECT_EQ(attempts[0].ended_ms, attempts[0].started_ms);
  EXPECT_EQ(attempts[0].detected_ms, Now());
  EXPECT_EQ(attempts[1].worker, "w2");
  EXPECT_EQ(attempts[1].started_ms, Now());
  EXPECT_EQ(attempts[1].ended_ms, 0);
  EXPECT_EQ(attempts[1].detected_ms, 0);
}

// The issue's lost worker: w1 renews every 10 s with a 30 s lease, dies 5 s
// after its last renewal, nobody looks until 25 s after the lease ran out,
// and the next attempt succeeds 2.3 s after the re-claim. The lost attempt
// must end at its last renewal (not at the re-claim), be detected at the
// lease expiry, and the two recovery figures must say 25 s to restart and
// 57.3 s from the failure to success (they used to say 2.3 s).
TEST_P(JobStoreTest, AttemptPidIsRecordedOnlyForTheWorkerRunningIt) {
  int64_t id = Submit(Spec("{}")).id;
  ASSERT_TRUE(Claim("w1").IsOk());
  EXPECT_EQ(store_->ListAttempts(id)->at(0).pid, 0);
  EXPECT_EQ(store_->RecordAttemptPid(id, 1, "w2", 77).Code(), StatusCode::kAborted);
  EXPECT_EQ(store_->RecordAttemptPid(id, 2, "w1", 77).Code(), StatusCode::kAborted);
  EXPECT_EQ(store_->RecordAttemptPid(id, 1, "w1", 0).Code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(store_->RecordAttemptPid(id, 1, "w1", 77).IsOk());
  auto a = store_->ListAttempts(id)->at(0);
  EXPECT_EQ(a.pid, 77);
  EXPECT_EQ(a.host, "host-w1");
  // A completion without a pid keeps it; one with a pid sets it.
  AttemptOutcome o = Fail(FailureClass::kRetryable, FailureReason::kOom);
  ASSERT_TRUE(store_->CompleteAttempt(id, 1, "w1", o, Now()).IsOk());
  EXPECT_EQ(store_->ListAttempts(id)->at(0).pid, 77);
  EXPECT_EQ(store_->RecordAttemptPid(id, 1, "w1", 78).Code(), StatusCode::kAborted) << "attempt ended";
  clock_.AdvanceSeconds(300);  // the default first backoff
  ASSERT_TRUE(Claim("w1").IsOk());
  o.pid = 99;
  ASSERT_TRUE(store_->CompleteAttempt(id, 2, "w1", o, Now()).IsOk());
  EXPECT_EQ(store_->ListAttempts(id)->at(1).pid, 99);
}

// PostgreSQL claims the ready head in one statement and falls back to a
// transaction when a lease has expired; SQLite always takes the
// transaction. Whichever path ran, the job, its attempt row and its state
// event must read the same, and an expired job still comes before a later
// ready one.
TEST_P(JobStoreTest, BothClaimPathsRecordTheSameAttemptAndEvent) {
  int64_t a = Submit(Spec(R"({"n":1})")).id;
  int64_t b = Submit(Spec(R"({"n":2})")).id;
  auto first = Claim("w1", 1000);  // a, nothing expired: PostgreSQL's one-statement path
  ASSERT_TRUE(first.IsOk()) << first.GetStatus().ToString();
  EXPECT_EQ(first->job.id, a);
  clock_.AdvanceMicros(1'000'000);
  auto again = Claim("w2", 5000);  // a's lease expired: the transaction, and a before b
  ASSERT_TRUE(again.IsOk()) << again.GetStatus().ToString();
  EXPECT_EQ(again->job.id, a);
  EXPECT_EQ(again->job.attempt, 2);
  auto next = Claim("w3", 7000);  // b, through the one-statement path again
  ASSERT_TRUE(next.IsOk()) << next.GetStatus().ToString();
  EXPECT_EQ(next->job.id, b);
  for (const auto* c : {&*first, &*again, &*next}) {
    EXPECT_EQ(c->job.state, JobState::kRunning);
    EXPECT_EQ(c->device.kind, "cpu");
    auto stored = store_->GetJob(c->job.id);
    ASSERT_TRUE(stored.IsOk());
    if (c != &*first) {  // first's row has moved on to attempt 2
      EXPECT_EQ(stored->attempt, c->job.attempt);
      EXPECT_EQ(stored->lease_owner, c->job.lease_owner);
      EXPECT_EQ(stored->lease_until_ms, c->job.lease_until_ms);
      EXPECT_EQ(stored->updated_ms, Now());
    }
  }
  EXPECT_EQ(next->job.lease_owner, "w3");
  EXPECT_EQ(next->job.lease_until_ms, Now() + 7000);
  auto attempts = *store_->ListAttempts(b);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(attempts[0].attempt, 1);
  EXPECT_EQ(attempts[0].worker, "w3");
  EXPECT_EQ(attempts[0].host, "host-w3");
  EXPECT_EQ(attempts[0].started_ms, Now());
  EXPECT_EQ(attempts[0].ended_ms, 0);
  std::vector<std::string> running;
  auto events = store_->ReadEvents(0, 0, 100);
  ASSERT_TRUE(events.IsOk()) << events.GetStatus().ToString();
  for (const auto& e : *events) {
    if (e.kind == "state" && e.payload_json.find("running") != std::string::npos) {
      running.push_back(std::to_string(e.job_id) + " " + e.payload_json);
    }
  }
  EXPECT_EQ(running, (std::vector<std::string>{std::to_string(a) + R"( {"attempt":1,"state":"running"})",
                                               std::to_string(a) + R"( {"attempt":2,"state":"running"})",
                                               std::to_string(b) + R"( {"attempt":1,"state":"running"})"}));
}

TEST_P(JobStoreTest, StaleWorkerIsFencedOff) {
  int64_t id = Submit(Spec("{}")).id;
  ASSERT_TRUE(Claim("w1", 1000).IsOk());
  EXPECT_TRUE(store_->RenewLease(id, 1, "w1", Now() + 500, 1000).IsOk());
  clock_.AdvanceMicros(1'600'000);
  ASSERT_EQ(Claim("w2", 1000)->job.attempt, 2);
  // The stale worker wakes up: every write of attempt 1 is rejected.
  EXPECT_EQ(store_->RenewLease(id, 1, "w1", Now(), 1000).Code(), StatusCode::kAborted);
  auto stale = store_->CompleteAttempt(id, 1, "w1", Ok(R"({"stale":true})"), Now());
  EXPECT_EQ(stale.GetStatus().Code(), StatusCode::kAborted);
  // Even claiming to be attempt 2 without holding the lease fails.
  EXPECT_EQ(store_->CompleteAttempt(id, 2, "w1", Ok(), Now()).GetStatus().Code(), StatusCode::kAborted);
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, JobState::kRunning);
  EXPECT_EQ(job.attempt, 2);
  EXPECT_EQ(job.lease_owner, "w2");
  EXPECT_EQ(job.result_json, "");
  EXPECT_TRUE(store_->RenewLease(id, 2, "w2", Now(), 1000).IsOk());
  auto done = store_->CompleteAttempt(id, 2, "w2", Ok(R"({"fresh":true})"), Now());
  ASSERT_TRUE(done.IsOk()) << done.GetStatus().ToString();
  EXPECT_EQ(done->state, JobState::kSucceeded);
  // After success, a late duplicate cannot overwrite the result either.
  EXPECT_EQ(store_->CompleteAttempt(id, 2, "w2", Ok(R"({"dup":1})"), Now()).GetStatus().Code(),
            StatusCode::kAborted);
  EXPECT_EQ(store_->GetJob(id)->result_json, R"({"fresh":true})");
}

TEST_P(JobStoreTest, RetriesBackOffThenFailPermanently) {
  JobSpec spec = Spec("{}");
  spec.retry.max_retries = 2;
  spec.retry.backoff_ms = {1000, 5000};
  int64_t id = Submit(spec).id;
  ASSERT_TRUE(Claim("w").IsOk());
  auto r1 = store_->CompleteAttempt(id, 1, "w", Fail(FailureClass::kRetryable, FailureReason::kOom), Now());
  ASSERT_TRUE(r1.IsOk());
  EXPECT_EQ(r1->state, JobState::kFailedRetryable);
  EXPECT_EQ(r1->not_before_ms, Now() + 1000);
  EXPECT_EQ(r1->retries_used, 1);
  clock_.AdvanceMicros(999'000);
  EXPECT_EQ(Claim("w").GetStatus().Code(), StatusCode::kNotFound);
  clock_.AdvanceMicros(1'000);
  EXPECT_EQ(Claim("w", 90'000, /*allow_retries=*/false).GetStatus().Code(), StatusCode::kNotFound);
  ASSERT_EQ(Claim("w")->job.attempt, 2);
  auto r2 = store_->CompleteAttempt(id, 2, "w", Fail(FailureClass::kRetryable, FailureReason::kOom), Now());
  EXPECT_EQ(r2->not_before_ms, Now() + 5000);
  clock_.AdvanceSeconds(5);
  ASSERT_EQ(Claim("w")->job.attempt, 3);
  auto r3 = store_->CompleteAttempt(id, 3, "w", Fail(FailureClass::kRetryable, FailureReason::kOom), Now());
  EXPECT_EQ(r3->state, JobState::kFailedPermanent);
  EXPECT_EQ(r3->last_reason, "retries_exhausted: oom");
  EXPECT_EQ(r3->retries_used, 2);
  EXPECT_EQ(r3->finished_ms, Now());
  EXPECT_EQ(Claim("w").GetStatus().Code(), StatusCode::kNotFound);
}

// The outcome's reason is a type; the store writes its token, so the rows
// read as earlier versions wrote them (attempts.reason, jobs.last_reason).
TEST_P(JobStoreTest, OutcomeReasonIsStoredAsItsToken) {
  int n = 0;
  for (const FailureInfo& e : FailureTable()) {
    if (e.reason == FailureReason::kNone) continue;
    const int64_t id = Submit(Spec(R"({"reason_case":)" + std::to_string(++n) + "}")).id;
    auto claimed = Claim("w");
    ASSERT_TRUE(claimed.IsOk()) << e.token << ": " << claimed.GetStatus().ToString();
    ASSERT_EQ(claimed->job.id, id) << e.token;
    auto r = store_->CompleteAttempt(id, 1, "w", Fail(FailureClass::kPermanent, e.reason), Now());
    ASSERT_TRUE(r.IsOk()) << e.token << ": " << r.GetStatus().ToString();
    EXPECT_EQ(r->last_reason, e.token);
    EXPECT_EQ(store_->GetJob(id)->last_reason, e.token);
    auto a = store_->ListAttempts(id);
    ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
    ASSERT_EQ(a->size(), 1u);
    EXPECT_EQ(a->at(0).reason, e.token);
    EXPECT_EQ(ParseFailureReason(a->at(0).reason), e.reason) << e.token;
  }
  EXPECT_EQ(n, static_cast<int>(FailureTable().size()) - 1);
}

TEST_P(JobStoreTest, PermanentFailureIsFinal) {
  int64_t id = Submit(Spec("{}")).id;
  ASSERT_TRUE(Claim("w").IsOk());
  auto r =
      store_->CompleteAttempt(id, 1, "w", Fail(FailureClass::kPermanent, FailureReason::kBadConfig), Now());
  EXPECT_EQ(r->state, JobState::kFailedPermanent);
  EXPECT_EQ(r->retries_used, 0);
  auto a = store_->ListAttempts(id)->at(0);
  EXPECT_EQ(a.failure_class, FailureClass::kPermanent);
  EXPECT_EQ(a.stage, FailureStage::kTrain);
  EXPECT_EQ(a.exit_code, 1);
}

TEST_P(JobStoreTest, InfraFailuresHaveTheirOwnBudget) {
  JobSpec spec = Spec("{}");
  spec.retry.max_retries = 1;
  spec.retry.max_infra_retries = 2;
  int64_t id = Submit(spec).id;
  ASSERT_TRUE(Claim("w", 1000).IsOk());
  auto r1 = store_->CompleteAttempt(id, 1, "w",
                                    Fail(FailureClass::kRetryable, FailureReason::kWorkerLost, true), Now());
  EXPECT_EQ(r1->state, JobState::kFailedRetryable);
  EXPECT_EQ(r1->not_before_ms, Now());  // no backoff for infrastructure
  EXPECT_EQ(r1->retries_used, 0);
  EXPECT_EQ(r1->infra_retries_used, 1);
  ASSERT_EQ(Claim("w", 1000)->job.attempt, 2);
  clock_.AdvanceSeconds(2);  // lease expires: the second infrastructure failure
  ASSERT_EQ(Claim("w", 1000)->job.attempt, 3);
  EXPECT_EQ(store_->GetJob(id)->infra_retries_used, 2);
  // The normal budget is still whole: one retryable failure is retried.
  auto r3 =
      store_->CompleteAttempt(id, 3, "w", Fail(FailureClass::kRetryable, FailureReason::kIoError), Now());
  EXPECT_EQ(r3->state, JobState::kFailedRetryable);
  clock_.AdvanceSeconds(300);
  ASSERT_EQ(Claim("w", 1000)->job.attempt, 4);
  clock_.AdvanceSeconds(2);  // third infrastructure failure: over the cap
  EXPECT_EQ(Claim("w", 1000).GetStatus().Code(), StatusCode::kNotFound);
  auto job = *store_->GetJob(id);
  EXPECT_EQ(job.state, JobState::kFailedPermanent);
  EXPECT_EQ(job.last_reason, "infra_retries_exhausted: lease_expired");
}

TEST_P(JobStoreTest, CancelQueuedAndRunningThenRetry) {
  int64_t q = Submit(Spec(R"({"a":1})")).id;
  int64_t r = Submit(Spec(R"({"a":2})")).id;
  EXPECT_EQ(store_->CancelJob(q, Now())->state, JobState::kCancelled);
  auto c = Claim("w");
  ASSERT_EQ(c->job.id, r);
  EXPECT_EQ(store_->CancelJob(r, Now())->state, JobState::kCancelled);
  EXPECT_EQ(store_->RenewLease(r, 1, "w", Now(), 1000).Code(), StatusCode::kAborted);
  EXPECT_EQ(store_->CompleteAttempt(r, 1, "w", Ok(), Now()).GetStatus().Code(), StatusCode::kAborted);
  EXPECT_EQ(store_->ListAttempts(r)->at(0).reason, "cancelled");
  EXPECT_EQ(store_->CancelJob(r, Now()).GetStatus().Code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Claim("w").GetStatus().Code(), StatusCode::kNotFound);
  // Manual retry requeues with a fresh budget, unless a twin is live.
  auto again = store_->RetryJob(q, Now());
  ASSERT_TRUE(again.IsOk()) << again.GetStatus().ToString();
  EXPECT_EQ(again->state, JobState::kQueued);
  EXPECT_EQ(Claim("w")->job.id, q);
  bool created = false;
  EXPECT_TRUE(store_->SubmitJob(Spec(R"({"a":2})"), Now(), &created).IsOk());
  EXPECT_EQ(store_->RetryJob(r, Now()).GetStatus().Code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(store_->RetryJob(q, Now()).GetStatus().Code(), StatusCode::kFailedPrecondition);
}

TEST_P(JobStoreTest, EventsAreMonotonicAndReplayable) {
  int64_t id = Submit(Spec("{}")).id;  // event 1: queued
  ASSERT_TRUE(Claim("w").IsOk());      // event 2: running
  for (int e = 0; e < 3; ++e) {
    auto ev = store_->AppendEvent({0, id, 1, "metric", R"({"epoch":)" + std::to_string(e) + "}", Now()});
    ASSERT_TRUE(ev.IsOk());
    EXPECT_EQ(*ev, 3 + e);
  }
  ASSERT_TRUE(store_->CompleteAttempt(id, 1, "w", Ok(), Now()).IsOk());  // event 6
  auto all = *store_->ReadEvents(0, 0, 100);
  ASSERT_EQ(all.size(), 6u);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i].id, static_cast<int64_t>(i + 1));
  EXPECT_EQ(all[0].kind, "state");
  EXPECT_NE(all[0].payload_json.find("queued"), std::string::npos);
  EXPECT_NE(all[5].payload_json.find("succeeded"), std::string::npos);
  auto tail = *store_->ReadEvents(4, id, 100);
  ASSERT_EQ(tail.size(), 2u);
  EXPECT_EQ(tail[0].payload_json, R"({"epoch":2})");
  EXPECT_TRUE(store_->ReadEvents(0, id + 100, 100)->empty());
  // Concurrent appenders get distinct, increasing ids; gap-free on SQLite
  // (a counter row), possibly not on PostgreSQL (a sequence: docs/jobs.md).
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      auto s = MetadataStore::Open(url_);
      for (int k = 0; s.IsOk() && k < 10; ++k)
        EXPECT_TRUE((*s)->AppendEvent({0, id, 1, "log", "{}", 0}).IsOk());
    });
  }
  for (auto& t : threads) t.join();
  auto more = *store_->ReadEvents(6, 0, 1000);
  ASSERT_EQ(more.size(), 40u);
  for (size_t i = 1; i < more.size(); ++i) EXPECT_LT(more[i - 1].id, more[i].id);
  if (GetParam() == "sqlite") {
    for (size_t i = 0; i < more.size(); ++i) EXPECT_EQ(more[i].id, static_cast<int64_t>(7 + i));
  }
}

TEST_P(JobStoreTest, ATailingReaderSkipsNoEventUnderConcurrentClaims) {
  // 6 workers claim and complete 60 jobs while a reader pages with
  // ReadEvents(after_id) like a webhook dispatcher. Ids must be monotonic in
  // commit order: an event committing later with a smaller id than one the
  // reader already passed would be skipped forever.
  for (int i = 0; i < 60; ++i) Submit(Spec(R"({"tail":)" + std::to_string(i) + "}"));
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::vector<int64_t> seen;
  std::thread reader([&] {
    auto s = MetadataStore::Open(url_);
    if (!s.IsOk()) {
      ++errors;
      return;
    }
    int64_t cursor = 0;
    while (true) {
      const bool last_round = done.load();
      auto evs = (*s)->ReadEvents(cursor, 0, 7);
      if (!evs.IsOk()) {
        ++errors;
        return;
      }
      for (const auto& e : *evs) seen.push_back(e.id);
      if (!evs->empty()) cursor = evs->back().id;
      if (last_round && evs->empty()) return;
    }
  });
  std::vector<std::thread> workers;
  for (int w = 0; w < 6; ++w) {
    workers.emplace_back([&, w] {
      auto s = MetadataStore::Open(url_);
      if (!s.IsOk()) {
        ++errors;
        return;
      }
      ClaimRequest r;
      r.worker = "w" + std::to_string(w);
      r.devices = {{"cpu", 0, 0}};
      while (true) {
        r.now_ms = Now();
        auto c = (*s)->ClaimJob(r);
        if (!c.IsOk()) {
          if (c.GetStatus().Code() != StatusCode::kNotFound) ++errors;
          return;
        }
        if (!(*s)->RenewLease(c->job.id, 1, r.worker, Now(), 90'000).IsOk()) ++errors;
        if (!(*s)->CompleteAttempt(c->job.id, 1, r.worker, Ok(), Now()).IsOk()) ++errors;
      }
    });
  }
  for (auto& t : workers) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(errors.load(), 0);
  auto all = *store_->ReadEvents(0, 0, 1000);
  ASSERT_EQ(all.size(), 180u);  // queued, running, succeeded per job
  std::vector<int64_t> expected;
  for (const auto& e : all) expected.push_back(e.id);
  EXPECT_EQ(seen, expected);
  // Strictly increasing; PostgreSQL may leave gaps (a rolled-back
  // transaction's sequence value is not reused), SQLite's counter does not.
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LT(all[i - 1].id, all[i].id);
}

TEST_P(JobStoreTest, ClaimsOnlyWhatFitsTheOfferedDevices) {
  JobSpec spec = Spec("{}");
  spec.device_kind = "gpu";
  spec.device_memory_mb = 8000;
  int64_t id = Submit(spec).id;
  ClaimRequest r;
  r.worker = "w";
  r.now_ms = Now();
  r.devices = {{"cpu", 0, 64000}};
  EXPECT_EQ(store_->ClaimJob(r).GetStatus().Code(), StatusCode::kNotFound);
  r.devices = {{"gpu", 0, 4000}};
  EXPECT_EQ(store_->ClaimJob(r).GetStatus().Code(), StatusCode::kNotFound);
  r.devices = {{"gpu", 0, 16000}, {"gpu", 1, 10000}, {"gpu", 2, 4000}};
  auto c = store_->ClaimJob(r);
  ASSERT_TRUE(c.IsOk());
  EXPECT_EQ(c->job.id, id);
  EXPECT_EQ(c->device.index, 1);  // best fit
  spec.device_kind = "tpu";
  bool created = false;
  EXPECT_EQ(store_->SubmitJob(spec, Now(), &created).GetStatus().Code(), StatusCode::kInvalidArgument);
}

TEST_P(JobStoreTest, WorkersAreRegisteredAndHeartbeat) {
  ASSERT_TRUE(store_->UpsertWorker({"w1", "h1", R"([{"kind":"cpu"}])", 10, 10}).IsOk());
  ASSERT_TRUE(store_->UpsertWorker({"w1", "h1", R"([{"kind":"cpu"}])", 99, 20}).IsOk());
  auto ws = *store_->ListWorkers();
  ASSERT_EQ(ws.size(), 1u);
  EXPECT_EQ(ws[0].started_ms, 10);
  EXPECT_EQ(ws[0].heartbeat_ms, 20);
  EXPECT_EQ(ws[0].stopped_ms, 0);
  // A graceful exit marks the row stopped; the same id heartbeating again clears it.
  ASSERT_TRUE(store_->UpsertWorker({"w1", "h1", "[]", 10, 30, 30}).IsOk());
  EXPECT_EQ((*store_->ListWorkers())[0].stopped_ms, 30);
  ASSERT_TRUE(store_->UpsertWorker({"w1", "h1", "[]", 40, 40}).IsOk());
  EXPECT_EQ((*store_->ListWorkers())[0].stopped_ms, 0);
}

TEST_P(JobStoreTest, ListJobsFiltersSortsAndPagesFromACursor) {
  // Six jobs: priorities high, normal, low, high, normal, low; kind val for
  // the even ones; the second one cancelled.
  std::vector<int64_t> ids;
  for (int i = 0; i < 6; ++i) {
    const std::string kind = i % 2 == 0 ? R"(,"kind":"val")" : "";
    ids.push_back(
        Submit(Spec(R"({"epochs":)" + std::to_string(i + 1) + kind + "}", static_cast<JobPriority>(i % 3)))
            .id);
  }
  ASSERT_TRUE(store_->CancelJob(ids[1], Now()).IsOk());
  auto list = [&](JobFilter f) {
    std::vector<int64_t> out;
    auto jobs = store_->ListJobs(f);
    EXPECT_TRUE(jobs.IsOk()) << jobs.GetStatus().ToString();
    if (jobs.IsOk()) {
      for (const auto& j : *jobs) out.push_back(j.id);
    }
    return out;
  };
  JobFilter f;
  EXPECT_EQ(list(f), (std::vector<int64_t>{ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}));
  f.kind = "val";
  EXPECT_EQ(list(f), (std::vector<int64_t>{ids[4], ids[2], ids[0]}));
  EXPECT_EQ(*store_->CountJobs(f), 3);
  f.kind = "train";
  EXPECT_EQ(list(f), (std::vector<int64_t>{ids[5], ids[3], ids[1]}));
  f = JobFilter{};
  f.sort = JobSort::kPriority;  // descending: high first, oldest first within
  EXPECT_EQ(list(f), (std::vector<int64_t>{ids[0], ids[3], ids[1], ids[4], ids[2], ids[5]}));
  f.after_id = ids[3];  // the cursor: the jobs after it in that order
  f.limit = 2;
  EXPECT_EQ(list(f), (std::vector<int64_t>{ids[1], ids[4]}));
  f.offset = 1;
  EXPECT_EQ(list(f), (std::vector<int64_t>{ids[4], ids[2]}));
  f = JobFilter{};
  f.sort = JobSort::kState;
  f.descending = false;  // queued first
  f.priorities = {JobPriority::kNormal, JobPriority::kLow};
  EXPECT_EQ(list(f), (std::vector<int64_t>{ids[2], ids[4], ids[5], ids[1]}));
  f.after_id = ids[5];
  EXPECT_EQ(list(f), (std::vector<int64_t>{ids[1]}));
  EXPECT_EQ(*store_->CountJobs(f), 4) << "the count ignores the cursor";
  f.states = {JobState::kCancelled};
  f.after_id = 0;
  EXPECT_EQ(list(f), (std::vector<int64_t>{ids[1]}));
  f.after_id = 424242;
  auto missing = store_->ListJobs(f);
  EXPECT_EQ(missing.GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.GetStatus().Where().field, "before");
  f = JobFilter{};
  f.dataset_version = Sha256Hex("birds");
  EXPECT_EQ(*store_->CountJobs(f), 6);
  f.dataset = "nosuch";
  EXPECT_EQ(*store_->CountJobs(f), 0);
}

// Issue 33: a run's name (given at submit, outside the dedup key), tags and
// note are set by LabelJob without touching its state or times, survive a
// reopen, and the list's search finds a job by any of them, case-folded,
// with LIKE's wildcards taken literally.
TEST_P(JobStoreTest, LabelJobSetsNameTagsAndNoteAndTheListSearchesThem) {
  JobSpec spec = Spec(R"({"epochs":3})");
  spec.name = "shapes v1 · n · 3 epochs";
  const JobRecord a = Submit(spec);
  EXPECT_EQ(a.spec.name, "shapes v1 · n · 3 epochs");
  EXPECT_TRUE(a.tags.empty());
  JobSpec renamed = spec;
  renamed.name = "other";
  EXPECT_EQ(Submit(renamed).id, a.id) << "the name is not part of the dedup key";
  const JobRecord b = Submit(Spec(R"({"epochs":4})"));
  const JobRecord c = Submit(Spec(R"({"epochs":5})"));

  JobLabelChange change;
  change.tags = std::vector<std::string>{"baseline", "lr-sweep"};
  change.note = "Mosaic off after 100% of the epochs";
  auto labelled = store_->LabelJob(b.id, change);
  ASSERT_TRUE(labelled.IsOk()) << labelled.GetStatus().ToString();
  EXPECT_EQ(labelled->tags, (std::vector<std::string>{"baseline", "lr-sweep"}));
  EXPECT_EQ(labelled->state, JobState::kQueued);
  EXPECT_EQ(labelled->updated_ms, b.updated_ms);
  JobLabelChange name_only;
  name_only.name = "Best_Run";
  ASSERT_TRUE(store_->LabelJob(c.id, name_only).IsOk());
  EXPECT_EQ(store_->LabelJob(999, name_only).GetStatus().Code(), StatusCode::kNotFound);

  store_ = Open();
  const JobRecord b2 = *store_->GetJob(b.id);
  EXPECT_EQ(b2.tags, (std::vector<std::string>{"baseline", "lr-sweep"}));
  EXPECT_EQ(b2.note, "Mosaic off after 100% of the epochs");
  EXPECT_EQ(b2.spec.name, "");
  EXPECT_EQ(store_->GetJob(c.id)->spec.name, "Best_Run");

  auto ids = [&](const std::string& text) {
    JobFilter f;
    f.search = text;
    f.descending = false;
    std::vector<int64_t> out;
    auto jobs = store_->ListJobs(f);
    EXPECT_TRUE(jobs.IsOk()) << jobs.GetStatus().ToString();
    if (jobs.IsOk())
      for (const auto& j : *jobs) out.push_back(j.id);
    EXPECT_EQ(*store_->CountJobs(f), static_cast<int64_t>(out.size()));
    return out;
  };
  EXPECT_EQ(ids("SHAPES V1"), (std::vector<int64_t>{a.id}));
  EXPECT_EQ(ids("lr-sw"), (std::vector<int64_t>{b.id}));
  EXPECT_EQ(ids("mosaic"), (std::vector<int64_t>{b.id}));
  EXPECT_EQ(ids("100%"), (std::vector<int64_t>{b.id}));
  EXPECT_EQ(ids("t_r"), (std::vector<int64_t>{c.id})) << "'_' is literal";
  EXPECT_EQ(ids("%"), (std::vector<int64_t>{b.id})) << "'%' is literal";
  EXPECT_TRUE(ids("nothing").empty());
  EXPECT_EQ(ids("").size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobStoreTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

TEST(PostgresStoreTest, UnreachableServerIsUnavailable) {
  auto s = MetadataStore::Open("postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=2");
  EXPECT_EQ(s.GetStatus().Code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.GetStatus().ToString().find("secret"), std::string::npos);
}

}  // namespace
}  // namespace kestrel::store
