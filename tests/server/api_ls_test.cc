// The Label Studio ML backend (server/api_ls.h, docs/server.md "Label Studio
// ML backend") over real HTTP on loopback: an in-process ApiServer on port 0
// with --ls-model birds@v1, whose verified ONNX export is loaded through the
// program's ONNX slot (app/backends.h) — here a detector with fixed boxes, so
// the percent coordinates are checked exactly against Label Studio's
// documented prediction format, field by field. Images from this server's
// dataset route and from the local-files root; traversal, symlinks out,
// remote URLs refused; tokens (Bearer and Token) required; the webhook's
// annotations kept across a restart, merged as a new version (its labels
// checked box by box) and a fine-tune job queued on it from a template;
// retries counted once; bad annotations refused with nothing stored. Seconds.
#include "server/api_ls.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/backends.h"
#include "app/datasets.h"
#include "app/job_kinds.h"
#include "app/ls_annotations.h"
#include "app/models.h"
#include "app/templates.h"
#include "birds_home.h"
#include "core/env.h"
#include "data/version.h"
#include "write_route_test.h"

namespace kestrel::server {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::HttpReply;

// Two boxes per image, whatever it shows: a crow at (4, 8)-(20, 24) scoring
// 0.9 and a sparrow (-2, 0)-(40, 16) scoring 0.4 that the writer clips to
// the image.
class FixedDetector final : public app::Detector {
 public:
  int NumClasses() const override { return 2; }
  const std::vector<std::string>& Names() const override { return names_; }
  std::string Arch() const override { return "fixed"; }
  const eval::InferenceOptions& Options() const override { return options_; }
  Result<std::vector<eval::ImagePrediction>> Predict(const std::vector<eval::ImageView>& images) override {
    std::vector<eval::ImagePrediction> out;
    for (const auto& v : images) {
      eval::ImagePrediction p;
      p.width = v.width;
      p.height = v.height;
      p.detections.push_back({{4, 8, 20, 24}, 0.9F, 1});
      p.detections.push_back({{-2, 0, 40, 16}, 0.4F, 0});
      out.push_back(std::move(p));
    }
    return out;
  }
  Result<std::vector<eval::ImagePrediction>> PredictVal(
      const std::vector<eval::ImageSize>&, const eval::ValShapeOptions&,
      const std::function<Result<eval::ImageView>(size_t)>&) override {
    return Status::Internal("not used");
  }
  eval::StageTimes Timing() const override { return {}; }

