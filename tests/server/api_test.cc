// The read API over real HTTP on loopback: an in-process ApiServer on port
// 0 over a temporary SQLite home with a dataset, jobs, a model and a
// template; each route's body equals the app view the CLI prints; error
// documents; limits; /metrics; event streams with replay; graceful
// shutdown; the OpenAPI document against the router.
#include "server/api.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "app/datasets.h"
#include "app/jobs.h"
#include "app/models.h"
#include "app/stats.h"
#include "app/templates.h"
#include "birds_home.h"
#include "core/env.h"
#include "core/safetensors.h"
#include "data/synth.h"
#include "http_client.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::Get;
using testing::HttpReply;
using testing::SseClient;

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_server_", 6, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;

    for (const char* epochs : {"epochs=1", "epochs=2"}) {
      auto d = app::DraftJob({"data=birds", epochs}, nullptr);
      ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
      auto s = app::SubmitJob(*meta_, std::move(d).Value(), 1000);
      ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    }

    store::ModelRecord model;
    testing::RegisterBirdsModel(*meta_, *blobs_, dir_, 2000, &model);
    if (HasFatalFailure()) return;
    model_id_ = model.id;

    auto t = app::TemplateLibrary(*meta_).Save("small", {"epochs=3", "imgsz=64"}, 3000);
    ASSERT_TRUE(t.IsOk()) << t.GetStatus().ToString();

    ServerOptions o;
    o.port = 0;
    o.stream_poll_ms = 50;
    o.stream_keepalive_ms = 300;
    o.request_timeout_ms = 2000;
    o.public_read = true;  // the read routes' answers; tokens: auth_write_test.cc
    auto srv = ApiServer::Start(home_, o);
    ASSERT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    server_ = std::move(srv).Value();
    port_ = server_->Port();
  }
  void TearDown() override {
    server_.reset();
    meta_.reset();
    fs::remove_all(dir_);
  }

  json GetJson(const std::string& target, int status = 200) {
    HttpReply r = Get(port_, target);
    EXPECT_EQ(r.status, status) << target << ": " << r.body;
    EXPECT_EQ(r.headers["content-type"], "application/json") << target;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << target << ": " << r.body;
    return j;
  }

  int64_t AppendEvent(int64_t job_id, const std::string& payload) {
    store::EventRecord ev;
    ev.job_id = job_id;
    ev.attempt = 1;
    ev.kind = "metric";
    ev.payload_json = payload;
    ev.created_ms = 5000;
    auto id = meta_->AppendEvent(ev);
    EXPECT_TRUE(id.IsOk()) << id.GetStatus().ToString();
    return id.IsOk() ? *id : 0;
  }

  fs::path dir_;
  std::string home_, model_id_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::unique_ptr<ApiServer> server_;
  int port_ = 0;
};

TEST_F(ApiTest, HealthAndReadiness) {
  EXPECT_EQ(GetJson("/healthz"), json({{"ok", true}}));
  auto ready = GetJson("/readyz");
  EXPECT_EQ(ready["ok"], true);
  EXPECT_EQ(ready["schema_version"], store::LatestSchemaVersion());
}

