// Issue 12's check for the dataset and template command families: each
// command's --json document is the application layer's JSON view of the same
// record (plus "ok"), computed here by calling app/ on the same store, so the
// CLI and a server calling app/ cannot drift apart. Also: template errors are
// submit's (same text, same exit code), and `template diff` takes job:ID.
// `val predictions=` prints app::ValRunJson of app::EvaluatePredictions.
#include <filesystem>
#include <fstream>
#include <string>

#include "app/datasets.h"
#include "app/evaluate.h"
#include "app/templates.h"
#include "cli_fixture.h"
#include "store/local_artifact_store.h"

namespace kestrel::testing {
namespace {

using nlohmann::json;

class AppViewsCliTest : public KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    ASSERT_EQ(Kestrel("dataset synth data --images 12 --imgsz 64 --seed 3").code, 0);
  }
  // The stores the CLI used (KESTREL_HOME = dir_/home), opened by the test.
  void OpenStores() {
    const std::string home = (dir_ / "home").string();
    auto m = store::MetadataStore::Open(store::MetadataUrl(home));
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    meta_ = std::move(m).Value();
    blobs_ = std::make_unique<store::LocalArtifactStore>(home);
  }
  static json Ok(json view) {
    view["ok"] = true;
    return view;
  }
  std::string Abs(const std::string& rel) { return (dir_ / rel).string(); }

  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
};

TEST_F(AppViewsCliTest, DatasetCommandsPrintTheAppViews) {
  // validate (no store): the dry run's record.
  CliRun validate = Kestrel("--json dataset validate " + Abs("data"));
  ASSERT_EQ(validate.code, 0) << validate.out;
  auto v = app::ValidateDataset(Abs("data"), data::ImportOptions());
  ASSERT_TRUE(v.IsOk()) << v.GetStatus().ToString();
  EXPECT_EQ(Json(validate), app::DatasetValidationJson(*v));

  // import: the CLI created v1; importing the same content through app/
  // returns that version (created false), the rest of the view is equal.
  CliRun imported = Kestrel("--json dataset import " + Abs("data") + " --name tiny");
  ASSERT_EQ(imported.code, 0) << imported.out;
  OpenStores();
  app::Datasets ds(*meta_, *blobs_);
  auto again = ds.Import(Abs("data"), "tiny", data::ImportOptions());
  ASSERT_TRUE(again.IsOk()) << again.GetStatus().ToString();
  EXPECT_FALSE(again->created);
  json want = Ok(app::DatasetImportJson(*again));
  want["created"] = true;
  EXPECT_EQ(Json(imported), want);

  // A second version to diff against.
  ASSERT_EQ(Kestrel("dataset synth data2 --images 10 --imgsz 64 --seed 4").code, 0);
  ASSERT_EQ(Kestrel("dataset import " + Abs("data2") + " --name tiny").code, 0);

  json list = {{"ok", true}, {"datasets", json::array()}};
  auto summaries = ds.List();  // kept alive: a range-for over *temporary would dangle
  ASSERT_TRUE(summaries.IsOk());
  for (const auto& s : *summaries) list["datasets"].push_back(app::DatasetSummaryJson(s));
  EXPECT_EQ(Json(Kestrel("--json dataset list")), list);

  for (const std::string spec : {"tiny", "tiny@v1"}) {
    auto shown = ds.Show(spec);
    ASSERT_TRUE(shown.IsOk()) << shown.GetStatus().ToString();
    EXPECT_EQ(Json(Kestrel("--json dataset show " + spec)), Ok(app::DatasetShowJson(*shown))) << spec;
  }

  auto diff = ds.Diff("tiny@v1", "tiny@v2");
  ASSERT_TRUE(diff.IsOk()) << diff.GetStatus().ToString();
  EXPECT_EQ(Json(Kestrel("--json dataset diff tiny@v1 tiny@v2")), Ok(app::DatasetDiffJson(*diff)));

  CliRun exported = Kestrel("--json dataset export tiny@v1 " + Abs("out") + " --format coco");
  ASSERT_EQ(exported.code, 0) << exported.out;
  EXPECT_EQ(Json(exported), Ok(app::DatasetExportJson({"tiny@v1", "coco", Abs("out")})));
  auto re = ds.Export("tiny@v1", "coco", Abs("out2"));
  ASSERT_TRUE(re.IsOk()) << re.GetStatus().ToString();
  EXPECT_EQ(Ok(app::DatasetExportJson(*re))["format"], "coco");

  CliRun preview = Kestrel("--json dataset preview tiny images=4 imgsz=64 out=" + Abs("p.png"));
  ASSERT_EQ(preview.code, 0) << preview.out;
  app::PreviewRequest req;
  req.spec = "tiny";
  req.images = 4;
  req.loader.imgsz = 64;
  req.out = Abs("p2.png");
  auto p = ds.Preview(req);
  ASSERT_TRUE(p.IsOk()) << p.GetStatus().ToString();
  json pj = Ok(app::DatasetPreviewJson(*p));
  pj["out"] = Abs("p.png");
  EXPECT_EQ(Json(preview), pj);

  // Errors keep their exit codes.
  EXPECT_EQ(Kestrel("--json dataset show nope").code, 1);
  EXPECT_EQ(Kestrel("--json dataset preview tiny mosaic=3").code, 2);
}

