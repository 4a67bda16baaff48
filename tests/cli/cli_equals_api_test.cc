// CLI equals API (issue 27): for every command family with both a read
// command and a read route, `kestrel --json <command>` prints the document
// GET <route> returns for the same store — compared directly, one `kestrel`
// process per command against one in-process ApiServer on loopback over the
// same home. Fields that legitimately differ are named where they are
// removed. The families without the other half are listed in
// docs/testing.md "CLI equals API".
//
// The store is made through the CLI where it can (datasets, a registered
// model and its tag, a template, a token, submitted jobs); what only a worker
// does (claiming jobs, a val attempt's run and result, a training attempt's
// samples, the worker's registration) is done here through the store and
// app/ as the worker's `val --job` child does it, so no LibTorch is needed.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../server/http_client.h"
#include "app/evaluate.h"
#include "app/jobs.h"
#include "cli_fixture.h"
#include "core/env.h"
#include "core/json.h"
#include "core/safetensors.h"
#include "server/api.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CliEqualsApiTest : public KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    home_ = (dir_ / "home").string();
  }
  void TearDown() override {
    server_.reset();
    meta_.reset();
    KestrelCliTest::TearDown();
  }

  // `kestrel --json ARGS`, which must succeed: its document.
  json Cli(const std::string& args) {
    CliRun r = Kestrel("--json " + args);
    EXPECT_EQ(r.code, 0) << "kestrel --json " << args << "\n" << r.out;
    return Json(r);
  }
  // GET `target` (200 expected): its document.
  json Api(const std::string& target, const std::vector<std::string>& headers = {}) {
    server::testing::HttpReply r = server::testing::Get(server_->Port(), target, headers);
    EXPECT_EQ(r.status, 200) << target << ": " << r.body;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << target << ": " << r.body;
    return j;
  }
  // A one-tensor safetensors file (what submit and `models register` check).
  std::string Weights(const std::string& stem) {
    SafeTensorFile f;
    const float v = static_cast<float>(stem.size());
    f.tensors[stem] = SafeTensor{"F32", {1}, std::string(reinterpret_cast<const char*>(&v), sizeof v)};
    const std::string path = (dir_ / (stem + ".safetensors")).string();
    std::ofstream(path, std::ios::binary) << SerializeSafeTensors(f);
    return path;
  }
  // Claims the next queued job as worker w1 (it must be `want`).
  void Claim(int64_t want) {
    store::ClaimRequest req;
    req.worker = "w1";
    req.host = "hostA";
    req.devices = {store::DeviceOffer{"cpu", 0, 0}};
    req.now_ms = Env::Default().UnixMillis();
    req.lease_ms = 3'600'000;
    auto c = meta_->ClaimJob(req);
    ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
    ASSERT_EQ(c->job.id, want);
  }
  // Completes val job `id` (claimed) as its `val --job` child would: the
  // run of `predictions` on tiny@v1's val split, then the result document.
  void FinishValJob(int64_t id, const std::string& predictions) {
    auto job = meta_->GetJob(id);
    ASSERT_TRUE(job.IsOk());
    const json cfg = json::parse(job->spec.config_json);
    app::ValKeys keys;
    keys.predictions = predictions;
    keys.data = "tiny@v1";
    keys.save_json = true;
    keys.plots = false;
    const fs::path attempt = fs::path(home_) / "jobs" / std::to_string(id) / "attempt-1";
    fs::create_directories(attempt.parent_path());
    auto run = app::EvaluatePredictions(Env::Default(), *meta_, *blobs_, keys, attempt.string());
    ASSERT_TRUE(run.IsOk()) << run.GetStatus().ToString();
    const eval::EvalResult& r = run->result;
    store::AttemptOutcome out;
    out.success = true;
    out.result_json = DumpJson(json{{"kind", "val"},
                                    {"model", cfg["model"]},
                                    {"data", cfg["data"]},
                                    {"split", "val"},
                                    {"images", r.images},
                                    {"instances", r.instances},
                                    {"map50", r.map50},
                                    {"map50_95", r.map5095},
                                    {"precision", r.precision},
                                    {"recall", r.recall},
                                    {"fitness", r.fitness},
                                    {"run_dir", attempt.string()},
                                    {"record_sha", run->record_sha},
                                    {"record_path", run->record_path},
                                    {"attempt", 1}});
    ASSERT_TRUE(meta_->CompleteAttempt(id, 1, "w1", out, Env::Default().UnixMillis()).IsOk());
  }
  // YOLO txt predictions for tiny@v1's val split under dir_/NAME: the labels
  // themselves on the images `right(i)` picks, nothing on the others.
  std::string Predictions(const std::string& name, bool (*right)(size_t)) {
    auto split = app::LoadSplit(*meta_, *blobs_, "tiny@v1", "val");
    EXPECT_TRUE(split.IsOk()) << split.GetStatus().ToString();
    const fs::path folder = dir_ / name;
    fs::create_directories(folder);
    if (!split.IsOk()) return folder.string();
    for (size_t i = 0; i < split->split.images.size(); ++i) {
      const eval::SplitImage& im = split->split.images[i];
      std::ofstream out(folder / (im.stem + ".txt"));
      if (!right(i)) continue;
      const double w = im.width, h = im.height;
      for (const auto& g : im.labels) {
        out << g.class_id << " " << (g.box.x1 + g.box.x2) / 2 / w << " " << (g.box.y1 + g.box.y2) / 2 / h
            << " " << (g.box.x2 - g.box.x1) / w << " " << (g.box.y2 - g.box.y1) / h << " 0.9\n";
      }
    }
    return folder.string();
  }
  // A samples file of training job `id`'s attempt 1, as the trainer writes it
  // (docs/formats.md "Epoch samples"), showing `image` (a dataset image view).
  void WriteSamples(int64_t id, int epoch, const json& image) {
    const fs::path d = fs::path(home_) / "jobs" / std::to_string(id) / "attempt-1" / "samples";
    fs::create_directories(d);
    const json sample = {{"sha", image["sha"]},
                         {"path", image["path"]},
                         {"width", image["width"]},
                         {"height", image["height"]},
                         {"labels", json::array()},
                         {"detections", {{{"class_id", 0}, {"score", 0.5}, {"box", {1, 2, 3, 4}}}}}};
    std::ofstream(d / ("epoch-" + std::to_string(epoch) + ".json")) << json{
        {"format", "kestrel-epoch-samples"},
        {"format_version", 1},
        {"epoch", epoch},
        {"dataset", "tiny"},
        {"version", 1},
        {"version_id", "x"},
        {"conf", 0.25},
        {"names", {"a", "b"}},
        {"images", {sample}},
        {"written_by", 1}}.dump();
  }

  std::string home_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
  std::unique_ptr<server::ApiServer> server_;
};

