// The claim's plan on a table of many finished jobs (issue 31): after
// ANALYZE has seen (almost) no queued job, the planner believes the ready set
// is one row, and two partial indexes cover it: jobs_ready in claim order,
// jobs_live_dedup in key order. Reading jobs_live_dedup and sorting looked as
// cheap, and every claim read and sorted every queued job (with 1,000,000
// finished jobs: claim p50 0.57 -> 16 ms). Store sessions price sorts out
// (enable_sort = off, src/store/postgres_store.cc); this pins that the ready
// head is read from jobs_ready with no sort, on the store's own session, and
// that the claim takes it. Runs when KESTREL_TEST_PG holds a libpq URL.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/hash.h"
#include "store/internal/sql_conn.h"
#include "store/metadata_store.h"
#include "store/postgres_store.h"

namespace kestrel::store {
namespace {

TEST(PostgresClaimPlanTest, TheReadyHeadIsReadFromJobsReadyWithoutASortAmongManyFinishedJobs) {
  const char* admin = std::getenv("KESTREL_TEST_PG");
  if (admin == nullptr || *admin == '\0') GTEST_SKIP() << "KESTREL_TEST_PG not set";
  const std::string schema = "claimplan_" + std::to_string(::getpid());
  (void)ExecPostgres(admin, "DROP SCHEMA IF EXISTS " + schema + " CASCADE");
  ASSERT_TRUE(ExecPostgres(admin, "CREATE SCHEMA " + schema).IsOk());
  const std::string a = admin;
  const std::string url =
      a + (a.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema;
  {
    auto opened = MetadataStore::Open(url);
    ASSERT_TRUE(opened.IsOk()) << opened.GetStatus().ToString();
    MetadataStore& st = **opened;
    auto submit = [&](int n) {
      JobSpec spec;
      spec.dataset_version = Sha256Hex("plan");
      spec.config_json = "{\"n\":" + std::to_string(n) + "}";
      bool created = false;
      auto j = st.SubmitJob(spec, 1000, &created);
      EXPECT_TRUE(j.IsOk()) << j.GetStatus().ToString();
      return j.IsOk() ? j->id : 0;
    };
    // 100,000 finished jobs copied from one (the bench's bulk load, smaller),
    // analyzed while none is queued; then a burst of 200 submits.
    const int64_t tmpl = submit(0);
    auto c = ConnectPostgres(url);
    ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    SqlConn& conn = **c;
    const std::string t = std::to_string(tmpl);
    ASSERT_TRUE(
        conn.ExecScript(
                "INSERT INTO jobs (id, spec_json, config_json, dataset_version, priority, dedup_key, state, "
                "attempt, lease_owner, lease_until, not_before, max_retries, retries_used, "
                "max_infra_retries, infra_retries_used, backoff_ms, device_kind, device_memory_mb, "
                "wall_clock_limit_ms, created_at, updated_at, finished_at, result_json, last_reason, "
                "min_map50, name, tags_json, note) SELECT t.id + g, t.spec_json, t.config_json, "
                "t.dataset_version, t.priority, 'finished-' || g, 'succeeded', 1, '', 0, t.not_before, "
                "t.max_retries, 0, t.max_infra_retries, 0, t.backoff_ms, t.device_kind, "
                "t.device_memory_mb, t.wall_clock_limit_ms, t.created_at, t.updated_at, t.created_at, "
                "'{}', '', t.min_map50, t.name, t.tags_json, t.note FROM jobs t, generate_series(1, "
                "100000) AS g WHERE t.id = " +
                t + "; UPDATE jobs SET state = 'succeeded', attempt = 1 WHERE id = " + t +
                "; UPDATE counters SET value = (SELECT MAX(id) FROM jobs) WHERE name = 'job'; ANALYZE jobs")
            .IsOk());
    int64_t first = 0;
    for (int i = 1; i <= 200; ++i) {
      const int64_t id = submit(i);
      if (i == 1) first = id;
    }
    // The ready head as the claim reads it (its candidate CTE, without the
    // fit and exclusion terms), planned on a store session.
    auto plan = conn.Query(
        "EXPLAIN SELECT id FROM jobs WHERE state IN ('queued', 'failed_retryable') AND state = 'queued' AND "
        "not_before <= $1::bigint ORDER BY priority, id LIMIT 1 FOR UPDATE SKIP LOCKED",
        {int64_t{5000}});
    ASSERT_TRUE(plan.IsOk()) << plan.GetStatus().ToString();
    std::string text;
    for (const auto& row : *plan) text += row.Text(0) + "\n";
    EXPECT_NE(text.find("jobs_ready"), std::string::npos) << text;
    EXPECT_EQ(text.find("Sort"), std::string::npos) << text;
    // And the claim takes the head: the first of the burst.
    ClaimRequest req;
    req.worker = "w";
    req.host = "h";
    req.devices = {{"cpu", 0, 0}};
    req.now_ms = 5000;
    auto claimed = st.ClaimJob(req);
    ASSERT_TRUE(claimed.IsOk()) << claimed.GetStatus().ToString();
    EXPECT_EQ(claimed->job.id, first);
  }
  EXPECT_TRUE(ExecPostgres(admin, "DROP SCHEMA " + schema + " CASCADE").IsOk());
}

}  // namespace
}  // namespace kestrel::store
