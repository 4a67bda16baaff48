// Tokens and the write routes over real HTTP on loopback (docs/server.md
// "Auth", "Writes"): an in-process ApiServer on port 0 over a temporary
// SQLite home. Reads and writes without, with a wrong, a malformed, a
// read-only and a revoked token; --public-read; submit (keys, template),
// cancel, retry, tag/promote/untag end to end with bodies equal to the app
// views `kestrel … --json` prints; malformed and oversized bodies.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "app/datasets.h"
#include "app/jobs.h"
#include "app/models.h"
#include "app/templates.h"
#include "app/tokens.h"
#include "birds_home.h"
#include "core/env.h"
#include "core/safetensors.h"
#include "data/synth.h"
#include "http_client.h"
#include "server/api.h"
#include "write_route_test.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

// write_route_test.h: tokens, servers, Call and Doc.
class AuthWriteTest : public testing::WriteRouteTest {
 protected:
  void SetUp() override {
    testing::OpenHomeWithBirds("kestrel_server_auth_", 6, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    auto t = app::TemplateLibrary(*meta_).Save("small", {"epochs=3", "imgsz=64"}, 3000);
    ASSERT_TRUE(t.IsOk()) << t.GetStatus().ToString();
    testing::RegisterBirdsModel(*meta_, *blobs_, dir_, 2000);
    if (HasFatalFailure()) return;
    CreateTokens();
    port_ = StartServer();
  }
  int StartPublicRead() {
    ServerOptions o;
    o.public_read = true;
    return StartServer(o);
  }

  int64_t SubmitDirect(const std::vector<std::string>& tokens) {
    auto d = app::DraftJob(tokens, nullptr);
    EXPECT_TRUE(d.IsOk()) << d.GetStatus().ToString();
    auto s = app::SubmitJob(*meta_, std::move(d).Value(), 4000);
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    return s.IsOk() ? s->job.id : 0;
  }
  store::JobState State(int64_t id) { return meta_->GetJob(id)->state; }
};

TEST_F(AuthWriteTest, ReadsNeedATokenAndHealthChecksDoNot) {
  for (const std::string target : {"/api/jobs", "/api/datasets", "/api/models/birds", "/api/stats",
                                   "/metrics", "/api/openapi.json", "/api/events", "/api/runs?ids=1"}) {
    HttpReply r = Call("GET", target);
    json doc = Doc(r, 401, target);
    EXPECT_EQ(doc["ok"], false);
    EXPECT_EQ(doc["error"]["code"], "unauthenticated") << target;
    EXPECT_EQ(doc["error"]["field"], "Authorization") << target;
    EXPECT_EQ(r.headers["www-authenticate"], "Bearer realm=\"kestrel\"") << target;
    EXPECT_EQ(r.headers.count("access-control-allow-origin"), 0u) << "CORS stays off";
  }
  EXPECT_EQ(Call("GET", "/healthz").status, 200);
  EXPECT_EQ(Call("GET", "/readyz").status, 200);
  EXPECT_EQ(Call("GET", "/api/jobs", read_).status, 200) << "a read-only token reads";
  EXPECT_EQ(Call("GET", "/api/jobs", write_).status, 200) << "a read-write token reads too";
  EXPECT_EQ(Call("GET", "/metrics", read_).status, 200);
  EXPECT_EQ(Call("GET", "/api/nothing").status, 404) << "an unknown route is not an auth question";
}

TEST_F(AuthWriteTest, WritesNeedALiveReadWriteToken) {
  const int64_t id = SubmitDirect({"data=birds", "epochs=1"});
  const std::string cancel = "/api/jobs/" + std::to_string(id) + "/cancel";
  std::string wrong = write_;
  wrong.back() = wrong.back() == '0' ? '1' : '0';
  const std::string unknown = "kst_000000000000_" + std::string(64, '0');
  struct Refused {
    std::vector<std::string> header;
    int status;
    std::string code;
  };
  for (const auto& [header, status, code] : std::vector<Refused>{
           {{}, 401, "unauthenticated"},
           {{"Authorization: Bearer " + wrong}, 401, "unauthenticated"},
           {{"Authorization: Bearer " + unknown}, 401, "unauthenticated"},
           {{"Authorization: Bearer not-a-token"}, 401, "unauthenticated"},
           {{"Authorization: Basic " + write_}, 401, "unauthenticated"},
           {{"Authorization: Bearer " + read_}, 403, "permission_denied"},
       }) {
    std::vector<std::string> h = header;
    h.push_back("Content-Length: 0");
    json doc = Doc(testing::Get(port_, cancel, h, "POST"), status, header.empty() ? "no token" : header[0]);
    EXPECT_EQ(doc["error"]["code"], code) << (header.empty() ? "no token" : header[0]);
    EXPECT_EQ(State(id), store::JobState::kQueued) << "a refused write changes nothing";
  }
  EXPECT_EQ(Doc(Call("POST", cancel, wrong), 401, "wrong")["error"]["message"], "unknown token");
  EXPECT_NE(Doc(Call("POST", cancel, read_), 403, "read-only")["error"]["message"].get<std::string>().find(
                "read-only"),
            std::string::npos);

  // A revoked token stops working at once, for writes and reads.
  const std::string doomed = Token("doomed", false);
  EXPECT_EQ(Call("GET", "/api/jobs", doomed).status, 200);
  ASSERT_TRUE(app::RevokeToken(*meta_, "doomed", 5000).IsOk());
  json revoked = Doc(Call("POST", cancel, doomed), 401, "revoked");
  EXPECT_NE(revoked["error"]["message"].get<std::string>().find("revoked"), std::string::npos) << revoked;
  EXPECT_EQ(Call("GET", "/api/jobs", doomed).status, 401);
  EXPECT_EQ(State(id), store::JobState::kQueued);

  EXPECT_EQ(Call("POST", cancel, write_).status, 200);
  EXPECT_EQ(State(id), store::JobState::kCancelled);
  // The use was recorded (once a minute at most).
  auto writer = app::ListTokens(*meta_);
  ASSERT_TRUE(writer.IsOk());
  for (const auto& t : *writer) {
    if (t.name == "writer") {
      EXPECT_GT(t.last_used_ms, 0);
    }
  }
}

TEST_F(AuthWriteTest, PublicReadOpensReadsButNotWrites) {
  const int64_t id = SubmitDirect({"data=birds", "epochs=1"});
  const int pub = StartPublicRead();
  EXPECT_EQ(Call("GET", "/api/jobs", "", "", pub).status, 200);
  EXPECT_EQ(Call("GET", "/metrics", "", "", pub).status, 200);
  EXPECT_EQ(Call("GET", "/api/jobs/" + std::to_string(id), "", "", pub).status, 200);
  EXPECT_EQ(Call("POST", "/api/jobs/" + std::to_string(id) + "/cancel", "", "", pub).status, 401);
  EXPECT_EQ(Call("POST", "/api/jobs/" + std::to_string(id) + "/cancel", read_, "", pub).status, 403);
  EXPECT_EQ(Call("GET", "/api/jobs", "kst_bogus", "", pub).status, 401) << "a presented token is checked";
  EXPECT_EQ(State(id), store::JobState::kQueued);
  EXPECT_EQ(Call("GET", "/api/jobs").status, 401) << "the other server is not public";
}

TEST_F(AuthWriteTest, SubmitCancelRetryReturnTheCliViews) {
  // From keys.
  json first =
      Doc(Call("POST", "/api/jobs", write_, R"({"keys": {"data": "birds", "epochs": 2, "imgsz": 64}})"), 201,
          "submit");
  ASSERT_EQ(first["created"], true) << first;
  const int64_t id = first["job_id"].get<int64_t>();
  // The same submission through the app layer (what `kestrel --json submit` prints) finds that job.
  auto d = app::DraftJob({"data=birds", "epochs=2", "imgsz=64"}, nullptr);
  ASSERT_TRUE(d.IsOk());
  auto again = app::SubmitJob(*meta_, std::move(d).Value(), 5000);
  ASSERT_TRUE(again.IsOk());
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, id);
  json dup =
      Doc(Call("POST", "/api/jobs", write_, R"({"keys": {"data": "birds", "epochs": 2, "imgsz": 64}})"), 200,
          "resubmit");
  EXPECT_EQ(dup, app::SubmitResultJson(*again)) << "an identical live job: 200, the same view";
  EXPECT_EQ(first["dedup_key"], dup["dedup_key"]);

