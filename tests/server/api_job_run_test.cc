// A run's own routes over real HTTP on loopback (issue 33, docs/server.md
// "Names, tags and notes", "Console log"): POST /api/jobs/{id}/labels sets
// the name, tags and note as `kestrel jobs rename|tag|note` do (400s naming
// the field, 403 for a read-only token), GET /api/jobs?search= finds jobs by
// them, the job detail names its dataset version and registered model, and
// GET /api/jobs/{id}/log streams an attempt's log: its tail, then what the
// file gains, resumable from Last-Event-ID (a byte offset), never cutting a
// UTF-8 character.
#include "server/api_job_run.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "app/job_labels.h"
#include "app/jobs.h"
#include "read_route_test.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

class ApiJobRunTest : public testing::ReadRouteTest {
 protected:
  void SetUp() override {
    OpenHomeAndServe("kestrel_server_job_run_", 2);
    if (HasFatalFailure()) return;
    auto c = app::CreateToken(*meta_, "writer", false, 1000);
    ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    write_ = c->token;
  }
  int64_t Submit(const std::vector<std::string>& keys) {
    auto d = app::DraftJob(keys, nullptr);
    EXPECT_TRUE(d.IsOk()) << d.GetStatus().ToString();
    if (!d.IsOk()) return 0;
    auto s = app::SubmitJob(*meta_, std::move(d).Value(), 1000);
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    return s.IsOk() ? s->job.id : 0;
  }
  HttpReply Post(int64_t id, const std::string& body, const std::string& token = "") {
    return testing::Call(server_->Port(), "POST", "/api/jobs/" + std::to_string(id) + "/labels",
                         token.empty() ? write_ : token, body);
  }
  std::string write_;
};