 private:
  std::vector<std::string> names_{"sparrow", "crow"};
  eval::InferenceOptions options_;
};

class LsApiTest : public testing::WriteRouteTest {
 protected:
  void SetUp() override {
    app::Backends b;
    b.program = "kestrel";
    b.onnx_detector = [this](const std::string& weights, const eval::InferenceOptions&,
                             const app::DetectorPlacement& where) -> Result<std::unique_ptr<app::Detector>> {
      loaded_ = weights + " " + where.runtime;
      return std::unique_ptr<app::Detector>(std::make_unique<FixedDetector>());
    };
    table_ = app::BuiltinJobKinds();
    ASSERT_TRUE(app::InstallBackends(std::move(b), table_).IsOk());
    testing::OpenHomeWithBirds("kestrel_server_ls_", 4, &dir_, &home_, &meta_, &blobs_);
    if (HasFatalFailure()) return;
    store::ModelRecord model;
    testing::RegisterBirdsModel(*meta_, *blobs_, dir_, 2000, &model);
    if (HasFatalFailure()) return;
    onnx_ = (dir_ / "best.onnx").string();
    ASSERT_TRUE(Env::Default().WriteFileAtomic(onnx_, "not parsed: the fixed detector stands in").IsOk());
    app::ExportRecordRequest req;
    req.path = onnx_;
    req.format = "onnx";
    req.verified = true;
    ASSERT_TRUE(app::ModelRegistry(*meta_, *blobs_, Env::Default()).RecordExport(model, req, 3000).IsOk());
    CreateTokens();
    // The local-files root holds one of the birds images; a secret sits beside it.
    root_ = dir_ / "ls-root";
    fs::create_directories(root_ / "images");
    for (const auto& e : fs::recursive_directory_iterator(dir_ / "synth")) {
      if (e.path().extension() == ".jpg" || e.path().extension() == ".png") {
        fs::copy_file(e.path(), root_ / "images" / ("a b" + e.path().extension().string()));
        fs::copy_file(e.path(), dir_ / ("secret" + e.path().extension().string()));
        ext_ = e.path().extension().string();
        break;
      }
    }
    ASSERT_FALSE(ext_.empty());
    app::DatasetImagesRequest ir;
    ir.spec = "birds";
    auto page = app::Datasets(*meta_, *blobs_).Images(ir);
    ASSERT_TRUE(page.IsOk()) << page.GetStatus().ToString();
    sha_ = page->images.at(0).image_sha;
  }
  void TearDown() override {
    testing::WriteRouteTest::TearDown();
    app::JobKindTable scratch = app::BuiltinJobKinds();
    (void)app::InstallBackends(app::Backends{}, scratch);  // the next test starts without backends
  }
  int StartLs(LsOptions ls) {
    ServerOptions o;
    o.port = 0;
    o.request_timeout_ms = 5000;
    auto srv = ApiServer::Start(home_, o, ls);
    EXPECT_TRUE(srv.IsOk()) << srv.GetStatus().ToString();
    if (!srv.IsOk()) return 0;
    servers_.push_back(std::move(srv).Value());
    return servers_.back()->Port();
  }
  LsOptions Options() {
    LsOptions ls;
    ls.model = "birds@v1";
    ls.local_files_root = root_.string();
    return ls;
  }
  HttpReply Post(int port, const std::string& target, const std::string& header, const json& body) {
    std::string raw = "POST " + target + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                      "\r\nContent-Type: application/json\r\nConnection: close\r\n";
    if (!header.empty()) raw += "Authorization: " + header + "\r\n";
    const std::string text = body.dump();
    raw += "Content-Length: " + std::to_string(text.size()) + "\r\n\r\n" + text;
    return testing::SendRaw(port, raw);
  }
  json PredictBody(const std::vector<std::string>& urls) {
    json tasks = json::array();
    for (size_t i = 0; i < urls.size(); ++i)
      tasks.push_back({{"id", 100 + i}, {"data", {{"image", urls[i]}}}});
    return {{"tasks", tasks},
            {"project", "1.1700000000"},
            {"label_config",
             "<View><Image name=\"img\" value=\"$image\"/><RectangleLabels name=\"box\" toName=\"img\">"
             "<Label value=\"sparrow\"/><Label value=\"crow\"/></RectangleLabels></View>"},
            {"params", {{"login", nullptr}}}};
  }
  // A Label Studio webhook body for an annotation event (the fields this
  // backend reads, among some it does not).
  static json Event(const std::string& action, int64_t annotation_id, int64_t task_id,
                    const std::string& image, const json& result) {
    return {{"action", action},
            {"annotation",
             {{"id", annotation_id},
              {"task", task_id},
              {"result", result},
              {"was_cancelled", false},
              {"completed_by", 1},
              {"updated_at", "2026-12-06T01:00:00Z"}}},
            {"task", {{"id", task_id}, {"data", {{"image", image}}}, {"is_labeled", true}}},
            {"project", {{"id", 1}, {"title", "birds"}}}};
  }
  // One rectanglelabels result, in percent of the image (top-left).
  static json Box(double x, double y, double w, double h, const std::string& label) {
    return {
        {"id", "r" + std::to_string(int(x * 100 + y))},
        {"type", "rectanglelabels"},
        {"from_name", "label"},
        {"to_name", "image"},
        {"original_width", 32},
        {"original_height", 32},
        {"value",
         {{"x", x}, {"y", y}, {"width", w}, {"height", h}, {"rotation", 0}, {"rectanglelabels", {label}}}}};
  }
  // Label Studio's local-files URL of a version's image, "<split>/<path>" under some folder.
  static std::string LocalFile(const data::ManifestEntry& e) {
    return "/data/local-files/?d=exported/" + std::string(data::SplitName(e.split)) + "/" + e.path;
  }
  // The error document's field of a 4xx reply.
  std::string RefusedField(const HttpReply& r, int status, const std::string& what) {
    EXPECT_EQ(r.status, status) << what << ": " << r.body;
    auto j = json::parse(r.body, nullptr, false);
    EXPECT_TRUE(j.is_object()) << what << ": " << r.body;
    if (!j.is_object()) return "";
    EXPECT_EQ(j["ok"], false) << what;
    EXPECT_FALSE(j["error"]["message"].get<std::string>().empty()) << what;
    return j["error"].value("field", "");
  }