  // From a template plus overrides: the body's keys win over the template's.
  json templated = Doc(Call("POST", "/api/jobs", write_,
                            R"({"template": "small", "keys": {"data": "birds@v1", "epochs": 5}})"),
                       201, "template submit");
  auto tjob = app::ShowJob(*meta_, templated["job_id"].get<int64_t>());
  ASSERT_TRUE(tjob.IsOk());
  const json config = app::JobConfigJson(tjob->job);
  EXPECT_EQ(config["epochs"], 5);
  EXPECT_EQ(config["imgsz"], 64) << "from the template";

  // Cancel, then retry: the views `kestrel --json jobs cancel|retry` print.
  json cancelled = Doc(Call("POST", "/api/jobs/" + std::to_string(id) + "/cancel", write_), 200, "cancel");
  auto job = meta_->GetJob(id);
  ASSERT_TRUE(job.IsOk());
  EXPECT_EQ(job->state, store::JobState::kCancelled);
  EXPECT_EQ(cancelled, json({{"ok", true}, {"job", app::JobJson(*job, false)}}));
  auto twice = app::CancelJob(*meta_, id, 6000);
  ASSERT_FALSE(twice.IsOk());
  json conflict =
      Doc(Call("POST", "/api/jobs/" + std::to_string(id) + "/cancel", write_, "{}"), 409, "cancel twice");
  EXPECT_EQ(conflict["error"]["message"], twice.GetStatus().Message()) << "the CLI's text";
  json retried = Doc(Call("POST", "/api/jobs/" + std::to_string(id) + "/retry", write_), 200, "retry");
  job = meta_->GetJob(id);
  EXPECT_EQ(job->state, store::JobState::kQueued);
  EXPECT_EQ(retried, json({{"ok", true}, {"job", app::JobJson(*job, false)}}));
  EXPECT_EQ(Doc(Call("POST", "/api/jobs/999/cancel", write_), 404, "unknown job")["error"]["code"],
            "not_found");
  EXPECT_EQ(Doc(Call("POST", "/api/jobs/abc/retry", write_), 400, "bad id")["error"]["field"], "id");
}

