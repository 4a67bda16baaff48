// GET /api/runs over real HTTP (the route alone on an in-process HttpServer
// over a temporary SQLite home, as api_metrics_test.cc): per run its config
// values and series summaries (the newest attempt's points), the chosen keys
// and metrics only, train runs by default, a finished run's summary kept
// until the job changes, request errors located at the parameter; and the
// route's time over a store of many jobs (figures printed, no bound:
// KESTREL_RUNS_JOBS=10000 gives docs/server.md's).
#include "server/api_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "app/jobs.h"
#include "app/metric_events.h"
#include "app/run_table.h"
#include "birds_home.h"
#include "http_client.h"
#include "server/api.h"
#include "server/http_server.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Get;
using testing::HttpReply;

class ApiRunsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_server_runs_", 4, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    ctx_ = std::make_unique<ApiContext>(ApiContext{*meta_, *blobs_, metrics_, home_});
    ASSERT_TRUE(AddRunRoutes(router_, *ctx_).IsOk());
    ServerOptions o;
    o.port = 0;
    auto srv = HttpServer::Start(o, router_, metrics_);
    ASSERT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    server_ = std::move(srv).Value();
    port_ = server_->Port();
  }
  void TearDown() override {
    server_.reset();
    meta_.reset();
    fs::remove_all(dir_);
  }

  int64_t Submit(const std::vector<std::string>& keys) {
    auto d = app::DraftJob(keys, nullptr);
    EXPECT_TRUE(d.IsOk()) << d.GetStatus().ToString();
    if (!d.IsOk()) return 0;
    auto s = app::SubmitJob(*meta_, std::move(d).Value(), 1000);
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    return s.IsOk() ? s->job.id : 0;
  }
  void Epoch(int64_t job, int64_t attempt, int epoch, double map5095, double box) {
    app::EpochMetrics m;
    m.epoch = epoch;
    m.map5095 = map5095;
    m.box = box;
    store::EventRecord ev;
    ev.job_id = job;
    ev.attempt = attempt;
    ev.kind = app::kMetricEventKind;
    ev.payload_json = app::EpochMetricsPayload(m).dump();
    ev.created_ms = 5000;
    ASSERT_TRUE(meta_->AppendEvent(ev).IsOk());
  }
  json Doc(const std::string& target, int status = 200) {
    HttpReply r = Get(port_, target);
    EXPECT_EQ(r.status, status) << target << ": " << r.body;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << target << ": " << r.body;
    return j;
  }
  static json Run(const json& doc, int64_t id) {
    for (const auto& r : doc["runs"])
      if (r["id"] == id) return r;
    return nullptr;
  }

  fs::path dir_;
  std::string home_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  HttpMetrics metrics_;
  std::unique_ptr<ApiContext> ctx_;
  Router router_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(ApiRunsTest, RunsCarryChosenConfigValuesAndSeriesSummaries) {
  const int64_t a = Submit({"data=birds", "epochs=3", "lr0=0.01", "mosaic=1.0"});
  const int64_t b = Submit({"data=birds", "epochs=3", "lr0=0.02", "mosaic=0.0"});
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  Epoch(a, 1, 1, 0.10, 3.0);
  Epoch(a, 1, 2, 0.30, 2.0);
  Epoch(a, 1, 3, 0.20, 2.5);
  // b's attempt 2 resumed at epoch 2: its points replace attempt 1's from there.
  Epoch(b, 1, 1, 0.05, 4.0);
  Epoch(b, 1, 2, 0.90, 0.5);
  Epoch(b, 2, 2, 0.15, 3.5);
  // Step events (sampled iterations) are not summarised.
  store::EventRecord step;
  step.job_id = a;
  step.attempt = 1;
  step.kind = app::kMetricEventKind;
  step.payload_json = app::StepMetricsPayload({1, 7, 0.5, 0.25, 0.125}).dump();
  ASSERT_TRUE(meta_->AppendEvent(step).IsOk());

  const std::string map = "metrics/mAP50-95(B)";
  json doc = Doc("/api/runs?keys=lr0,mosaic,no_such_key&metrics=" + map + ",train/box_loss,no/such");
  EXPECT_EQ(doc["ok"], true);
  EXPECT_EQ(doc["total"], 2);
  ASSERT_EQ(doc["runs"].size(), 2u) << doc.dump();
  EXPECT_EQ(doc["runs"][0]["id"], b);  // newest first
  json ra = Run(doc, a);
  json rb = Run(doc, b);
  EXPECT_EQ(ra["config"], json::parse(R"({"lr0": 0.01, "mosaic": 1.0, "no_such_key": null})")) << ra.dump();
  EXPECT_EQ(rb["config"]["lr0"], 0.02);
  EXPECT_EQ(ra["state"], "queued");
  EXPECT_EQ(ra["dataset"], "birds");
  EXPECT_FALSE(ra["name"].get<std::string>().empty());
  EXPECT_TRUE(ra["duration_s"].is_null());
  // Only the series asked for; each summarised.
  ASSERT_EQ(ra["metrics"].size(), 2u) << ra["metrics"].dump();
  const json& ma = ra["metrics"][map];
  EXPECT_EQ(ma["axis"], "epoch");
  EXPECT_EQ(ma["count"], 3);
  EXPECT_DOUBLE_EQ(ma["last"].get<double>(), 0.20);
  EXPECT_EQ(ma["last_x"], 3);
  EXPECT_DOUBLE_EQ(ma["max"].get<double>(), 0.30);
  EXPECT_EQ(ma["max_x"], 2);
  EXPECT_DOUBLE_EQ(ma["min"].get<double>(), 0.10);
  EXPECT_EQ(ma["min_x"], 1);
  EXPECT_DOUBLE_EQ(ra["metrics"]["train/box_loss"]["min"].get<double>(), 2.0);
  // b: attempt 2's epoch 2 replaced attempt 1's (0.90 is gone).
  const json& mb = rb["metrics"][map];
  EXPECT_EQ(mb["count"], 2);
  EXPECT_DOUBLE_EQ(mb["max"].get<double>(), 0.15);
  EXPECT_DOUBLE_EQ(mb["last"].get<double>(), 0.15);
  // The page's key and series lists (for the column picker) are complete.
  const auto keys = doc["keys"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(keys.begin(), keys.end(), "lr0"), keys.end());
  EXPECT_NE(std::find(keys.begin(), keys.end(), "epochs"), keys.end());
  const auto series = doc["series"].get<std::vector<std::string>>();
  EXPECT_NE(std::find(series.begin(), series.end(), "metrics/mAP50(B)"), series.end());
  EXPECT_EQ(std::find(series.begin(), series.end(), "iter/box_loss"), series.end()) << doc["series"].dump();

  // Without keys/metrics: every config key and every series.
  json all = Doc("/api/runs");
  json full = Run(all, a);
  EXPECT_GT(full["config"].size(), 20u);
  EXPECT_EQ(full["config"]["mosaic"], 1.0);
  EXPECT_EQ(full["metrics"].size(), series.size()) << full["metrics"].dump();
  // Paging and filters are the job list's.
  json one = Doc("/api/runs?limit=1");
  ASSERT_EQ(one["runs"].size(), 1u);
  EXPECT_EQ(one["next_cursor"], b);
  json next = Doc("/api/runs?limit=1&before=" + std::to_string(b));
  ASSERT_EQ(next["runs"].size(), 1u);
  EXPECT_EQ(next["runs"][0]["id"], a);
  EXPECT_EQ(Doc("/api/runs?kind=val")["runs"].size(), 0u);
  // ids: exactly those runs in that order (a report).
  json picked = Doc("/api/runs?ids=" + std::to_string(a) + "," + std::to_string(b) + "&keys=lr0");
  ASSERT_EQ(picked["runs"].size(), 2u);
  EXPECT_EQ(picked["runs"][0]["id"], a);
  EXPECT_EQ(picked["runs"][1]["id"], b);
  EXPECT_EQ(picked["runs"][1]["dataset"], "birds");
  EXPECT_EQ(picked["runs"][0]["config"]["lr0"], 0.01);
  EXPECT_EQ(Doc("/api/runs?state=cancelled")["runs"].size(), 0u);
}