TEST_F(AppViewsCliTest, TemplateCommandsPrintTheAppViewsAndRejectLikeSubmit) {
  ASSERT_EQ(Kestrel("dataset import data --name tiny").code, 0);
  CliRun saved = Kestrel("--json template save fast epochs=10 imgsz=320 priority=high");
  ASSERT_EQ(saved.code, 0) << saved.out;
  OpenStores();
  app::TemplateLibrary lib(*meta_);
  auto v1 = lib.Resolve("fast");
  ASSERT_TRUE(v1.IsOk()) << v1.GetStatus().ToString();
  EXPECT_EQ(Json(saved), Ok(app::TemplateSaveJson({*v1, true})));
  CliRun same = Kestrel("--json template save fast imgsz=320 epochs=10 priority=high");
  EXPECT_EQ(Json(same), Ok(app::TemplateSaveJson({*v1, false})));
  ASSERT_EQ(Kestrel("template save fast epochs=20 imgsz=320").code, 0);
  ASSERT_EQ(Kestrel("template save slow epochs=300").code, 0);

  for (const std::string ref : {"fast", "fast@v1"}) {
    auto t = lib.Resolve(ref);
    ASSERT_TRUE(t.IsOk());
    EXPECT_EQ(Json(Kestrel("--json template show " + ref)),
              (json{{"ok", true}, {"template", app::TemplateJson(*t, true)}}))
        << ref;
  }
  for (const std::string name : {"", "fast"}) {
    json want = {{"ok", true}, {"templates", json::array()}};
    auto listed = lib.List(name);
    ASSERT_TRUE(listed.IsOk());
    for (const auto& t : *listed) want["templates"].push_back(app::TemplateJson(t, false));
    EXPECT_EQ(Json(Kestrel("--json template list " + name)), want) << name;
  }

  // diff: two templates, and a template against a job.
  auto d = lib.Diff("fast@v1", "fast@v2");
  ASSERT_TRUE(d.IsOk());
  EXPECT_EQ(Json(Kestrel("--json template diff fast@v1 fast@v2")), Ok(app::ConfigDiffJson(*d)));
  auto job = Json(Kestrel("--json submit data=tiny epochs=10 imgsz=320 priority=high"));
  ASSERT_EQ(job["ok"], true) << job.dump();
  const std::string job_ref = "job:" + std::to_string(job["job_id"].get<int64_t>());
  auto dj = lib.Diff(job_ref, "fast@v1");
  ASSERT_TRUE(dj.IsOk()) << dj.GetStatus().ToString();
  CliRun jd = Kestrel("--json template diff " + job_ref + " fast@v1");
  EXPECT_EQ(Json(jd), Ok(app::ConfigDiffJson(*dj)));
  // The job was submitted with the template's keys: only data differs.
  ASSERT_EQ(dj->differences.size(), 1u) << jd.out;
  EXPECT_EQ(dj->differences[0].key, "data");
  EXPECT_NE(Kestrel("template diff " + job_ref + " fast@v1").out.find("data: tiny@"), std::string::npos);

  // submit template=: the template's keys, the command line winning; the
  // same template and overrides again is the same job (submit's dedup).
  auto t1 = Json(Kestrel("--json submit template=fast@v1 data=tiny epochs=12"));
  ASSERT_EQ(t1["ok"], true) << t1.dump();
  const std::string t1_ref = "job:" + std::to_string(t1["job_id"].get<int64_t>());
  auto tj = lib.Diff(t1_ref, "fast@v1");
  ASSERT_TRUE(tj.IsOk()) << tj.GetStatus().ToString();
  std::vector<std::string> differing;
  for (const auto& d : tj->differences) differing.push_back(d.key);
  EXPECT_EQ(differing, (std::vector<std::string>{"data", "epochs"}))
      << Json(Kestrel("--json template diff " + t1_ref + " fast@v1")).dump();
  auto t2 = Json(Kestrel("--json submit data=tiny template=fast@v1 epochs=12"));
  EXPECT_EQ(t2["job_id"], t1["job_id"]) << t2.dump();
  EXPECT_EQ(Kestrel("submit template=nosuch data=tiny").code, 1);
  EXPECT_EQ(Kestrel("submit template=fast template=slow data=tiny").code, 2);
  EXPECT_EQ(Kestrel("submit template=fast data=tiny epochs=0").code, 2);

  // Invalid keys: the error submit gives (same message, exit 2), nothing saved.
  for (const std::string bad : {"epochs=0", "epoch=10", "priority=urgent", "resume=x.ckpt", "imgsz=100"}) {
    CliRun t = Kestrel("--json template save bad " + bad);
    CliRun s = Kestrel("--json submit data=tiny " + bad);
    EXPECT_EQ(t.code, 2) << bad << t.out;
    EXPECT_EQ(s.code, 2) << bad << s.out;
    EXPECT_EQ(Json(t)["error"], Json(s)["error"]) << bad;
  }
  EXPECT_EQ(Kestrel("--json template show bad").code, 1);
  EXPECT_EQ(Json(Kestrel("--json template show bad"))["error"]["code"], "not_found");
  EXPECT_EQ(Kestrel("template show fast@v9").code, 1);
  EXPECT_EQ(Kestrel("template diff fast job:999").code, 1);
  EXPECT_EQ(Kestrel("template save").code, 2);
}