// kind=export through POST /api/jobs: the same DraftJob/SubmitJob path as
// `kestrel submit`, so the export keys are checked with `kestrel export`'s
// messages and a registered model is pinned as NAME@vN.
TEST_F(AuthWriteTest, ExportJobsAreSubmittedThroughTheSameSubmitPath) {
  json created = Doc(Call("POST", "/api/jobs", write_,
                          R"({"keys": {"kind": "export", "model": "birds", "format": "onnx", "imgsz": 64}})"),
                     201, "export submit");
  ASSERT_EQ(created["created"], true) << created;
  auto job = app::ShowJob(*meta_, created["job_id"].get<int64_t>());
  ASSERT_TRUE(job.IsOk()) << job.GetStatus().ToString();
  EXPECT_EQ(app::JobKindText(job->job), "export");
  const json config = app::JobConfigJson(job->job);
  EXPECT_EQ(config["model"], "birds@v1") << "pinned: a retry exports the same version";
  EXPECT_EQ(config["imgsz"], "64");
  auto model = app::ModelRegistry(*meta_, *blobs_, Env::Default()).Resolve("birds@v1");
  ASSERT_TRUE(model.IsOk());
  EXPECT_EQ(job->job.spec.dataset_version, model->dataset_version);
  for (const std::vector<std::string>& keys :
       std::vector<std::vector<std::string>>{{"kind=export", "model=birds@v1", "opset=11"},
                                             {"kind=export", "model=birds@v1", "imgsz=33"},
                                             {"kind=export", "model=birds@v1", "format=tflite"},
                                             {"kind=export", "model=birds@v1", "output=/etc/x.onnx"},
                                             {"kind=export", "model=birds@v1", "min_map50=0.5"}}) {
    auto want = app::DraftJob(keys, nullptr);
    ASSERT_FALSE(want.IsOk());
    json body = {{"keys", json::object()}};
    for (const auto& k : keys) body["keys"][k.substr(0, k.find('='))] = k.substr(k.find('=') + 1);
    json doc = Doc(Call("POST", "/api/jobs", write_, body.dump()), 400, body.dump());
    EXPECT_EQ(doc["error"]["message"], want.GetStatus().Message());
    EXPECT_EQ(doc["error"]["field"], want.GetStatus().Where().field);
  }
}