TEST_F(ApiRunsTest, AFinishedRunsSummaryIsKeptUntilTheJobChanges) {
  const int64_t a = Submit({"data=birds", "epochs=2"});
  ASSERT_GT(a, 0);
  Epoch(a, 1, 1, 0.25, 1.0);
  ASSERT_TRUE(meta_->CancelJob(a, 2000).IsOk());
  const std::string q = "/api/runs?metrics=metrics/mAP50-95(B)";
  json first = Doc(q);
  EXPECT_EQ(Run(first, a)["metrics"]["metrics/mAP50-95(B)"]["count"], 1);
  EXPECT_EQ(Run(first, a)["state"], "cancelled");
  // A finished job's events do not change: a late one is not read again...
  Epoch(a, 1, 2, 0.75, 0.5);
  EXPECT_EQ(Run(Doc(q), a)["metrics"]["metrics/mAP50-95(B)"]["count"], 1);
  // ...until the job changes (a retry makes it live: read on every request).
  ASSERT_TRUE(meta_->RetryJob(a, 3000).IsOk());
  json retried = Doc(q);
  EXPECT_EQ(Run(retried, a)["metrics"]["metrics/mAP50-95(B)"]["count"], 2);
  EXPECT_DOUBLE_EQ(Run(retried, a)["metrics"]["metrics/mAP50-95(B)"]["max"].get<double>(), 0.75);
}