TEST_F(ApiJobRunTest, LabelsAreSetValidatedAndSearchable) {
  const int64_t a = Submit({"data=birds", "epochs=3", "model=n"});
  const int64_t b = Submit({"data=birds", "epochs=4"});
  ASSERT_GT(b, a);
  // The submit's default name: the dataset as the registry names it, the model's stem, the epochs.
  json job = Doc("/api/jobs/" + std::to_string(a));
  EXPECT_EQ(job["job"]["name"], "birds v1 · n · 3 epochs");
  EXPECT_EQ(job["job"]["tags"], json::array());
  EXPECT_EQ(job["dataset"], (json{{"name", "birds"}, {"version", "v1"}}));
  EXPECT_TRUE(job["model"].is_null());
  // A model registered from the job: the detail names it with its mAP.
  store::ModelRecord m;
  m.id = std::string(64, 'c');
  m.name = "birds";
  m.created_ms = 2000;
  m.weights_sha = std::string(64, 'd');
  m.weights_bytes = 1;
  m.format = "safetensors";
  m.job_id = a;
  m.map50 = 0.5;
  m.map50_95 = 0.25;
  bool created = false;
  auto added = meta_->AddModel(m, &created);
  ASSERT_TRUE(added.IsOk()) << added.GetStatus().ToString();
  job = Doc("/api/jobs/" + std::to_string(a));
  EXPECT_EQ(job["model"],
            (json{{"id", m.id}, {"name", "birds"}, {"version", "v1"}, {"map50", 0.5}, {"map50_95", 0.25}}));

  HttpReply r =
      Post(b, R"({"name": "Baseline run", "tags": ["lr", "sweep"], "note": "first try\nmosaic on"})");
  ASSERT_EQ(r.status, 200) << r.body;
  json doc = json::parse(r.body);
  EXPECT_EQ(doc["job"]["name"], "Baseline run");
  EXPECT_EQ(doc["job"]["tags"], (json{"lr", "sweep"}));
  r = Post(b, R"({"add_tags": ["best", "lr"], "remove_tags": ["sweep"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["job"]["tags"], (json{"lr", "best"}));
  EXPECT_EQ(json::parse(r.body)["job"]["note"], "first try\nmosaic on");

  // Refusals name the field; a read-only token may not write; an unknown job is a 404.
  for (const auto& [body, field] :
       std::vector<std::pair<std::string, std::string>>{{R"({"name": ""})", "name"},
                                                        {R"({"name": 3})", "name"},
                                                        {R"({"tags": ["has space"]})", "tags"},
                                                        {R"({"add_tags": "x"})", "add_tags"},
                                                        {R"({"note": "bell\u0007"})", "note"},
                                                        {R"({"colour": "red"})", "colour"}}) {
    r = Post(b, body);
    EXPECT_EQ(r.status, 400) << body << ": " << r.body;
    EXPECT_EQ(json::parse(r.body, nullptr, false)["error"]["field"], field) << body << ": " << r.body;
  }
  EXPECT_EQ(Post(b, R"({"name": "x"})", read_).status, 403);
  EXPECT_EQ(Post(999, R"({"name": "x"})").status, 404);

  auto ids = [&](const std::string& q) {
    std::vector<int64_t> out;
    const json page = Doc("/api/jobs?search=" + q);
    for (const auto& j : page["jobs"]) out.push_back(j["id"].get<int64_t>());
    return out;
  };
  EXPECT_EQ(ids("baseline"), (std::vector<int64_t>{b}));
  EXPECT_EQ(ids("BEST"), (std::vector<int64_t>{b}));
  EXPECT_EQ(ids("mosaic"), (std::vector<int64_t>{b}));
  EXPECT_EQ(ids("3%20epochs"), (std::vector<int64_t>{a}));
  EXPECT_EQ(ids("birds"), (std::vector<int64_t>{a})) << "b was renamed";
  EXPECT_TRUE(ids("nothing").empty());
}

// The submit dialog's key list: the kind's keys a submitter may set, with
// type, range and default, then the job keys; refused keys left out.
TEST_F(ApiJobRunTest, KindKeysListTypesAndDefaultsWithoutRefusedKeys) {
  json doc = Doc("/api/job-kinds/train/keys");
  std::map<std::string, json> by_key;
  for (const auto& k : doc["keys"]) by_key[k["key"].get<std::string>()] = k;
  ASSERT_TRUE(by_key.count("epochs")) << doc.dump().substr(0, 400);
  EXPECT_EQ(by_key["epochs"]["type"], "int");
  EXPECT_FALSE(by_key["epochs"]["default"].get<std::string>().empty());
  EXPECT_EQ(by_key["epochs"]["job_key"], false);
  ASSERT_TRUE(by_key.count("priority"));
  EXPECT_EQ(by_key["priority"]["job_key"], true);
  EXPECT_EQ(by_key.count("resume"), 0u) << "the job system's keys are not offered";
  EXPECT_EQ(by_key.count("project"), 0u);
  EXPECT_EQ(Doc("/api/job-kinds/val/keys")["kind"], "val");
  EXPECT_EQ(Doc("/api/job-kinds/nosuch/keys", 404)["error"]["field"], "kind");
}

TEST(JobLogEventsTest, TailStartsAtALineAndChunksEndOnCharacters) {
  const fs::path dir = fs::temp_directory_path() / ("kestrel_job_log_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "attempt-1.log").string();
  EXPECT_EQ(LogTailStart(path, 10), 0) << "a missing file starts at 0";
  EXPECT_TRUE(ReadLogEvents(path, 1, 0)->empty());
  std::ofstream(path) << "line one\nline two\nline three\n";
  EXPECT_EQ(LogTailStart(path, 1000), 0);
  EXPECT_EQ(LogTailStart(path, 12), 18) << "the first line that begins in the last 12 bytes";
  EXPECT_EQ(LogTailStart(path, 11), 18) << "a line that begins exactly at the tail counts";
  EXPECT_EQ(LogTailStart(path, 10), 29) << "no line begins in the tail: the end";
  auto ev = ReadLogEvents(path, 1, 9);
  ASSERT_TRUE(ev.IsOk());
  ASSERT_EQ(ev->size(), 1u);
  EXPECT_EQ((*ev)[0].event, "log");
  EXPECT_EQ((*ev)[0].id, 29);
  json d = json::parse((*ev)[0].data);
  EXPECT_EQ(d["offset"], 9);
  EXPECT_EQ(d["text"], "line two\nline three\n");
  EXPECT_TRUE(ReadLogEvents(path, 1, 29)->empty()) << "nothing new";
  // "é" is two bytes: a write that ends between them sends the first half later.
  std::ofstream(path, std::ios::app) << "caf\xC3";
  ev = ReadLogEvents(path, 1, 29);
  ASSERT_EQ(ev->size(), 1u);
  EXPECT_EQ(json::parse((*ev)[0].data)["text"], "caf");
  EXPECT_EQ((*ev)[0].id, 32);
  std::ofstream(path, std::ios::app) << "\xA9\n";
  ev = ReadLogEvents(path, 1, 32);
  ASSERT_EQ(ev->size(), 1u);
  EXPECT_EQ(json::parse((*ev)[0].data)["text"], "\xC3\xA9\n");
  fs::remove_all(dir);
}

TEST_F(ApiJobRunTest, LogStreamSendsTheTailThenWhatTheFileGains) {
  const int64_t id = Submit({"data=birds", "epochs=3"});
  const fs::path log = fs::path(home_) / "jobs" / std::to_string(id) / "attempt-1.log";
  fs::create_directories(log.parent_path());
  std::ofstream(log) << "epoch 1/3 loss 1.5\n";
  const std::string target = "/api/jobs/" + std::to_string(id) + "/log";
  testing::SseClient s(server_->Port(), target, {"Authorization: Bearer " + read_});
  ASSERT_EQ(s.Status(), 200);
  auto got = s.ReadEvents(1, 3000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].event, "log");
  EXPECT_EQ(json::parse(got[0].data)["text"], "epoch 1/3 loss 1.5\n");
  EXPECT_EQ(got[0].id, "19");
  std::ofstream(log, std::ios::app) << "epoch 2/3 loss 1.2\n";
  got = s.ReadEvents(1, 3000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(json::parse(got[0].data)["text"], "epoch 2/3 loss 1.2\n");
  EXPECT_EQ(json::parse(got[0].data)["offset"], 19);
  s.Close();
  // A reconnect from Last-Event-ID gets only what came after it.
  testing::SseClient again(server_->Port(), target, {"Authorization: Bearer " + read_, "Last-Event-ID: 19"});
  ASSERT_EQ(again.Status(), 200);
  got = again.ReadEvents(1, 3000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(json::parse(got[0].data)["text"], "epoch 2/3 loss 1.2\n");
  again.Close();
  EXPECT_EQ(Doc(target + "?attempt=2", 404)["error"]["field"], "attempt");
  EXPECT_EQ(Doc(target + "?attempt=x", 400)["error"]["field"], "attempt");
  EXPECT_EQ(Doc("/api/jobs/999/log", 404)["ok"], false);
  Doc(target, 401, false);
}

}  // namespace
}  // namespace kestrel::server