TEST_F(AuthWriteTest, TagPromoteAndUntagReturnTheCliViews) {
  json tagged = Doc(Call("POST", "/api/models/birds@v1/tags", write_, R"({"tag": "candidate"})"), 200, "tag");
  app::ModelRegistry reg(*meta_, *blobs_, Env::Default());
  auto m = reg.Resolve("birds@candidate");
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  EXPECT_EQ(tagged, json({{"ok", true},
                          {"model", app::ModelJson(*m, *blobs_, false)},
                          {"tag", "candidate"},
                          {"previous", nullptr}}));
  // tag production = `kestrel models promote`.
  json promoted =
      Doc(Call("POST", "/api/models/birds/tags", write_, R"({"tag": "production"})"), 200, "promote");
  EXPECT_EQ(promoted["tag"], "production");
  EXPECT_TRUE(reg.Resolve("birds@production").IsOk());
  json untagged = Doc(Call("DELETE", "/api/models/birds@v1/tags/candidate", write_), 200, "untag");
  m = reg.Resolve("birds@v1");
  ASSERT_TRUE(m.IsOk());
  EXPECT_EQ(untagged,
            json({{"ok", true}, {"model", app::ModelJson(*m, *blobs_, false)}, {"tag", "candidate"}}));
  EXPECT_FALSE(reg.Resolve("birds@candidate").IsOk());

  auto bad_tag = reg.Tag("birds@v1", "Bad Tag", 7000);
  ASSERT_FALSE(bad_tag.IsOk());
  json refused =
      Doc(Call("POST", "/api/models/birds@v1/tags", write_, R"({"tag": "Bad Tag"})"), 400, "bad tag");
  EXPECT_EQ(refused["error"]["message"], bad_tag.GetStatus().Message());
  EXPECT_EQ(
      Doc(Call("POST", "/api/models/nope/tags", write_, R"({"tag": "x"})"), 404, "unknown")["error"]["code"],
      "not_found");
  EXPECT_EQ(Call("POST", "/api/models/birds/tags", read_, R"({"tag": "x"})").status, 403);
}