TEST_F(ApiTest, EveryReadRouteReturnsTheCliView) {
  auto stats = app::JobStatsReport(*meta_, home_);
  ASSERT_TRUE(stats.IsOk());
  auto got_stats = GetJson("/api/stats");
  auto want_stats = app::StatsJson(*stats);
  got_stats["disk"].erase("free_bytes");  // the filesystem moves between the two reads
  want_stats["disk"].erase("free_bytes");
  EXPECT_EQ(got_stats, want_stats);

  app::Datasets ds(*meta_, *blobs_);
  auto all = ds.List();
  ASSERT_TRUE(all.IsOk());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(GetJson("/api/datasets"),
            json({{"ok", true}, {"datasets", {app::DatasetSummaryJson((*all)[0])}}}));
  auto show = ds.Show("birds");
  ASSERT_TRUE(show.IsOk());
  auto got_ds = GetJson("/api/datasets/birds");
  ASSERT_EQ(got_ds["versions"].size(), 1u);
  EXPECT_EQ(got_ds["versions"][0]["version"], "v1");
  got_ds.erase("versions");
  json want_ds = app::DatasetShowJson(*show);
  want_ds["ok"] = true;
  EXPECT_EQ(got_ds, want_ds);
  EXPECT_EQ(GetJson("/api/datasets/birds%40v1")["version_id"], want_ds["version_id"]);

  auto jobs = app::ListJobPage(*meta_, {"", 100});
  ASSERT_TRUE(jobs.IsOk());
  ASSERT_EQ(jobs->jobs.size(), 2u);
  json want_jobs = app::JobPageJson(*jobs);
  want_jobs["ok"] = true;
  EXPECT_EQ(GetJson("/api/jobs"), want_jobs) << "the view `kestrel jobs list --json` prints";
  auto detail = app::ShowJob(*meta_, 1);
  ASSERT_TRUE(detail.IsOk());
  EXPECT_EQ(GetJson("/api/jobs/1"), app::JobDetailJson(*detail));

  app::ModelRegistry reg(*meta_, *blobs_, Env::Default());
  auto model = reg.Resolve("birds");
  ASSERT_TRUE(model.IsOk());
  EXPECT_EQ(GetJson("/api/models"),
            json({{"ok", true}, {"models", {app::ModelJson(*model, *blobs_, false)}}}));
  EXPECT_EQ(GetJson("/api/models/birds@v1"),
            json({{"ok", true}, {"model", app::ModelJson(*model, *blobs_, true)}}));
  EXPECT_EQ(GetJson("/api/models/" + model_id_.substr(0, 8))["model"]["id"], model_id_);
  EXPECT_EQ(GetJson("/api/models?tag=production")["models"], json::array());

  app::TemplateLibrary lib(*meta_);
  auto tpl = lib.Resolve("small");
  ASSERT_TRUE(tpl.IsOk());
  EXPECT_EQ(GetJson("/api/templates"), json({{"ok", true}, {"templates", {app::TemplateJson(*tpl, false)}}}));
  EXPECT_EQ(GetJson("/api/templates/small"),
            json({{"ok", true}, {"template", app::TemplateJson(*tpl, true)}}));
}

TEST_F(ApiTest, JobsPageByLimitAndOffsetAndFilterByState) {
  auto first = GetJson("/api/jobs?limit=1");
  ASSERT_EQ(first["jobs"].size(), 1u);
  EXPECT_EQ(first["jobs"][0]["id"], 2) << "newest first";
  EXPECT_EQ(first["next_offset"], 1);
  auto second = GetJson("/api/jobs?limit=1&offset=1");
  ASSERT_EQ(second["jobs"].size(), 1u);
  EXPECT_EQ(second["jobs"][0]["id"], 1);
  EXPECT_TRUE(second["next_offset"].is_null());
  EXPECT_EQ(GetJson("/api/jobs?state=queued")["jobs"].size(), 2u);
  EXPECT_EQ(GetJson("/api/jobs?state=succeeded")["jobs"].size(), 0u);
}

