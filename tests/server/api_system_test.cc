// The System page's routes over real HTTP on loopback (docs/server.md
// "System"): GET /api/workers (registered workers, their running jobs and
// attempts, heartbeat ages, busy/idle/stale), GET /api/breaker (state,
// reason, counts, since when), POST /api/breaker/reset (no token 401,
// read-only 403, a read-write token closes the store's breaker for every
// worker), GET /api/token and the workers' heartbeat ages in /metrics. An
// in-process ApiServer on port 0 over a temporary SQLite home whose jobs,
// attempts and workers the test writes through the store at chosen times.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "app/jobs.h"
#include "app/system.h"
#include "app/tokens.h"
#include "birds_home.h"
#include "core/failure.h"
#include "http_client.h"
#include "jobs/breaker.h"
#include "jobs/usage_sampler.h"
#include "server/api.h"
#include "write_route_test.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// write_route_test.h: tokens, servers, Call and Doc.
class ApiSystemTest : public testing::WriteRouteTest {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_server_system_", 4, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    CreateTokens();
    port_ = StartServer();
  }

  // A queued job (epochs makes each one distinct: no dedup).
  int64_t Submit(int epochs) {
    auto d = app::DraftJob({"data=birds", "epochs=" + std::to_string(epochs)}, nullptr);
    EXPECT_TRUE(d.IsOk()) << d.GetStatus().ToString();
    auto s = app::SubmitJob(*meta_, std::move(d).Value(), 1000);
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    return s.IsOk() ? s->job.id : 0;
  }
  // `worker` claims the next job at `now_ms`.
  store::ClaimedJob Claim(const std::string& worker, int64_t now_ms) {
    store::ClaimRequest req;
    req.worker = worker;
    req.host = "hostA";
    req.devices = {store::DeviceOffer{"cpu", 0, 0}};
    req.now_ms = now_ms;
    req.lease_ms = 3'600'000;
    auto c = meta_->ClaimJob(req);
    EXPECT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    return c.IsOk() ? *c : store::ClaimedJob{};
  }
  void Register(const std::string& id, const std::string& host, int64_t heartbeat_ms) {
    store::WorkerRecord w{id, host, R"([{"kind":"cpu","index":0},{"kind":"gpu","index":1,"memory_mb":8000}])",
                          heartbeat_ms - 1000, heartbeat_ms};
    ASSERT_TRUE(meta_->UpsertWorker(w).IsOk());
  }
};