TEST_F(AuthWriteTest, BadBodiesAreRefusedNamingTheBodyOrTheKey) {
  struct Case {
    std::string body, field;
  };
  for (const auto& [body, field] : std::vector<Case>{{"{x", "body"},
                                                     {"", "body"},
                                                     {"[1, 2]", "body"},
                                                     {R"({"key": {}})", "key"},
                                                     {R"({"keys": [1]})", "keys"},
                                                     {R"({"keys": {"epochs": [1]}})", "epochs"},
                                                     {R"({"keys": {"epochs=3": 1}})", "epochs=3"},
                                                     {R"({"template": 3, "keys": {}})", "template"},
                                                     {"{}", "body"}}) {
    json doc = Doc(Call("POST", "/api/jobs", write_, body), 400, body);
    EXPECT_EQ(doc["error"]["code"], "invalid_argument") << body;
    EXPECT_EQ(doc["error"]["field"], field) << body << ": " << doc;
  }
  EXPECT_NE(Doc(Call("POST", "/api/jobs", write_, "{x"), 400, "malformed")["error"]["message"]
                .get<std::string>()
                .find("the request body is not valid JSON (at byte "),
            std::string::npos);
  // The submit checks and texts of `kestrel submit`.
  for (const std::vector<std::string>& keys : std::vector<std::vector<std::string>>{
           {"data=birds", "epochs=0"}, {"data=birds", "epoch=3"}, {"data=birds", "imgsz=33"}}) {
    auto want = app::DraftJob(keys, nullptr);
    ASSERT_FALSE(want.IsOk());
    json body = {{"keys", json::object()}};
    for (const auto& k : keys) body["keys"][k.substr(0, k.find('='))] = k.substr(k.find('=') + 1);
    json doc = Doc(Call("POST", "/api/jobs", write_, body.dump()), 400, body.dump());
    EXPECT_EQ(doc["error"]["message"], want.GetStatus().Message());
    EXPECT_EQ(doc["error"]["field"], want.GetStatus().Where().field);
    EXPECT_EQ(doc["error"]["file"], app::kRequestFile);
  }
  json no_data =
      Doc(Call("POST", "/api/jobs", write_, R"({"keys": {"data": "nope", "epochs": 1}})"), 400, "nope");
  EXPECT_EQ(no_data["error"]["field"], "data");
  EXPECT_EQ(Doc(Call("POST", "/api/jobs", write_, R"({"template": "nope", "keys": {"data": "birds"}})"), 404,
                "unknown template")["error"]["code"],
            "not_found");
  EXPECT_EQ(Doc(Call("POST", "/api/jobs/1/cancel", write_, "nope"), 400, "cancel body")["error"]["field"],
            "body");
  EXPECT_EQ(
      Doc(Call("POST", "/api/models/birds/tags", write_, R"({"tags": "x"})"), 400, "tags")["error"]["field"],
      "tags");
  // Larger than the 1 MiB body limit: refused before any handler runs.
  json big = Doc(Call("POST", "/api/jobs", write_, std::string(1100 * 1024, ' ')), 413, "big");
  EXPECT_EQ(big["error"]["code"], "body_too_large");
  EXPECT_TRUE(app::ListJobs(*meta_, {"", 100})->empty()) << "nothing was queued";
}

TEST_F(AuthWriteTest, OpenApiDeclaresTheBearerSchemeAndTheWriteBodies) {
  json doc = Doc(Call("GET", "/api/openapi.json", read_), 200, "openapi");
  EXPECT_EQ(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
  EXPECT_EQ(doc["paths"]["/healthz"]["get"]["security"], json::array());
  EXPECT_EQ(doc["paths"]["/api/jobs"]["get"]["security"], json::array({{{"bearer", json::array()}}}));
  for (const auto& [path, method] :
       std::vector<std::pair<std::string, std::string>>{{"/api/jobs", "post"},
                                                        {"/api/jobs/{id}/cancel", "post"},
                                                        {"/api/jobs/{id}/retry", "post"},
                                                        {"/api/models/{ref}/tags", "post"},
                                                        {"/api/models/{ref}/tags/{tag}", "delete"}}) {
    ASSERT_TRUE(doc["paths"].contains(path) && doc["paths"][path].contains(method)) << method << " " << path;
    EXPECT_EQ(doc["paths"][path][method]["security"], json::array({{{"bearer", json::array()}}})) << path;
  }
  EXPECT_EQ(doc["paths"]["/api/jobs"]["post"]["requestBody"]["required"], true);
  EXPECT_EQ(doc["paths"]["/api/models/{ref}/tags"]["post"]["requestBody"]["required"], true);
}

}  // namespace
}  // namespace kestrel::server