TEST_F(ApiRunsTest, BadParametersAreRefusedNamingThem) {
  auto field = [&](const std::string& target, int status = 400) {
    json e = Doc(target, status);
    return e.contains("error") ? e["error"].value("field", std::string("?")) : std::string("?");
  };
  EXPECT_EQ(field("/api/runs?limit=0"), "limit");
  EXPECT_EQ(field("/api/runs?limit=1001"), "limit");
  EXPECT_EQ(field("/api/runs?limit=x"), "limit");
  EXPECT_EQ(field("/api/runs?before=-3"), "before");
  EXPECT_EQ(field("/api/runs?state=bogus"), "state");
  EXPECT_EQ(field("/api/runs?kind=bogus"), "kind");
  EXPECT_EQ(field("/api/runs?ids=1,x"), "ids");
  EXPECT_EQ(field("/api/runs?ids=0"), "ids");
  EXPECT_EQ(field("/api/runs?ids=999999", 404), "ids");
  std::string ids;
  for (int i = 1; i <= 101; ++i) ids += std::to_string(i) + ",";
  EXPECT_EQ(field("/api/runs?ids=" + ids), "ids");
  std::string many;
  for (int i = 0; i < 201; ++i) many += "k" + std::to_string(i) + ",";
  EXPECT_EQ(field("/api/runs?keys=" + many), "keys");
  EXPECT_EQ(field("/api/runs?metrics=" + std::string(300, 'm')), "metrics");
  // Empty items and empty lists are not errors: no key, no series.
  json empty = Doc("/api/runs?keys=,,&metrics=");
  EXPECT_EQ(empty["ok"], true);
  // Stray bytes in a key come back escaped, the document valid JSON.
  ASSERT_GT(Submit({"data=birds", "epochs=1"}), 0);
  json odd = Doc("/api/runs?keys=%FF%FE,lr0%00x");
  ASSERT_EQ(odd["runs"].size(), 1u) << odd.dump();
  EXPECT_EQ(odd["runs"][0]["config"].size(), 2u) << odd.dump();
}

// Many jobs (2,000 here, KESTREL_RUNS_JOBS=10000 for the documented
// figures), the newest 200 with 20 epochs of metrics each: the route's time
// for a page of 200 and of 1,000 runs, the first request (every summary
// read from the events) and the next (finished runs' summaries kept).
TEST_F(ApiRunsTest, ManyJobsPrintTheRoutesTime) {
  const char* env = std::getenv("KESTREL_RUNS_JOBS");
  const int n = env != nullptr ? std::clamp(std::atoi(env), 300, 1'000'000) : 2000;
  auto d = app::DraftJob({"data=birds", "epochs=20"}, nullptr);
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  store::JobSpec base = d->spec;
  auto s = app::SubmitJob(*meta_, std::move(d).Value(), 1000);
  ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
  base = s->job.spec;
  json cfg = json::parse(base.config_json);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 1; i < n; ++i) {
    store::JobSpec spec = base;
    cfg["seed"] = i;
    cfg["lr0"] = 0.001 * (1 + i % 7);
    spec.config_json = cfg.dump();
    bool created = false;
    auto j = meta_->SubmitJob(spec, 2000 + i, &created);
    ASSERT_TRUE(j.IsOk()) << j.GetStatus().ToString();
    if (i >= n - 200) {
      for (int e = 1; e <= 20; ++e) Epoch(j->id, 1, e, 0.01 * e, 3.0 / e);
      ASSERT_TRUE(meta_->CancelJob(j->id, 3000 + i).IsOk());  // finished
    }
  }
  std::printf("stored %d jobs (200 with 20 epochs of metrics) in %.1f s\n", n,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  for (int limit : {200, 1000}) {
    const std::string q =
        "/api/runs?limit=" + std::to_string(limit) +
        "&keys=lr0,mosaic,model,epochs&metrics=metrics/mAP50-95(B),metrics/mAP50(B),train/box_loss";
    std::vector<double> ms;
    for (int run = 0; run < 6; ++run) {  // the first reads every summary, the next 5 find them kept
      const auto t = std::chrono::steady_clock::now();
      json doc = Doc(q);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count());
      EXPECT_EQ(doc["runs"].size(), static_cast<size_t>(std::min(limit, n)));
    }
    std::vector<double> next(ms.begin() + 1, ms.end());
    std::sort(next.begin(), next.end());
    std::printf("GET /api/runs?limit=%d of %d jobs: first request %.1f ms, next %.1f ms median (min %.1f)\n",
                limit, n, ms[0], next[2], next[0]);
  }
}

}  // namespace
}  // namespace kestrel::server