TEST_F(ApiSystemTest, WorkersListTheirJobsHeartbeatAgesAndStates) {
  const int64_t now = WallMs();
  Register("hostA:4242", "hostA", now - 5000);
  Register("gpu-box", "hostB", now - 200'000);  // not heard from for 200 s
  Register("hostC:17", "hostC", now - 1000);
  // Exited gracefully 2 s ago: stopped at once, not idle until stale.
  ASSERT_TRUE(meta_->UpsertWorker({"hostD:33", "hostD", "[]", now - 9000, now - 2000, now - 2000}).IsOk());
  const int64_t job = Submit(1);
  store::ClaimedJob c = Claim("hostA:4242", now - 4000);
  ASSERT_EQ(c.job.id, job);
  ASSERT_TRUE(meta_->RecordAttemptPid(job, 1, "hostA:4242", 777).IsOk());
  // The busy worker's latest usage sample (docs/jobs.md "System usage"); an
  // unreadable one is no sample, not an error.
  const json usage = {{"sampled_ms", now - 1000},
                      {"interval_ms", 5000},
                      {"cpu_percent", 97.5},
                      {"rss_mb", 312.4},
                      {"jobs",
                       {{{"job", job},
                         {"attempt", 1},
                         {"pid", 777},
                         {"processes", 3},
                         {"cpu_percent", 97.5},
                         {"rss_mb", 312.4}}}}};
  ASSERT_TRUE(
      meta_->PutSetting(std::string(jobs::kUsageSettingPrefix) + "hostA:4242", usage.dump(), now).IsOk());
  ASSERT_TRUE(
      meta_->PutSetting(std::string(jobs::kUsageSettingPrefix) + "hostC:17", "{not json", now).IsOk());

  EXPECT_EQ(Call("GET", "/api/workers").status, 401);
  json doc = Doc(Call("GET", "/api/workers", read_), 200, "workers");
  ASSERT_TRUE(doc["now_ms"].is_number_integer()) << doc;
  auto expected = app::ListWorkerStatus(*meta_, doc["now_ms"].get<int64_t>());
  ASSERT_TRUE(expected.IsOk()) << expected.GetStatus().ToString();
  EXPECT_EQ(doc, app::WorkersJson(*expected)) << "the app view `kestrel --json workers` prints";

  ASSERT_EQ(doc["workers"].size(), 4u) << doc;
  const json& a = doc["workers"][0];
  EXPECT_EQ(a["id"], "hostA:4242");
  EXPECT_EQ(a["pid"], 4242) << "from the default id HOST:PID";
  EXPECT_EQ(a["state"], "busy");
  EXPECT_GE(a["heartbeat_age_ms"].get<int64_t>(), 5000);
  EXPECT_LT(a["heartbeat_age_ms"].get<int64_t>(), 60'000);
  EXPECT_EQ(a["devices"].size(), 2u);
  EXPECT_EQ(a["devices"][1]["memory_mb"], 8000);
  ASSERT_EQ(a["jobs"].size(), 1u);
  EXPECT_EQ(a["jobs"][0]["id"], job);
  EXPECT_EQ(a["jobs"][0]["attempt"], 1);
  EXPECT_EQ(a["jobs"][0]["attempt_pid"], 777);
  EXPECT_EQ(a["jobs"][0]["attempt_started_ms"], now - 4000);
  EXPECT_EQ(a["jobs"][0]["kind"], "train");
  EXPECT_EQ(a["usage"], usage);
  const json& idle = doc["workers"][1];
  EXPECT_TRUE(idle["usage"].is_null()) << idle;
  EXPECT_TRUE(doc["workers"][2]["usage"].is_null()) << "never sampled";
  EXPECT_EQ(idle["id"], "hostC:17");
  EXPECT_EQ(idle["state"], "idle");
  EXPECT_TRUE(idle["jobs"].empty());
  const json& stale = doc["workers"][2];
  EXPECT_EQ(stale["id"], "gpu-box") << "stale workers come last";
  EXPECT_EQ(stale["state"], "stale");
  EXPECT_TRUE(stale["pid"].is_null()) << "a custom id names no pid";
  EXPECT_GE(stale["heartbeat_age_ms"].get<int64_t>(), 200'000);
  EXPECT_TRUE(stale["stopped_ms"].is_null());
  const json& stopped = doc["workers"][3];
  EXPECT_EQ(stopped["id"], "hostD:33") << "stopped workers come after stale ones";
  EXPECT_EQ(stopped["state"], "stopped");
  EXPECT_EQ(stopped["stopped_ms"], now - 2000);
  EXPECT_TRUE(idle["stopped_ms"].is_null());
  EXPECT_EQ(doc["stale_after_ms"], app::kWorkerStaleMs);

  HttpReply m = Call("GET", "/metrics", read_);
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("kestrel_worker_heartbeat_age_seconds{worker=\"gpu-box\",state=\"stale\"} 2"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("kestrel_worker_heartbeat_age_seconds{worker=\"hostA:4242\",state=\"busy\"} "),
            std::string::npos);
}

TEST_F(ApiSystemTest, BreakerOpensSaysSinceWhenAndAWriteTokenResetsItInTheStore) {
  // Ten attempts fail (retryable, out of memory) at t = 10 s, 11 s, ... 19 s:
  // the tenth reaches min_attempts, which opens the breaker.
  std::string reason;
  for (int i = 0; i < 10; ++i) {
    const int64_t t = 10'000 + 1000 * i;
    Submit(i + 1);
    store::ClaimedJob c = Claim("hostA:1", t - 500);
    ASSERT_GT(c.job.id, 0);
    store::AttemptOutcome out;
    out.failure_class = store::FailureClass::kRetryable;
    out.reason = FailureReason::kOom;
    out.stage = store::FailureStage::kTrain;
    out.message = "CUDA out of memory";
    ASSERT_TRUE(meta_->CompleteAttempt(c.job.id, c.job.attempt, "hostA:1", out, t).IsOk());
    reason = meta_->ListAttempts(c.job.id)->back().reason;
  }
  jobs::CircuitBreaker workers_view;
  ASSERT_TRUE(jobs::RefreshBreaker(workers_view, *meta_).IsOk());
  ASSERT_TRUE(workers_view.IsOpen());

  EXPECT_EQ(Call("GET", "/api/breaker").status, 401);
  json b = Doc(Call("GET", "/api/breaker", read_), 200, "breaker");
  EXPECT_EQ(b["ok"], true);
  EXPECT_EQ(b["open"], true);
  EXPECT_EQ(b["state"], "open");
  EXPECT_EQ(b["reason"], workers_view.Reason()) << "what every worker computes";
  EXPECT_EQ(b["counted"], 10);
  EXPECT_EQ(b["failed"], 10);
  EXPECT_EQ(b["failed_by_reason"], json({{reason, 10}}));
  EXPECT_EQ(b["since_ms"], 19'000) << "the tenth failure opened it";
  EXPECT_TRUE(b["reset_ms"].is_null());
  EXPECT_EQ(b["window"], 20);

  // Resetting is a write: no token 401, a read-only token 403, nothing changes.
  json e = Doc(Call("POST", "/api/breaker/reset"), 401, "no token");
  EXPECT_EQ(e["error"]["code"], "unauthenticated");
  e = Doc(Call("POST", "/api/breaker/reset", read_), 403, "read-only");
  EXPECT_EQ(e["error"]["code"], "permission_denied");
  EXPECT_EQ(e["error"]["message"],
            "token 'reader' is read-only; POST /api/breaker/reset needs a read-write token");
  e = Doc(Call("POST", "/api/breaker/reset", write_, R"({"force": true})"), 400, "a body");
  EXPECT_EQ(e["error"]["field"], "force") << "named, as the other bodiless writes name an unknown key";
  e = Doc(Call("POST", "/api/breaker/reset", write_, "[]"), 400, "not an object");
  EXPECT_EQ(e["error"]["field"], "body");
  EXPECT_EQ(meta_->GetSetting(jobs::kBreakerResetSetting).GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(Doc(Call("GET", "/api/breaker", read_), 200, "still open")["open"], true);

  const int64_t before = WallMs();
  json r = Doc(Call("POST", "/api/breaker/reset", write_), 200, "reset");
  const int64_t after = WallMs();
  EXPECT_EQ(r["ok"], true);
  EXPECT_EQ(r["message"], app::kBreakerResetMessage) << "the CLI's message";
  const int64_t reset_ms = r["reset_ms"].get<int64_t>();
  EXPECT_GE(reset_ms, before);
  EXPECT_LE(reset_ms, after);
  EXPECT_EQ(r["breaker"]["open"], false);
  // The store holds the reset every worker applies on its next refresh.
  auto stored = meta_->GetSetting(jobs::kBreakerResetSetting);
  ASSERT_TRUE(stored.IsOk());
  EXPECT_EQ(*stored, std::to_string(reset_ms));
  jobs::CircuitBreaker fresh;
  ASSERT_TRUE(jobs::RefreshBreaker(fresh, *meta_).IsOk());
  EXPECT_FALSE(fresh.IsOpen());
  ASSERT_TRUE(jobs::RefreshBreaker(workers_view, *meta_).IsOk());
  EXPECT_FALSE(workers_view.IsOpen()) << "a worker's open breaker closes on its next refresh";

  b = Doc(Call("GET", "/api/breaker", read_), 200, "after the reset");
  EXPECT_EQ(b["open"], false);
  EXPECT_EQ(b["reason"], "");
  EXPECT_EQ(b["counted"], 0) << "earlier attempts no longer count";
  EXPECT_EQ(b["reset_ms"], reset_ms);
  EXPECT_EQ(b["since_ms"], reset_ms) << "the reset closed it";
  // /api/stats agrees.
  EXPECT_EQ(Doc(Call("GET", "/api/stats", read_), 200, "stats")["breaker"]["open"], false);
}

TEST_F(ApiSystemTest, TokenRouteSaysWhetherTheUiMayWrite) {
  json r = Doc(Call("GET", "/api/token", read_), 200, "reader");
  EXPECT_EQ(r["token"]["name"], "reader");
  EXPECT_EQ(r["token"]["read_only"], true);
  EXPECT_FALSE(r["token"].contains("hash"));
  json w = Doc(Call("GET", "/api/token", write_), 200, "writer");
  EXPECT_EQ(w["token"]["name"], "writer");
  EXPECT_EQ(w["token"]["read_only"], false);
  EXPECT_EQ(Call("GET", "/api/token").status, 401);
  EXPECT_EQ(Call("GET", "/api/token", "kst_000000000000_" + std::string(64, '0')).status, 401);

  ServerOptions pub;
  pub.public_read = true;
  const int public_port = StartServer(pub);
  json p = Doc(Call("GET", "/api/token", "", "", public_port), 200, "public read");
  EXPECT_TRUE(p["token"].is_null());
  EXPECT_EQ(p["public_read"], true);
  EXPECT_EQ(Doc(Call("GET", "/api/workers", "", "", public_port), 200, "public workers")["workers"],
            json::array());
  EXPECT_EQ(Call("POST", "/api/breaker/reset", "", "", public_port).status, 401)
      << "writes need a token even with --public-read";
}

// Issue 31: a quarantined host and a drained worker as the System page and
// /metrics see them, and the env-diff route over two attempts' fingerprints.
TEST_F(ApiSystemTest, QuarantineDrainAndEnvironmentDiffAreServed) {
  const int64_t now = WallMs();
  Register("hostA:1", "hostA", now - 1000);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(meta_->RecordEnvironmentFailure("hostA", "libtorch_cpu.so: cannot open", 3, now).IsOk());
  ASSERT_TRUE(meta_->SetDrain("hostA:1", true, now).IsOk());
  json doc = Doc(Call("GET", "/api/workers", read_), 200, "workers");
  ASSERT_EQ(doc["workers"].size(), 1u) << doc.dump();
  EXPECT_EQ(doc["workers"][0]["draining"], true);
  EXPECT_EQ(doc["workers"][0]["quarantined"], true);
  EXPECT_NE(doc["workers"][0]["quarantine_reason"].get<std::string>().find("libtorch_cpu.so"),
            std::string::npos);
  EXPECT_EQ(doc["hosts"][0]["env_failures"], 3);
  json stats = Doc(Call("GET", "/api/stats", read_), 200, "stats");
  ASSERT_EQ(stats["quarantined_hosts"].size(), 1u) << stats.dump();
  EXPECT_EQ(stats["quarantined_hosts"][0]["host"], "hostA");
  HttpReply m = Call("GET", "/metrics", read_);
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("kestrel_host_quarantined{host=\"hostA\"} 1"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("kestrel_worker_draining{worker=\"hostA:1\"} 1"), std::string::npos);

  // Two attempts of one job under two fingerprints.
  ASSERT_TRUE(meta_->PutFingerprint("fa", R"({"libtorch":"1.13.0","avx2":true})", now).IsOk());
  ASSERT_TRUE(meta_->PutFingerprint("fb", R"({"libtorch":"2.1.0","avx2":true})", now).IsOk());
  const int64_t job = Submit(1);
  store::ClaimRequest req;
  req.worker = "w";
  req.host = "hostB";
  req.devices = {store::DeviceOffer{"cpu", 0, 0}};
  req.now_ms = now;
  req.fingerprint = "fa";
  ASSERT_TRUE(meta_->ClaimJob(req).IsOk());
  store::AttemptOutcome o;
  o.failure_class = store::FailureClass::kRetryable;
  o.infrastructure = true;
  o.reason = FailureReason::kWorkerLost;
  ASSERT_TRUE(meta_->CompleteAttempt(job, 1, "w", o, now + 1).IsOk());
  req.fingerprint = "fb";
  req.now_ms = now + 2;
  ASSERT_TRUE(meta_->ClaimJob(req).IsOk());
  const std::string base = "/api/jobs/" + std::to_string(job) + "/env-diff";
  json diff =
      Doc(Call("GET", base + "?attempt=1&other=" + std::to_string(job) + ":2", read_), 200, "env-diff");
  EXPECT_EQ(diff["same"], false);
  ASSERT_EQ(diff["differences"].size(), 1u) << diff.dump();
  EXPECT_EQ(diff["differences"][0]["field"], "libtorch");
  EXPECT_EQ(diff["differences"][0]["a"], "1.13.0");
  EXPECT_EQ(diff["differences"][0]["b"], "2.1.0");
  EXPECT_EQ(Call("GET", base, read_).status, 400) << "other= is required";
  EXPECT_EQ(Call("GET", base + "?other=" + std::to_string(job) + ":9", read_).status, 404);
}

// Issue 31: the System page's buttons. Drain, undrain (a worker id or a
// host) and unquarantine are writes (401 without a token, 403 read-only,
// a body refused by name), answer `kestrel --json workers drain|undrain|
// unquarantine`'s documents and change what every worker reads from the store.
TEST_F(ApiSystemTest, DrainUndrainAndUnquarantineAreTokenProtectedWrites) {
  const int64_t now = WallMs();
  Register("hostA:1", "hostA", now - 1000);
  Register("hostA:2", "hostA", now - 1000);
  Register("hostB:3", "hostB", now - 1000);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(meta_->RecordEnvironmentFailure("hostB", "doctor: device cpu: broken", 3, now).IsOk());
  for (const char* path :
       {"/api/workers/hostA:1/drain", "/api/workers/hostA/undrain", "/api/hosts/hostB/unquarantine"}) {
    EXPECT_EQ(Doc(Call("POST", path), 401, path)["error"]["code"], "unauthenticated");
    EXPECT_EQ(Doc(Call("POST", path, read_), 403, path)["error"]["code"], "permission_denied");
    EXPECT_EQ(Doc(Call("POST", path, write_, R"({"now": 1})"), 400, path)["error"]["field"], "now");
  }
  auto control = [&](const std::string& worker, const std::string& host) {
    auto c = meta_->GetWorkerControl(worker, host);
    EXPECT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    return c.IsOk() ? *c : store::WorkerControl{};
  };
  EXPECT_FALSE(control("hostA:1", "hostA").draining) << "the refused calls changed nothing";
  EXPECT_TRUE(control("hostB:3", "hostB").quarantined);

  // One worker by its id (':' in a path segment), then a whole host.
  json d = Doc(Call("POST", "/api/workers/hostA:1/drain", write_), 200, "drain one");
  EXPECT_EQ(d, json({{"ok", true}, {"target", "hostA:1"}, {"draining", true}, {"workers", {"hostA:1"}}}));
  EXPECT_TRUE(control("hostA:1", "hostA").draining);
  EXPECT_FALSE(control("hostA:2", "hostA").draining);
  d = Doc(Call("POST", "/api/workers/hostA/drain", write_, "{}"), 200, "drain a host");
  EXPECT_EQ(d["workers"], json({"hostA:1", "hostA:2"}));
  EXPECT_TRUE(control("hostA:2", "hostA").draining);
  json w = Doc(Call("GET", "/api/workers", read_), 200, "workers");
  for (const json& worker : w["workers"])
    EXPECT_EQ(worker["draining"], worker["host"] == "hostA") << worker.dump();
  d = Doc(Call("POST", "/api/workers/hostA/undrain", write_), 200, "undrain");
  EXPECT_EQ(d["draining"], false);
  EXPECT_FALSE(control("hostA:2", "hostA").draining);
  d = Doc(Call("POST", "/api/workers/hostA:1/undrain", write_), 200, "undrain the worker's own");
  EXPECT_FALSE(control("hostA:1", "hostA").draining);
  json e = Doc(Call("POST", "/api/workers/nosuch/drain", write_), 404, "unknown target");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("nosuch"), std::string::npos) << e.dump();

  json u = Doc(Call("POST", "/api/hosts/hostB/unquarantine", write_), 200, "unquarantine");
  EXPECT_EQ(u["ok"], true);
  EXPECT_EQ(u["host"], "hostB");
  EXPECT_EQ(u["quarantined"], false);
  EXPECT_EQ(u["env_failures"], 0);
  EXPECT_FALSE(control("hostB:3", "hostB").quarantined);
  EXPECT_EQ(Call("POST", "/api/hosts/nosuch/unquarantine", write_).status, 404);
}

}  // namespace
}  // namespace kestrel::server