TEST_F(AppViewsCliTest, ValPredictionsPrintsTheAppView) {
  ASSERT_EQ(Kestrel("dataset import data --name tiny").code, 0);
  // Predictions made elsewhere: every val label as a detection, one moved.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_ / "data/labels/val")) {
    std::ifstream in(e.path());
    std::string text;
    for (std::string l; std::getline(in, l);)
      text += l + (files == 0 ? " 0.5\n0 0.5 0.5 0.2 0.2 0.3\n" : " 0.9\n");
    Write("p/" + e.path().filename().string(), text);
    ++files;
  }
  ASSERT_GT(files, 0);
  const std::string args = "val predictions=" + Abs("p") +
                           " data=tiny save_json=true coco_metrics=true project=" + Abs("runs/val");
  CliRun cli = Kestrel("--json " + args + " name=cli");
  ASSERT_EQ(cli.code, 0) << cli.out;
  OpenStores();
  app::ValKeys keys;
  keys.predictions = Abs("p");
  keys.data = "tiny";
  keys.save_json = true;
  keys.coco_metrics = true;
  keys.project = Abs("runs/val");
  keys.name = "app";
  auto run = app::EvaluatePredictions(Env::Default(), *meta_, *blobs_, keys);
  ASSERT_TRUE(run.IsOk()) << run.GetStatus().ToString();
  // The same document but for the run folder and the record's creation time
  // (and so the stored record's hash).
  json c = Json(cli), a = app::ValRunJson(*run);
  EXPECT_EQ(c["dir"], Abs("runs/val/cli"));
  EXPECT_EQ(a["dir"], Abs("runs/val/app"));
  EXPECT_EQ(a["predictions_json"], Abs("runs/val/app/predictions.json"));
  EXPECT_GT(a["result"]["metrics"]["map50"].get<double>(), 0.5);
  for (json* j : {&c, &a}) {
    for (const char* k : {"dir", "record_sha", "record_path", "predictions_json"}) j->erase(k);
    (*j)["result"].erase("created_at");
  }
  EXPECT_EQ(c, a);
  EXPECT_EQ(blobs_->PathFor(run->record_sha), run->record_path);
  // Errors are values and write nothing.
  keys.predictions = Abs("nope");
  keys.name = "bad";
  auto bad = app::EvaluatePredictions(Env::Default(), *meta_, *blobs_, keys);
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().file, Abs("nope"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "runs/val/bad"));
}

}  // namespace
}  // namespace kestrel::testing
