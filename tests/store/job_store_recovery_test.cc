// Recovery figures on every backend: a lost worker's attempt ends at its last
// lease renewal and is detected at the lease expiry; stats measure time to
// restart and time to recovery from those recorded times (docs/jobs.md).
#include <nlohmann/json.hpp>

#include "job_store_fixture.h"

namespace kestrel::store {
namespace {

class JobRecoveryTest : public JobStoreTest {
 protected:
  // Closes the store and makes a fresh database of this backend holding the
  // first `n` migrations, applied by hand as an older Kestrel left it; `exec`
  // runs SQL on it and `db` is the SQLite handle to close (null for
  // PostgreSQL).
  void OldDatabase(size_t n, std::function<Status(const std::string&)>* exec, sqlite3** db) {
    store_.reset();
    if (GetParam() == "sqlite") {
      for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(dir_ + "/kestrel.db" + suffix);
      ASSERT_EQ(sqlite3_open((dir_ + "/kestrel.db").c_str(), db), SQLITE_OK);
      *exec = [h = *db](const std::string& sql) -> Status {
        char* err = nullptr;
        if (sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err) == SQLITE_OK) return {};
        std::string msg = err != nullptr ? err : "?";
        sqlite3_free(err);
        return Status::Internal(msg + " in " + sql);
      };
    } else {
      ASSERT_TRUE(ExecPostgres(admin_url_, "DROP SCHEMA " + schema_ + " CASCADE").IsOk());
      ASSERT_TRUE(ExecPostgres(admin_url_, "CREATE SCHEMA " + schema_).IsOk());
      *exec = [this](const std::string& sql) { return ExecPostgres(url_, sql); };
    }
    const auto& migrations = Migrations();
    ASSERT_GT(migrations.size(), n);
    for (size_t i = 0; i < n; ++i) {
      for (const auto& sql : migrations[i]) {
        if (sql.rfind(kPostgresOnly, 0) == 0 && GetParam() == "sqlite") continue;
        if (sql.rfind(kSqliteOnly, 0) == 0 && GetParam() != "sqlite") continue;
        Status st = (*exec)(sql);
        ASSERT_TRUE(st.IsOk()) << st.ToString();
      }
    }
  }
};

TEST_P(JobRecoveryTest, LostWorkersAttemptEndsAtItsLastRenewalAndStatsMeasureRecoveryFromThere) {
  int64_t id = Submit(Spec("{}")).id;
  const int64_t t0 = Now();
  ASSERT_TRUE(Claim("w1", 30'000).IsOk());
  ASSERT_TRUE(store_->RecordAttemptPid(id, 1, "w1", 4242).IsOk());
  clock_.AdvanceSeconds(10);
  ASSERT_TRUE(store_->RenewLease(id, 1, "w1", Now(), 30'000).IsOk());
  clock_.AdvanceSeconds(10);
  ASSERT_TRUE(store_->RenewLease(id, 1, "w1", Now(), 30'000).IsOk());
  const int64_t last_renewal = Now();  // t0 + 20 s; w1 dies at t0 + 25 s
  clock_.AdvanceSeconds(29);           // t0 + 49 s; the lease runs out at t0 + 50 s
  EXPECT_EQ(Claim("w2", 30'000).GetStatus().Code(), StatusCode::kNotFound) << "lease still held";
  clock_.AdvanceSeconds(26);  // t0 + 75 s: the next worker looks
  auto b = Claim("w2", 30'000);
  ASSERT_TRUE(b.IsOk()) << b.GetStatus().ToString();
  ASSERT_EQ(b->job.attempt, 2);
  const int64_t reclaimed = Now();
  clock_.AdvanceMicros(2'300'000);
  ASSERT_TRUE(store_->CompleteAttempt(id, 2, "w2", Ok(), Now()).IsOk());

  auto attempts = *store_->ListAttempts(id);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].reason, "lease_expired");
  EXPECT_EQ(attempts[0].started_ms, t0);
  EXPECT_EQ(attempts[0].ended_ms, last_renewal);
  EXPECT_EQ(attempts[0].detected_ms, t0 + 50'000);
  EXPECT_EQ(attempts[0].pid, 4242) << "the expiry must keep the pid the worker recorded";
  EXPECT_EQ(attempts[0].host, "host-w1");
  EXPECT_NE(attempts[0].message.find("reclaimed at " + std::to_string(reclaimed)), std::string::npos)
      << attempts[0].message;
  EXPECT_EQ(attempts[1].started_ms, reclaimed);
  EXPECT_EQ(attempts[1].ended_ms, attempts[1].detected_ms);

  JobStats s = *store_->Stats();
  EXPECT_EQ(s.restarted_attempts, 1);
  EXPECT_DOUBLE_EQ(s.mean_time_to_restart_ms, 25'000.0);
  EXPECT_EQ(s.recovered_jobs, 1);
  EXPECT_DOUBLE_EQ(s.mean_time_to_recovery_ms, 57'300.0);
}

// Both figures are means over several jobs and failures, and only count
// what happened: a failure not (yet) followed by an attempt is no restart,
// a job not (yet) succeeded is no recovery, cancellations are neither.
TEST_P(JobRecoveryTest, RecoveryFiguresAreMeansOverRecordedFailures) {
  JobSpec spec = Spec(R"({"j":1})");
  spec.retry.backoff_ms = {4'000};
  int64_t a = Submit(spec).id;
  spec.config_json = R"({"j":2})";
  int64_t b = Submit(spec).id;
  spec.config_json = R"({"j":3})";
  int64_t c = Submit(spec).id;
  // a: oom at t, restarted after the 4 s backoff + 1 s, oom again, restarted
  // 6 s after that, succeeds 10 s later. Restarts 5 s and 6 s; recovery from
  // the first failure.
  ASSERT_EQ(Claim("w")->job.id, a);
  clock_.AdvanceSeconds(3);
  ASSERT_TRUE(
      store_->CompleteAttempt(a, 1, "w", Fail(FailureClass::kRetryable, FailureReason::kOom), Now()).IsOk());
  const int64_t a_failed = Now();
  // b: fails once and is never retried (no restart, no recovery).
  ASSERT_EQ(Claim("w")->job.id, b);
  ASSERT_TRUE(
      store_->CompleteAttempt(b, 1, "w", Fail(FailureClass::kRetryable, FailureReason::kIoError), Now())
          .IsOk());
  // c: runs, is cancelled (neither).
  ASSERT_EQ(Claim("w")->job.id, c);
  ASSERT_TRUE(store_->CancelJob(c, Now()).IsOk());
  clock_.AdvanceSeconds(5);
  ASSERT_TRUE(store_->CancelJob(b, Now()).IsOk());
  ASSERT_EQ(Claim("w")->job.id, a);
  ASSERT_TRUE(
      store_->CompleteAttempt(a, 2, "w", Fail(FailureClass::kRetryable, FailureReason::kOom), Now()).IsOk());
  clock_.AdvanceSeconds(6);
  ASSERT_EQ(Claim("w")->job.id, a);
  clock_.AdvanceSeconds(10);
  ASSERT_TRUE(store_->CompleteAttempt(a, 3, "w", Ok(), Now()).IsOk());
  JobStats s = *store_->Stats();
  EXPECT_EQ(s.restarted_attempts, 2);
  EXPECT_DOUBLE_EQ(s.mean_time_to_restart_ms, (5'000.0 + 6'000.0) / 2);
  EXPECT_EQ(s.recovered_jobs, 1);
  EXPECT_DOUBLE_EQ(s.mean_time_to_recovery_ms, static_cast<double>(Now() - a_failed));
  EXPECT_DOUBLE_EQ(s.mean_time_to_recovery_ms, 21'000.0);
}

// Migration 7 on a database that already holds finished attempts: their
// detection time is their end (the only time they have), so the recovery
// figures over old rows stay what they were.
TEST_P(JobRecoveryTest, Migration7BackfillsDetectionTimeFromTheEnd) {
  std::function<Status(const std::string&)> exec;
  sqlite3* db = nullptr;
  ASSERT_NO_FATAL_FAILURE(OldDatabase(6, &exec, &db));
  for (const char* sql :
       {"CREATE TABLE schema_version (version INTEGER NOT NULL)", "INSERT INTO schema_version VALUES (6)",
        "INSERT INTO jobs VALUES (1, '{}', '{}', 'v', 1, 'k', 'succeeded', 2, '', 0, 0, 3, 0, 10, 1, '0', "
        "'cpu', "
        "0, 0, 100, 5000, 5000, '{}', '')",
        "INSERT INTO attempts VALUES (1, 1, 'w1', 'h', 0, 100, 3000, 0, 0, 0, 'train', 'retryable', 1, "
        "'lease_expired', 'old')",
        "INSERT INTO attempts VALUES (1, 2, 'w2', 'h', 12, 3000, 5000, 0, 0, 1, '', '', 0, '', '')"}) {
    Status st = exec(sql);
    ASSERT_TRUE(st.IsOk()) << st.ToString();
  }
  if (db != nullptr) sqlite3_close(db);
  store_ = Open();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(*store_->SchemaVersion(), LatestSchemaVersion());
  auto attempts = *store_->ListAttempts(1);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].ended_ms, 3000);
  EXPECT_EQ(attempts[0].detected_ms, 3000);
  EXPECT_EQ(attempts[1].detected_ms, 5000);
  JobStats s = *store_->Stats();
  EXPECT_EQ(s.recovered_jobs, 1);
  EXPECT_DOUBLE_EQ(s.mean_time_to_recovery_ms, 2000.0);
  EXPECT_EQ(s.restarted_attempts, 1);
  EXPECT_DOUBLE_EQ(s.mean_time_to_restart_ms, 0.0);
}

// Migration 10 on jobs stored while min_map50 rode in the config: the gate
// moves to the column (a non-numeric value was no gate, and stays none), the
// key leaves every config (the children no longer erase it), and a live
// job's old dedup key still matches a resubmission of the same job.
TEST_P(JobRecoveryTest, Migration10MovesMinMap50FromTheConfigToItsColumn) {
  std::function<Status(const std::string&)> exec;
  sqlite3* db = nullptr;
  ASSERT_NO_FATAL_FAILURE(OldDatabase(9, &exec, &db));
  const std::string old_key = Sha256Hex("v\n" + std::string(R"({"epochs":3,"min_map50":0.6})"));
  auto row = [](int id, const std::string& config, const std::string& key) {
    return "INSERT INTO jobs VALUES (" + std::to_string(id) + ", '{}', '" + config + "', 'v', 1, '" + key +
           "', 'queued', 0, '', 0, 0, 3, 0, 10, 0, '0', 'cpu', 0, 0, 100, 100, 0, '', '')";
  };
  for (const std::string& sql :
       {std::string("CREATE TABLE schema_version (version INTEGER NOT NULL)"),
        std::string("INSERT INTO schema_version VALUES (9)"),
        std::string("UPDATE counters SET value = 4 WHERE name = 'job'"),
        row(1, R"({"epochs":3,"min_map50":0.6})", old_key), row(2, R"({"epochs":4})", "k2"),
        row(3, R"({"epochs":5,"min_map50":"high"})", "k3"),
        row(4, R"({"kind":"val","min_map50":1})", "k4")}) {
    Status st = exec(sql);
    ASSERT_TRUE(st.IsOk()) << st.ToString();
  }
  if (db != nullptr) sqlite3_close(db);
  store_ = Open();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(*store_->SchemaVersion(), LatestSchemaVersion());
  struct Want {
    int64_t id;
    double min_map50;
    nlohmann::json config;
  };
  for (const Want& w : {Want{1, 0.6, {{"epochs", 3}}}, Want{2, 0.0, {{"epochs", 4}}},
                        Want{3, 0.0, {{"epochs", 5}}}, Want{4, 1.0, {{"kind", "val"}}}}) {
    auto j = store_->GetJob(w.id);
    ASSERT_TRUE(j.IsOk()) << j.GetStatus().ToString();
    EXPECT_EQ(j->spec.min_map50, w.min_map50) << "job " << w.id;
    EXPECT_EQ(nlohmann::json::parse(j->spec.config_json), w.config) << "job " << w.id;
  }
  JobSpec same;
  same.dataset_version = "v";
  same.config_json = R"({"epochs":3})";
  same.min_map50 = 0.6;
  bool created = true;
  auto again = store_->SubmitJob(same, Now(), &created);
  ASSERT_TRUE(again.IsOk()) << again.GetStatus().ToString();
  EXPECT_FALSE(created) << "the job stored before the migration is the same job";
  EXPECT_EQ(again->id, 1);
  same.min_map50 = 0.5;
  auto other = store_->SubmitJob(same, Now(), &created);
  ASSERT_TRUE(other.IsOk()) << other.GetStatus().ToString();
  EXPECT_TRUE(created);
  EXPECT_EQ(other->id, 5);
}

TEST_P(JobRecoveryTest, StatsComputeAvailabilityAndRecovery) {
  int64_t a = Submit(Spec(R"({"j":1})")).id;
  int64_t b = Submit(Spec(R"({"j":2})")).id;
  int64_t c = Submit(Spec(R"({"j":3})")).id;
  int64_t d = Submit(Spec(R"({"j":4})")).id;
  ASSERT_EQ(Claim("w")->job.id, a);
  ASSERT_TRUE(store_->CompleteAttempt(a, 1, "w", Ok(), Now()).IsOk());
  ASSERT_EQ(Claim("w")->job.id, b);
  AttemptOutcome oom = Fail(FailureClass::kRetryable, FailureReason::kOom);
  ASSERT_TRUE(store_->CompleteAttempt(b, 1, "w", oom, Now()).IsOk());
  int64_t failed_at = Now();
  ASSERT_EQ(Claim("w")->job.id, c);
  AttemptOutcome bad = Fail(FailureClass::kPermanent, FailureReason::kDatasetErrors);
  bad.stage = FailureStage::kData;
  ASSERT_TRUE(store_->CompleteAttempt(c, 1, "w", bad, Now()).IsOk());
  ASSERT_TRUE(store_->CancelJob(d, Now()).IsOk());
  clock_.AdvanceSeconds(300);
  ASSERT_EQ(Claim("w")->job.id, b);
  clock_.AdvanceSeconds(60);
  ASSERT_TRUE(store_->CompleteAttempt(b, 2, "w", Ok(), Now()).IsOk());
  // A running job cancelled: its attempt is counted as cancelled, neither
  // an attempt of the availability figures nor a failure (issue 33 finding 6).
  int64_t e = Submit(Spec(R"({"j":5})")).id;
  ASSERT_EQ(Claim("w")->job.id, e);
  ASSERT_TRUE(store_->CancelJob(e, Now()).IsOk());
  JobStats s = *store_->Stats();
  EXPECT_EQ(s.jobs, 5);
  EXPECT_EQ(s.succeeded, 2);
  EXPECT_EQ(s.failed_permanent, 1);
  EXPECT_EQ(s.cancelled, 2);
  EXPECT_EQ(s.cancelled_attempts, 1);
  EXPECT_EQ(s.live, 0);
  EXPECT_DOUBLE_EQ(s.availability, 2.0 / 3.0);
  EXPECT_EQ(s.attempts, 4);
  EXPECT_EQ(s.failed_attempts, 2);
  EXPECT_EQ(s.retries, 1);
  EXPECT_EQ(s.failures_by_stage["train"], 1);
  EXPECT_EQ(s.failures_by_stage["data"], 1);
  EXPECT_EQ(s.failures_by_class["retryable"], 1);
  EXPECT_EQ(s.failures_by_class["permanent"], 1);
  EXPECT_EQ(s.failures_by_reason["oom"], 1);
  EXPECT_EQ(s.recovered_jobs, 1);
  EXPECT_DOUBLE_EQ(s.mean_time_to_recovery_ms, static_cast<double>(Now() - failed_at));
  EXPECT_EQ(s.restarted_attempts, 1);
  EXPECT_DOUBLE_EQ(s.mean_time_to_restart_ms, 300'000.0);
  auto recent = *store_->RecentAttempts(2);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].job_id, b);
  EXPECT_TRUE(recent[0].succeeded);
}

INSTANTIATE_TEST_SUITE_P(Backends, JobRecoveryTest, ::testing::Values("sqlite", "postgres"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kestrel::store