TEST_F(ApiTest, ErrorsAreTheCliDocumentsWithHttpCodes) {
  // The same message the CLI prints for `jobs list --state bogus`.
  auto want_state = app::JobListFilter({"bogus", 100});
  ASSERT_FALSE(want_state.IsOk());
  auto bad_state = GetJson("/api/jobs?state=bogus", 400);
  EXPECT_EQ(bad_state["error"]["message"], want_state.GetStatus().Message());
  EXPECT_EQ(bad_state["error"]["field"], "state");
  EXPECT_EQ(GetJson("/api/jobs?limit=0", 400)["error"]["field"], "limit");
  EXPECT_EQ(GetJson("/api/jobs?limit=x", 400)["error"]["field"], "limit");
  EXPECT_EQ(GetJson("/api/jobs/abc", 400)["error"]["field"], "id");
  auto missing_job = app::ShowJob(*meta_, 99);
  ASSERT_FALSE(missing_job.IsOk());
  EXPECT_EQ(GetJson("/api/jobs/99", 404)["error"]["message"], missing_job.GetStatus().Message());
  EXPECT_EQ(GetJson("/api/datasets/nope", 404)["error"]["code"], "not_found");
  EXPECT_EQ(GetJson("/api/models/nope", 404)["error"]["code"], "not_found");
  EXPECT_EQ(GetJson("/api/templates/nope", 404)["error"]["code"], "not_found");
  EXPECT_EQ(GetJson("/api/nothing", 404)["error"]["code"], "not_found");
  HttpReply post = Get(port_, "/api/jobs/1", {"Content-Length: 0"}, "POST");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers["allow"], "GET");
  EXPECT_EQ(json::parse(post.body)["error"]["code"], "method_not_allowed");
  EXPECT_EQ(Get(port_, "/api/jobs%zz").status, 400);
}

TEST_F(ApiTest, OversizedHeadersAndBodiesAreRefused) {
  HttpReply big_header = Get(port_, "/healthz", {"X-Big: " + std::string(20000, 'a')});
  EXPECT_EQ(big_header.status, 431);
  HttpReply big_body = testing::SendRaw(
      port_,
      "POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000000\r\nConnection: close\r\n\r\n" +
          std::string(1000, 'b'));
  EXPECT_EQ(big_body.status, 413);
}

TEST_F(ApiTest, AnIdleConnectionIsClosedAfterTheRequestTimeout) {
  const auto start = std::chrono::steady_clock::now();
  HttpReply r = testing::SendRaw(port_, "GET /healthz HTTP/1.1\r\nHost: x\r\n", 5000);  // head never ends
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.status, 0);
  EXPECT_LT(s, 4.0) << "the 2 s request timeout closes it";
  EXPECT_GE(s, 1.5);
}

TEST_F(ApiTest, MetricsExposeQueueDepthRequestsAndStreams) {
  GetJson("/healthz");
  SseClient sse(port_, "/api/events");
  ASSERT_EQ(sse.Status(), 200);
  HttpReply m = Get(port_, "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(m.body.find("kestrel_jobs{state=\"queued\",priority=\"normal\"} 2\n"), std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("kestrel_jobs{state=\"running\",priority=\"high\"} 0\n"), std::string::npos);
  EXPECT_NE(m.body.find("kestrel_job_availability 0\n"), std::string::npos);
  EXPECT_NE(m.body.find("kestrel_http_requests_total{method=\"GET\",route=\"/healthz\",code=\"200\"} 1\n"),
            std::string::npos);
  EXPECT_NE(m.body.find("kestrel_http_request_duration_seconds_count{route=\"/healthz\"} 1\n"),
            std::string::npos);
  EXPECT_NE(m.body.find("# TYPE kestrel_http_request_duration_seconds histogram\n"), std::string::npos);
  EXPECT_NE(m.body.find("kestrel_sse_clients 1\n"), std::string::npos);
}

std::vector<std::string> Ids(const std::vector<testing::SseEvent>& evs) {
  std::vector<std::string> out;
  for (const auto& e : evs) out.push_back(e.id);
  return out;
}