TEST_F(CliEqualsApiTest, EveryReadCommandPrintsWhatItsRouteReturns) {
  // ---- the store, through the CLI
  ASSERT_EQ(Kestrel("dataset synth data --images 12 --imgsz 64 --seed 3").code, 0);
  ASSERT_EQ(Kestrel("dataset synth data2 --images 10 --imgsz 64 --seed 4").code, 0);
  ASSERT_EQ(Kestrel("dataset import data --name tiny").code, 0);
  ASSERT_EQ(Kestrel("dataset import data2 --name tiny").code, 0);
  ASSERT_EQ(Kestrel("models register " + Weights("m1") + " data=tiny@v1 --name tiny").code, 0);
  ASSERT_EQ(Kestrel("models promote tiny@v1").code, 0);
  ASSERT_EQ(Kestrel("template save small epochs=3 imgsz=64").code, 0);
  const json token = Cli("token create --name reader --read-only");
  ASSERT_TRUE(token["token"].is_string()) << token;
  // Jobs 1 and 2: val jobs of two weights files; 3 and 4: training jobs.
  ASSERT_EQ(Kestrel("submit kind=val model=" + Weights("ma") + " data=tiny@v1 save_json=true").code, 0);
  ASSERT_EQ(Kestrel("submit kind=val model=" + Weights("mb") + " data=tiny@v1 save_json=true").code, 0);
  ASSERT_EQ(Kestrel("submit data=tiny epochs=1").code, 0);
  ASSERT_EQ(Kestrel("submit data=tiny epochs=2 imgsz=64").code, 0);

  // ---- what a worker would do, through the store and app/
  auto m = store::MetadataStore::Open(store::MetadataUrl(home_));
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  meta_ = std::move(m).Value();
  blobs_ = std::make_unique<store::LocalArtifactStore>(home_);
  const int64_t now = Env::Default().UnixMillis();
  ASSERT_TRUE(meta_->UpsertWorker({"w1", "hostA", R"([{"kind":"cpu","index":0}])", now, now, 0}).IsOk());
  Claim(1);
  FinishValJob(1, Predictions("pa", [](size_t) { return true; }));
  Claim(2);
  FinishValJob(2, Predictions("pb", [](size_t i) { return i % 2 == 0; }));
  Claim(3);  // running, attempt 1: its epoch samples below; job 4 stays queued
  ASSERT_FALSE(HasFatalFailure());

  server::ServerOptions o;
  o.port = 0;
  o.request_timeout_ms = 5000;
  o.public_read = true;  // the read routes without a token (the token route reads one)
  auto srv = server::ApiServer::Start(home_, o);
  ASSERT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
  server_ = std::move(srv).Value();

  const json image = Api("/api/datasets/tiny/images?limit=1")["images"][0];
  WriteSamples(3, 1, image);
  WriteSamples(3, 2, image);

  // ---- datasets
  {
    SCOPED_TRACE("datasets");
    EXPECT_EQ(Cli("dataset list"), Api("/api/datasets"));
    for (const std::string spec : {"tiny", "tiny@v1"}) {
      json api = Api("/api/datasets/" + (spec == "tiny" ? spec : "tiny%40v1"));
      // The route adds the dataset's version list (the page's version picker).
      ASSERT_TRUE(api.contains("versions")) << api;
      api.erase("versions");
      EXPECT_EQ(Cli("dataset show " + spec), api) << spec;
    }
    EXPECT_EQ(Cli("dataset diff tiny@v1 tiny@v2"), Api("/api/datasets/tiny/diff?a=v1&b=v2"));
  }
  // ---- jobs
  {
    SCOPED_TRACE("jobs");
    for (const auto& [args, query] : std::vector<std::pair<std::string, std::string>>{
             {"", ""},
             {" --state queued,running", "?state=queued,running"},
             {" --kind val --sort state", "?kind=val&sort=state"},
             {" --limit 2", "?limit=2"},
             {" --limit 2 --before 3", "?limit=2&before=3"}}) {
      json cli = Cli("jobs list" + args);
      json api = Api("/api/jobs" + query);
      EXPECT_EQ(cli, api) << "jobs list" << args;
    }
    for (int id = 1; id <= 4; ++id) {
      EXPECT_EQ(Cli("jobs show " + std::to_string(id)), Api("/api/jobs/" + std::to_string(id))) << id;
    }
    EXPECT_EQ(Cli("template diff job:3 job:4"), Api("/api/jobs/3/diff?other=4"));
  }
  // ---- a training job's epoch samples
  {
    SCOPED_TRACE("samples");
    const json epochs = Cli("jobs samples 3");
    EXPECT_EQ(epochs["epochs"].size(), 2u) << epochs;
    EXPECT_EQ(epochs, Api("/api/jobs/3/samples"));
    EXPECT_EQ(Cli("jobs samples 3 --epoch 2"), Api("/api/jobs/3/samples/2"));
  }
  // ---- models
  {
    SCOPED_TRACE("models");
    EXPECT_EQ(Cli("models list"), Api("/api/models"));
    EXPECT_EQ(Cli("models list --tag production"), Api("/api/models?tag=production"));
    EXPECT_EQ(Cli("models show tiny@v1"), Api("/api/models/tiny@v1"));
    EXPECT_EQ(Cli("models show tiny@production"), Api("/api/models/tiny@production"));
  }
  // ---- templates
  {
    SCOPED_TRACE("templates");
    EXPECT_EQ(Cli("template list"), Api("/api/templates"));
    EXPECT_EQ(Cli("template show small"), Api("/api/templates/small"));
  }
  // ---- evaluations and their comparison
  {
    SCOPED_TRACE("evaluations");
    const json list = Cli("evaluations list");
    EXPECT_EQ(list["evaluations"].size(), 2u) << list;
    EXPECT_EQ(list, Api("/api/evaluations"));
    EXPECT_EQ(Cli("evaluations list --limit 1 --offset 1"), Api("/api/evaluations?limit=1&offset=1"));
    EXPECT_EQ(Cli("evaluations show 2"), Api("/api/evaluations/2"));
    EXPECT_EQ(Cli("evaluations images 2"), Api("/api/evaluations/2/images"));
    EXPECT_EQ(Cli("evaluations images 2 --filter wrong --limit 2"),
              Api("/api/evaluations/2/images?filter=wrong&limit=2"));
    EXPECT_EQ(Cli("evaluations confusion 2 --gt 0 --pred 0"),
              Api("/api/evaluations/2/confusion?gt=0&pred=0"));
    EXPECT_EQ(Cli("evaluations compare 1 2"), Api("/api/comparisons?a=1&b=2"));
  }
  // ---- stats, workers, breaker
  {
    SCOPED_TRACE("system");
    json cli_stats = Cli("stats");
    json api_stats = Api("/api/stats");
    // The filesystem's free space moves between the two reads.
    cli_stats["disk"].erase("free_bytes");
    api_stats["disk"].erase("free_bytes");
    EXPECT_EQ(cli_stats, api_stats);
    json cli_workers = Cli("workers");
    json api_workers = Api("/api/workers");
    ASSERT_EQ(cli_workers["workers"].size(), 1u) << cli_workers;
    ASSERT_EQ(api_workers["workers"].size(), 1u) << api_workers;
    // The clock of each read, and the heartbeat's age measured with it.
    for (json* doc : {&cli_workers, &api_workers}) {
      doc->erase("now_ms");
      (*doc)["workers"][0].erase("heartbeat_age_ms");
    }
    EXPECT_EQ(cli_workers, api_workers);
    EXPECT_EQ(Cli("breaker show"), Api("/api/breaker"));
  }
  // ---- tokens: the route reads the token a request carries; `token list` has its record.
  {
    SCOPED_TRACE("tokens");
    const json api = Api("/api/token", {"Authorization: Bearer " + token["token"].get<std::string>()});
    const json list = Cli("token list");
    ASSERT_EQ(list["tokens"].size(), 1u) << list;
    EXPECT_EQ(list["tokens"][0], api["token"]);
  }
}

}  // namespace
}  // namespace kestrel::testing