  app::JobKindTable table_;
  std::string onnx_, loaded_, sha_, ext_;
  fs::path root_;
};

TEST_F(LsApiTest, HealthAndSetupAnswerWithTheModelVersion) {
  const int port = StartLs(Options());
  ASSERT_NE(port, 0);
  EXPECT_EQ(loaded_, onnx_ + " opencv") << "the verified export, in OpenCV DNN";
  for (const std::string scheme : {"Bearer ", "Token ", "token "}) {
    HttpReply h = testing::Get(port, "/ls/health", {"Authorization: " + scheme + read_});
    json doc = Doc(h, 200, scheme + "health");
    EXPECT_EQ(doc["status"], "UP");
    EXPECT_EQ(doc["model_class"], "KestrelOnnxDetector");
    EXPECT_EQ(doc["model_version"], "birds@v1");
    EXPECT_EQ(doc["classes"], json::array({"sparrow", "crow"}));
  }
  // "Token" is Label Studio's scheme: only the /ls routes take it.
  EXPECT_EQ(testing::Get(port, "/api/models", {"Authorization: Token " + read_}).status, 401);
  EXPECT_EQ(testing::Get(port, "/ls/health").status, 401);
  EXPECT_EQ(testing::Get(port, "/ls/health", {"Authorization: Token wrong"}).status, 401);

  json setup = {{"project", "1.1700000000"},
                {"schema",
                 "<View><Image name='image' value='$image'/><RectangleLabels name='label' "
                 "toName='image'><Label value='crow'/></RectangleLabels></View>"},
                {"hostname", "http://localhost:8080"},
                {"access_token", "x"}};
  EXPECT_EQ(Doc(Post(port, "/ls/setup", "Token " + read_, setup), 200, "setup"),
            json({{"model_version", "birds@v1"}}));
  EXPECT_EQ(Post(port, "/ls/setup", "", setup).status, 401);
  setup["schema"] = "<View><Image name='image' value='$image'/><Choices name='c' toName='image'/></View>";
  EXPECT_EQ(RefusedField(Post(port, "/ls/setup", "Token " + read_, setup), 400, "no RectangleLabels"),
            "schema");
}

TEST_F(LsApiTest, PredictGivesOnePredictionPerTaskInLabelStudiosFormat) {
  const int port = StartLs(Options());
  ASSERT_NE(port, 0);
  const std::string dataset_url = "/api/datasets/birds/images/" + sha_;
  const std::vector<std::string> urls = {dataset_url,
                                         "http://127.0.0.1:" + std::to_string(port) + dataset_url + "?x=1",
                                         "/data/local-files/?d=images/a%20b" + ext_,
                                         "http://labelstudio:8080/data/local-files/?d=images%2Fa+b" + ext_};
  HttpReply r = Post(port, "/ls/predict", "Token " + read_, PredictBody(urls));
  json doc = Doc(r, 200, "predict");
  EXPECT_EQ(doc["model_version"], "birds@v1");
  ASSERT_EQ(doc["results"].size(), urls.size());
  for (size_t t = 0; t < urls.size(); ++t) {
    const json& p = doc["results"][t];
    EXPECT_EQ(p["model_version"], "birds@v1");
    EXPECT_NEAR(p["score"].get<double>(), 0.1, 1e-6) << "1 - the highest box score";
    ASSERT_EQ(p["result"].size(), 2u);
    const json& crow = p["result"][0];
    EXPECT_EQ(crow["id"], std::to_string(t) + "-0") << "unique across the response's tasks";
    EXPECT_EQ(crow["type"], "rectanglelabels");
    EXPECT_EQ(crow["from_name"], "box") << "from the request's label_config";
    EXPECT_EQ(crow["to_name"], "img");
    EXPECT_EQ(crow["original_width"], 32);
    EXPECT_EQ(crow["original_height"], 32);
    EXPECT_EQ(crow["image_rotation"], 0);
    EXPECT_NEAR(crow["score"].get<double>(), 0.9, 1e-6);
    const json& v = crow["value"];
    EXPECT_NEAR(v["x"].get<double>(), 4.0 / 32 * 100, 1e-6);
    EXPECT_NEAR(v["y"].get<double>(), 8.0 / 32 * 100, 1e-6);
    EXPECT_NEAR(v["width"].get<double>(), 16.0 / 32 * 100, 1e-6);
    EXPECT_NEAR(v["height"].get<double>(), 16.0 / 32 * 100, 1e-6);
    EXPECT_EQ(v["rotation"], 0);
    EXPECT_EQ(v["rectanglelabels"], json::array({"crow"}));
    const json& sparrow = p["result"][1]["value"];  // clipped to the image
    EXPECT_NEAR(sparrow["x"].get<double>(), 0.0, 1e-6);
    EXPECT_NEAR(sparrow["width"].get<double>(), 100.0, 1e-6);
    EXPECT_NEAR(sparrow["height"].get<double>(), 50.0, 1e-6);
    EXPECT_EQ(sparrow["rectanglelabels"], json::array({"sparrow"}));
  }
  // Without a label_config: the --ls-from-name/--ls-to-name defaults.
  json body = PredictBody({dataset_url});
  body.erase("label_config");
  json d = Doc(Post(port, "/ls/predict", "Bearer " + read_, body), 200, "no label_config");
  EXPECT_EQ(d["results"][0]["result"][0]["from_name"], "label");
  EXPECT_EQ(d["results"][0]["result"][0]["to_name"], "image");
  EXPECT_EQ(Post(port, "/ls/predict", "", body).status, 401);
}

TEST_F(LsApiTest, ImagesOutsideTheRootsAreRefusedNamingTheTask) {
  fs::create_symlink(dir_ / ("secret" + ext_), root_ / ("link" + ext_));
  const int port = StartLs(Options());
  ASSERT_NE(port, 0);
  const std::string ok = "/api/datasets/birds/images/" + sha_;
  const std::vector<std::pair<std::string, int>> bad = {
      {"/data/local-files/?d=../secret" + ext_, 400},
      {"/data/local-files/?d=images/..%2F..%2Fsecret" + ext_, 400},
      {"/data/local-files/?d=/../secret" + ext_, 400},
      {"/data/local-files/?d=link" + ext_, 400},                             // a symlink out of the root
      {"/data/local-files/?d=" + (dir_ / ("secret" + ext_)).string(), 404},  // absolute: under the root
      {"/data/local-files/?d=images/nosuch.jpg", 404},
      {"/data/local-files/?d=images/a%zz", 400},
      {"/data/local-files/", 400},
      {"https://example.com/x.jpg", 400},  // nothing is fetched from the network
      {"http://otherhost:9/api/datasets/birds/images/" + sha_, 400},
      {"/api/datasets/birds/images/" + std::string(64, 'a'), 404},
      {"s3://bucket/x.jpg", 400},
  };
  for (const auto& [url, status] : bad) {
    HttpReply r = Post(port, "/ls/predict", "Bearer " + read_, PredictBody({ok, url}));
    EXPECT_EQ(RefusedField(r, status, url), "tasks[1].data.image") << url;
  }
  // No local-files root: local files are off.
  LsOptions no_root = Options();
  no_root.local_files_root.clear();
  const int port2 = StartLs(no_root);
  EXPECT_EQ(RefusedField(Post(port2, "/ls/predict", "Bearer " + read_,
                              PredictBody({"/data/local-files/?d=images/a%20b" + ext_})),
                         400, "no root"),
            "tasks[0].data.image");
  // Shapes of the body, named.
  EXPECT_EQ(
      RefusedField(Post(port, "/ls/predict", "Bearer " + read_, json{{"tasks", json::array()}}), 400, "[]"),
      "tasks");
  EXPECT_EQ(
      RefusedField(Post(port, "/ls/predict", "Bearer " + read_, json::parse(R"({"tasks": [{"data": 1}]})")),
                   400, "data"),
      "tasks[0].data");
  LsOptions few = Options();
  few.max_tasks = 1;
  const int port3 = StartLs(few);
  EXPECT_EQ(RefusedField(Post(port3, "/ls/predict", "Bearer " + read_, PredictBody({ok, ok})), 400, "max"),
            "tasks");
}

TEST_F(LsApiTest, WebhookMergesTheAnnotationsAsANewVersionAndFineTunesOnIt) {
  auto saved = app::TemplateLibrary(*meta_).Save("ls-ft", {"data=birds", "epochs=3"}, 5000);
  ASSERT_TRUE(saved.IsOk()) << saved.GetStatus().ToString();
  auto v1 = data::LoadVersion(*meta_, *blobs_, "birds@v1");
  ASSERT_TRUE(v1.IsOk()) << v1.GetStatus().ToString();
  ASSERT_GE(v1->manifest.entries.size(), 3u);
  const data::ManifestEntry e0 = v1->manifest.entries[0], e1 = v1->manifest.entries[1];
  const std::vector<std::string> names = v1->manifest.names;
  LsOptions o = Options();
  o.train_template = "ls-ft";
  o.train_after = 2;
  const int port = StartLs(o);
  ASSERT_NE(port, 0);
  // Task 11 names its image as Label Studio's local files would (the
  // "<split>/<path>" layout `dataset predict` writes), task 12 through this
  // server's dataset image route.
  const json created11 =
      Event("ANNOTATION_CREATED", 101, 11, LocalFile(e0), json::array({Box(10, 20, 30, 40, names[1])}));
  // A read-only token may predict but not keep annotations or queue jobs.
  EXPECT_EQ(Post(port, "/ls/webhook", "Token " + read_, created11).status, 403);
  json a = Doc(Post(port, "/ls/webhook", "Token " + write_, created11), 200, "first");
  EXPECT_EQ(a["counted"], true);
  EXPECT_TRUE(a["job"].is_null());
  EXPECT_EQ(a["counters"]["since_last_job"], 1);
  EXPECT_EQ(a["counters"]["pending"], 1);
  // Label Studio retries a webhook it got no answer for: once is counted.
  json again = Doc(Post(port, "/ls/webhook", "Bearer " + write_, created11), 200, "retried");
  EXPECT_EQ(again["counted"], false);
  EXPECT_EQ(again["duplicate"], true);
  EXPECT_EQ(again["counters"]["annotations"], 1);
  json other =
      Doc(Post(port, "/ls/webhook", "Token " + write_, {{"action", "PROJECT_UPDATED"}}), 200, "other");
  EXPECT_EQ(other["counted"], false) << "acknowledged, not counted";

  const json created12 = Event("ANNOTATION_CREATED", 102, 12, "/api/datasets/birds/images/" + e1.image_sha,
                               json::array({Box(0, 0, 50, 50, names[0]), Box(50, 50, 25, 25, names[1])}));
  json b = Doc(Post(port, "/ls/webhook", "Token " + write_, created12), 200, "second");
  ASSERT_TRUE(b["job"].is_object()) << b.dump();
  EXPECT_EQ(b["version"], "birds@v2");
  EXPECT_EQ(b["merge"]["images_corrected"], 2);
  const int64_t job_id = b["job"]["job_id"].get<int64_t>();
  EXPECT_EQ(b["counters"]["since_last_job"], 0);
  EXPECT_EQ(b["counters"]["pending"], 0);
  EXPECT_EQ(b["counters"]["annotations"], 2);
  EXPECT_EQ(b["counters"]["last_job_id"], job_id);
  EXPECT_EQ(b["counters"]["last_version"], "birds@v2");

  // The new version: the annotated images carry exactly the annotations'
  // boxes, every other image keeps v1's.
  auto v2 = data::LoadVersion(*meta_, *blobs_, "birds@v2");
  ASSERT_TRUE(v2.IsOk()) << v2.GetStatus().ToString();
  ASSERT_EQ(v2->manifest.entries.size(), v1->manifest.entries.size());
  for (size_t i = 0; i < v2->manifest.entries.size(); ++i) {
    const data::ManifestEntry& e = v2->manifest.entries[i];
    ASSERT_EQ(e.image_sha, v1->manifest.entries[i].image_sha);
    if (i == 0) {
      ASSERT_EQ(e.boxes.size(), 1u);
      EXPECT_EQ(e.boxes[0].cls, 1);
      EXPECT_NEAR(e.boxes[0].cx, 0.25, 1e-4);
      EXPECT_NEAR(e.boxes[0].cy, 0.40, 1e-4);
      EXPECT_NEAR(e.boxes[0].w, 0.30, 1e-4);
      EXPECT_NEAR(e.boxes[0].h, 0.40, 1e-4);
    } else if (i == 1) {
      ASSERT_EQ(e.boxes.size(), 2u);
      int crows = 0;
      for (const data::Box& box : e.boxes) crows += box.cls;
      EXPECT_EQ(crows, 1) << "one box of each class";
    } else {
      EXPECT_EQ(e.boxes, v1->manifest.entries[i].boxes) << e.path;
    }
  }
  // The job fine-tunes the served model on that version, with the template's keys.
  auto job = meta_->GetJob(job_id);
  ASSERT_TRUE(job.IsOk());
  EXPECT_EQ(job->spec.dataset_version, v2->record.version_id) << "data= the new version";
  const json config = json::parse(job->spec.config_json);
  EXPECT_EQ(config["epochs"], 3) << "the template's keys";
  ASSERT_TRUE(config["pretrained"].is_string()) << config.dump();
  EXPECT_EQ(config["pretrained"].get<std::string>().rfind(home_, 0), 0u)
      << "the served model's weights blob: " << config["pretrained"];

  // A retry of a merged annotation is not counted again; an update is, and
  // a deletion drops it while it is pending.
  json late = Doc(Post(port, "/ls/webhook", "Token " + write_, created12), 200, "late retry");
  EXPECT_EQ(late["duplicate"], true);
  EXPECT_EQ(late["counters"]["pending"], 0);
  json updated = Doc(Post(port, "/ls/webhook", "Token " + write_,
                          Event("ANNOTATION_UPDATED", 101, 11, LocalFile(e0), json::array())),
                     200, "updated");
  EXPECT_EQ(updated["counted"], true);
  EXPECT_EQ(updated["counters"]["pending"], 1);
  json deleted = Doc(Post(port, "/ls/webhook", "Token " + write_,
                          {{"action", "ANNOTATIONS_DELETED"}, {"annotations", json::array({{{"id", 101}}})}}),
                     200, "deleted");
  EXPECT_EQ(deleted["removed"], true);
  EXPECT_EQ(deleted["counters"]["pending"], 0);
  // Nothing pending: the on-demand train says so.
  EXPECT_EQ(RefusedField(Post(port, "/ls/train", "Token " + write_, json::object()), 409, "nothing"),
            "pending");
  EXPECT_EQ(RefusedField(Post(port, "/ls/webhook", "Token " + write_, {{"action", "a b"}}), 400, "action"),
            "action");
}

TEST_F(LsApiTest, BadAnnotationsAreRefusedAndNothingIsStored) {
  auto v1 = data::LoadVersion(*meta_, *blobs_, "birds@v1");
  ASSERT_TRUE(v1.IsOk()) << v1.GetStatus().ToString();
  const data::ManifestEntry e0 = v1->manifest.entries[0];
  const std::string good = v1->manifest.names[0];
  const int port = StartLs(Options());  // no template: POST /ls/train merges, queues nothing
  ASSERT_NE(port, 0);
  // Read at the webhook: a box past the image, no label, a rotated box, no task.
  struct Bad {
    json result;
    std::string field;
  };
  json rotated = Box(10, 10, 10, 10, good);
  rotated["value"]["rotation"] = 30;
  json unlabelled = Box(10, 10, 10, 10, good);
  unlabelled["value"].erase("rectanglelabels");
  for (const Bad& bad :
       std::vector<Bad>{{json::array({Box(90, 10, 30, 10, good)}), "annotation.result[0].value"},
                        {json::array({unlabelled}), "annotation.result[0].value.rectanglelabels"},
                        {json::array({rotated}), "annotation.result[0].value.rotation"}}) {
    EXPECT_EQ(RefusedField(Post(port, "/ls/webhook", "Token " + write_,
                                Event("ANNOTATION_CREATED", 201, 21, LocalFile(e0), bad.result)),
                           400, bad.field),
              bad.field);
  }
  json no_task = Event("ANNOTATION_CREATED", 201, 21, LocalFile(e0), json::array());
  no_task.erase("task");
  EXPECT_EQ(RefusedField(Post(port, "/ls/webhook", "Token " + write_, no_task), 400, "no task"), "task");
  EXPECT_FALSE(fs::exists(app::LsStatePath(home_))) << "nothing kept";

  // Read at the merge: an unknown label and an image that is no file of
  // the version. The merge stores nothing, the annotations stay pending.
  Doc(Post(
          port, "/ls/webhook", "Token " + write_,
          Event("ANNOTATION_CREATED", 202, 22, LocalFile(e0), json::array({Box(10, 10, 10, 10, "pelican")}))),
      200, "unknown label kept");
  Doc(Post(port, "/ls/webhook", "Token " + write_,
           Event("ANNOTATION_CREATED", 203, 23, "/data/local-files/?d=elsewhere/nosuch.jpg",
                 json::array({Box(10, 10, 10, 10, good)}))),
      200, "unmatched image kept");
  HttpReply refused = Post(port, "/ls/train", "Token " + write_, json::object());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("corrections.unknown_label"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("corrections.unmatched_image"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("tasks[0] = task 22"), std::string::npos) << refused.body;
  auto versions = meta_->ListVersions("birds");
  ASSERT_TRUE(versions.IsOk());
  EXPECT_EQ(versions->size(), 1u) << "no version stored";

  // Fixed in Label Studio (an update and a deletion): the merge goes through.
  Doc(Post(port, "/ls/webhook", "Token " + write_,
           Event("ANNOTATION_UPDATED", 202, 22, LocalFile(e0), json::array({Box(10, 10, 10, 10, good)}))),
      200, "fixed");
  Doc(Post(port, "/ls/webhook", "Token " + write_,
           {{"action", "ANNOTATION_DELETED"}, {"annotation", {{"id", 203}}}}),
      200, "deleted");
  json t = Doc(Post(port, "/ls/train", "Token " + write_, json::object()), 200, "train");
  EXPECT_EQ(t["version"], "birds@v2");
  EXPECT_TRUE(t["job"].is_null()) << "no template: the merge only";
  EXPECT_EQ(t["counters"]["pending"], 0);
}

TEST_F(LsApiTest, ARestartKeepsThePendingAnnotationsAndTheCounters) {
  auto saved = app::TemplateLibrary(*meta_).Save("ls-ft", {"data=birds", "epochs=3"}, 5000);
  ASSERT_TRUE(saved.IsOk()) << saved.GetStatus().ToString();
  auto v1 = data::LoadVersion(*meta_, *blobs_, "birds@v1");
  ASSERT_TRUE(v1.IsOk()) << v1.GetStatus().ToString();
  const data::ManifestEntry e0 = v1->manifest.entries[0], e1 = v1->manifest.entries[1];
  const std::string crow = v1->manifest.names[1];
  LsOptions o = Options();
  o.train_template = "ls-ft";
  o.train_after = 2;
  const int first = StartLs(o);
  ASSERT_NE(first, 0);
  Doc(Post(first, "/ls/webhook", "Token " + write_,
           Event("ANNOTATION_CREATED", 301, 31, LocalFile(e0), json::array({Box(10, 10, 20, 20, crow)}))),
      200, "before the restart");
  servers_.back()->Stop();
  servers_.pop_back();

  const int second = StartLs(o);
  ASSERT_NE(second, 0);
  // The first server's annotation is still pending: a retry of it is a duplicate.
  json dup =
      Doc(Post(second, "/ls/webhook", "Token " + write_,
               Event("ANNOTATION_CREATED", 301, 31, LocalFile(e0), json::array({Box(10, 10, 20, 20, crow)}))),
          200, "retry after the restart");
  EXPECT_EQ(dup["duplicate"], true);
  EXPECT_EQ(dup["counters"]["since_last_job"], 1);
  json b =
      Doc(Post(second, "/ls/webhook", "Token " + write_,
               Event("ANNOTATION_CREATED", 302, 32, LocalFile(e1), json::array({Box(50, 50, 20, 20, crow)}))),
          200, "after the restart");
  ASSERT_TRUE(b["job"].is_object()) << b.dump();
  EXPECT_EQ(b["merge"]["images_corrected"], 2) << "both annotations, one from before the restart";
  EXPECT_EQ(b["counters"]["annotations"], 2);

  // A damaged state file stops the server at start, naming it.
  ASSERT_TRUE(
      Env::Default().WriteFileAtomic(app::LsStatePath(home_), "{\"format\": 1, \"pending\": 3}").IsOk());
  ServerOptions so;
  so.port = 0;
  auto damaged = ApiServer::Start(home_, so, o);
  ASSERT_FALSE(damaged.IsOk());
  EXPECT_EQ(damaged.GetStatus().Code(), StatusCode::kCorruption);
  EXPECT_EQ(damaged.GetStatus().Where().file, app::LsStatePath(home_));
}

TEST_F(LsApiTest, WithoutAModelTheRoutesAnswer503AndBadOptionsAreNamed) {
  const int port = StartServer();
  HttpReply h = testing::Get(port, "/ls/health", {"Authorization: Bearer " + read_});
  EXPECT_EQ(RefusedField(h, 503, "no model"), "ls-model");
  EXPECT_EQ(Post(port, "/ls/predict", "Bearer " + read_, PredictBody({"/x"})).status, 503);

  ServerOptions so;
  so.port = 0;
  LsOptions bad = Options();
  bad.train_after = 0;
  EXPECT_EQ(ApiServer::Start(home_, so, bad).GetStatus().Where().field, "ls-train-after");
  bad = Options();
  bad.model.clear();
  bad.train_template = "ls-ft";
  EXPECT_EQ(ApiServer::Start(home_, so, bad).GetStatus().Where().field, "ls-train-template");
  bad = Options();
  bad.from_name = "a b";
  EXPECT_EQ(ApiServer::Start(home_, so, bad).GetStatus().Where().field, "ls-from-name");
  bad = Options();
  bad.model = "nosuch@production";
  EXPECT_EQ(ApiServer::Start(home_, so, bad).GetStatus().Where().field, "ls-model");
  // A model without a verified export that is still as recorded.
  ASSERT_TRUE(Env::Default().WriteFileAtomic(onnx_, "changed").IsOk());
  auto changed = ApiServer::Start(home_, so, Options());
  ASSERT_FALSE(changed.IsOk());
  EXPECT_EQ(changed.GetStatus().Code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(changed.GetStatus().Message().find("changed since it was recorded"), std::string::npos)
      << changed.GetStatus().Message();
}

TEST_F(LsApiTest, RectangleNamesAreReadFromTheLabellingConfig) {
  std::string from, to;
  EXPECT_TRUE(LsRectangleNames("<View><RectangleLabels toName='i' name=\"b\">", &from, &to));
  EXPECT_EQ(from, "b");
  EXPECT_EQ(to, "i");
  EXPECT_FALSE(LsRectangleNames("<View><Labels name='b' toName='i'/></View>", &from, &to));
  EXPECT_FALSE(LsRectangleNames("<RectangleLabels name='b'>", &from, &to));
}

}  // namespace
}  // namespace kestrel::server