TEST_F(ApiTest, EventStreamsReplayWhatAReconnectingClientMissedExactlyOnce) {
  auto before = meta_->ReadEvents(0, 0, 1000);  // the submits' state events
  ASSERT_TRUE(before.IsOk());
  ASSERT_FALSE(before->empty());
  const size_t n0 = before->size();
  std::string last;
  {
    SseClient c(port_, "/api/events");
    auto evs = c.ReadEvents(n0, 3000);
    ASSERT_EQ(evs.size(), n0);
    EXPECT_EQ(evs[0].id, std::to_string((*before)[0].id));
    EXPECT_EQ(json::parse(evs[0].data), EventJson((*before)[0]));
    EXPECT_EQ(evs[0].event, (*before)[0].kind);
    const int64_t live = AppendEvent(1, R"({"loss":1.5})");
    auto more = c.ReadEvents(1, 3000);
    ASSERT_EQ(more.size(), 1u) << "a new event reaches an open stream (no reconnect)";
    EXPECT_EQ(more[0].id, std::to_string(live));
    EXPECT_EQ(json::parse(more[0].data)["payload"]["loss"], 1.5);
    last = more[0].id;
  }  // the client drops
  std::vector<int64_t> missed = {AppendEvent(1, R"({"loss":1.4})"), AppendEvent(2, R"({"loss":1.3})"),
                                 AppendEvent(1, R"({"loss":1.2})")};
  SseClient again(port_, "/api/events", {"Last-Event-ID: " + last});
  auto replay = again.ReadEvents(10, 800);
  EXPECT_EQ(Ids(replay), (std::vector<std::string>{std::to_string(missed[0]), std::to_string(missed[1]),
                                                   std::to_string(missed[2])}))
      << "every missed event, once, in order";
  SseClient by_query(port_, "/api/jobs/1/events?last_event_id=" + last);
  EXPECT_EQ(Ids(by_query.ReadEvents(10, 800)),
            (std::vector<std::string>{std::to_string(missed[0]), std::to_string(missed[2])}))
      << "a job's stream has only its events";
  EXPECT_EQ(Get(port_, "/api/jobs/99/events").status, 404);
  EXPECT_EQ(Get(port_, "/api/events", {"Last-Event-ID: x"}).status, 400);
}

TEST_F(ApiTest, AQuietStreamSendsKeepAliveComments) {
  SseClient c(port_, "/api/events?last_event_id=1000000");
  EXPECT_TRUE(c.ReadEvents(1, 900).empty());
  EXPECT_GE(c.Comments(), 2) << "a comment every 300 ms of silence";
}

TEST_F(ApiTest, ShutdownEndsOpenStreamsAndReturns) {
  SseClient c(port_, "/api/events");
  ASSERT_EQ(c.Status(), 200);
  EXPECT_FALSE(c.ReadEvents(1, 2000).empty());
  const auto t0 = std::chrono::steady_clock::now();
  server_->Stop();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  EXPECT_TRUE(c.ReadUntilClosed(2000)) << "the stream ended";
  EXPECT_EQ(Get(port_, "/healthz").status, 0) << "no longer accepting";
}

TEST_F(ApiTest, OpenApiListsExactlyTheRouterRoutes) {
  json doc = GetJson("/api/openapi.json");
  EXPECT_EQ(doc["openapi"], "3.1.0");
  ApiContext ctx{*meta_, *blobs_, server_->Metrics(), home_};
  auto router = BuildApiRouter(ctx);
  ASSERT_TRUE(router.IsOk());
  size_t listed = 0;
  for (const auto& [path, ops] : doc["paths"].items()) {
    for (const auto& [method, op] : ops.items()) {
      std::string upper = method;
      for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      bool found = false;
      for (const auto& r : router->Routes()) found = found || (r.method == upper && r.pattern == path);
      EXPECT_TRUE(found) << upper << " " << path << " is documented but not routed";
      EXPECT_FALSE(op["summary"].get<std::string>().empty()) << path;
      ++listed;
    }
  }
  for (const auto& r : router->Routes()) {
    std::string lower = r.method;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    EXPECT_TRUE(doc["paths"].contains(r.pattern) && doc["paths"][r.pattern].contains(lower))
        << r.method << " " << r.pattern << " is routed but not documented";
  }
  EXPECT_EQ(listed, router->Routes().size());
}

}  // namespace
}  // namespace kestrel::server
