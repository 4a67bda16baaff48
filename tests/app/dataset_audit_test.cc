// app/dataset_audit.h over a real store: a synthetic version, a detector
// that returns chosen boxes per image (the version's own labels, with one
// label left unsupported, one box the labels lack and one other class), the
// ranked items, audit.csv / audit.json in a staged folder, and the errors
// naming their key. Milliseconds: no network runs.
#include "app/dataset_audit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include "app/dataset_audits.h"
#include "app/datasets.h"
#include "app/evaluate.h"
#include "app/gc.h"
#include "core/env.h"
#include "data/synth.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

// Returns, per PredictVal call, the next split's boxes.
class ScriptedDetector final : public Detector {
 public:
  explicit ScriptedDetector(std::vector<std::vector<std::vector<eval::Detection>>> per_call)
      : per_call_(std::move(per_call)) {}
  int NumClasses() const override { return 3; }
  const std::vector<std::string>& Names() const override { return names_; }
  std::string Arch() const override { return "scripted"; }
  const eval::InferenceOptions& Options() const override { return options_; }
  Result<std::vector<eval::ImagePrediction>> Predict(const std::vector<eval::ImageView>&) override {
    return Status::Internal("Predict is not used by the audit");
  }
  Result<std::vector<eval::ImagePrediction>> PredictVal(
      const std::vector<eval::ImageSize>& sizes, const eval::ValShapeOptions&,
      const std::function<Result<eval::ImageView>(size_t)>&) override {
    if (call_ >= per_call_.size()) return Status::Internal("unexpected PredictVal call");
    const auto& boxes = per_call_[call_++];
    std::vector<eval::ImagePrediction> out(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      out[i].width = sizes[i].width;
      out[i].height = sizes[i].height;
      if (i < boxes.size()) out[i].detections = boxes[i];
    }
    return out;
  }
  eval::StageTimes Timing() const override { return {}; }

 private:
  std::vector<std::vector<std::vector<eval::Detection>>> per_call_;
  size_t call_ = 0;
  std::vector<std::string> names_ = {"a", "b", "c"};
  eval::InferenceOptions options_ = [] {
    eval::InferenceOptions o;
    o.imgsz = 64;
    return o;
  }();
};

class DatasetAuditTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_audit_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const std::string home = (dir_ / "home").string();
    meta_ = std::move(store::MetadataStore::Open("sqlite:" + home + "/kestrel.db")).Value();
    blobs_ = std::make_unique<store::LocalArtifactStore>(home);
    data::SynthOptions o;
    o.images = 10;
    o.classes = 3;
    o.imgsz = 64;
    o.seed = 4;
    ASSERT_TRUE(data::WriteSynthDataset(o, (dir_ / "src").string()).IsOk());
    ASSERT_TRUE(Datasets(*meta_, *blobs_).Import((dir_ / "src").string(), "shapes", {}).IsOk());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The stored labels of a split as confident predictions.
  std::vector<std::vector<eval::Detection>> Echo(const std::string& split) {
    Result<LoadedSplit> s = LoadSplit(*meta_, *blobs_, "shapes@v1", split);
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    std::vector<std::vector<eval::Detection>> out;
    for (const auto& img : s->split.images) {
      out.emplace_back();
      for (const auto& g : img.labels) out.back().push_back({g.box, 0.9F, g.class_id});
    }
    return out;
  }

  fs::path dir_;
  std::unique_ptr<store::MetadataStore> meta_;
  std::unique_ptr<store::ArtifactStore> blobs_;
};

TEST_F(DatasetAuditTest, RanksWhatTheModelDisagreesWithAndWritesEveryItem) {
  auto train = Echo("train");
  auto val = Echo("val");
  ASSERT_FALSE(train.empty());
  ASSERT_FALSE(val.empty());
  size_t labels = 0;
  for (const auto& v : {train, val}) {
    for (const auto& img : v) labels += img.size();
  }
  // Image 0 of train: its first label loses its prediction (spurious).
  ASSERT_FALSE(train[0].empty());
  const eval::Box unsupported = train[0][0].box;
  train[0].erase(train[0].begin());
  // Image 0 of val: the model says another class for its first label.
  ASSERT_FALSE(val[0].empty());
  val[0][0].class_id = (val[0][0].class_id + 1) % 3;
  // And a confident box in a corner no label has (missing).
  val[0].push_back({eval::Box{0, 0, 6, 6}, 0.8F, 1});
  auto load = [&](const std::string&, const eval::InferenceOptions&,
                  const DetectorPlacement&) -> Result<std::unique_ptr<Detector>> {
    return std::unique_ptr<Detector>(new ScriptedDetector({train, val}));
  };
  AuditKeys keys;
  keys.data = "shapes@v1";
  keys.model = "scripted.safetensors";
  keys.out = (dir_ / "audit").string();
  Result<AuditReport> r = AuditDatasetAndWrite(Env::Default(), *meta_, *blobs_, keys, load);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->labels, labels);
  EXPECT_EQ(r->data, "shapes@v1");
  // The three disagreements first: spurious (~1), wrong class (0.9 * (1 - 0)), missing (0.8).
  ASSERT_GE(r->items.size(), 3u);
  std::set<std::string> top;
  for (size_t i = 0; i < 3; ++i) top.insert(eval::AuditKindName(r->items[i].kind));
  EXPECT_EQ(top, (std::set<std::string>{"spurious", "missing", "wrong_class"}));
  for (size_t i = 0; i < 3; ++i) {
    if (r->items[i].kind != eval::AuditKind::kSpurious) continue;
    EXPECT_EQ(r->images[r->items[i].image].split, "train");
    EXPECT_EQ(r->items[i].label_box.x1, unsupported.x1);
  }
  for (size_t i = 3; i < r->items.size(); ++i) EXPECT_EQ(r->items[i].kind, eval::AuditKind::kOk) << i;
  // Every label is an item once (ok, wrong class or spurious), plus the missing box.
  EXPECT_EQ(r->items.size(), labels + 1);

  // The files hold every item; the CSV a header and a row each.
  const std::string csv = Env::Default().ReadFile(keys.out + "/audit.csv").Value();
  EXPECT_EQ(size_t(std::count(csv.begin(), csv.end(), '\n')), r->items.size() + 1);
  EXPECT_EQ(csv.rfind("rank,kind,score,split,image,", 0), 0u);
  const auto j = nlohmann::json::parse(Env::Default().ReadFile(keys.out + "/audit.json").Value());
  EXPECT_EQ(j["items"].size(), r->items.size());
  EXPECT_EQ(j["counts"]["spurious"], 1);
  EXPECT_EQ(j["counts"]["missing"], 1);
  EXPECT_EQ(j["counts"]["wrong_class"], 1);
  EXPECT_EQ(j["items"][0]["rank"], 1);
  EXPECT_EQ(j["items"][0]["split"], r->images[r->items[0].image].split);
  EXPECT_EQ(j["items"][0]["kind"], eval::AuditKindName(r->items[0].kind));
  const std::string text = AuditReportText(*r, 5);
  EXPECT_NE(text.find("1 missing, 1 spurious, 1 wrong class, 0 localisation"), std::string::npos) << text;
  EXPECT_NE(text.find("audit.csv"), std::string::npos);
  // A second run into the same out= folder is refused (nothing overwritten).
  Result<AuditReport> again = AuditDatasetAndWrite(Env::Default(), *meta_, *blobs_, keys, load);
  EXPECT_FALSE(again.IsOk());

  // Stored on the version for the audit page (app/dataset_audits.h).
  EXPECT_EQ(r->stored, 1);
  Result<std::vector<StoredAudit>> stored = ListAudits(*meta_, "shapes");
  ASSERT_TRUE(stored.IsOk());
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].items, int64_t(r->items.size()));
  EXPECT_EQ((*stored)[0].counts["missing"], 1);
  EXPECT_EQ((*stored)[0].model, "scripted.safetensors");
  AuditPageRequest page;
  page.spec = "shapes@v1";
  Result<nlohmann::json> errors = AuditPage(*meta_, *blobs_, page);
  ASSERT_TRUE(errors.IsOk()) << errors.GetStatus().ToString();
  EXPECT_EQ((*errors)["total"], 3) << "errors: every kind but ok";
  ASSERT_EQ((*errors)["items"].size(), 3u);
  EXPECT_EQ((*errors)["items"][0]["rank"], 1);
  // Every image of the page: its sha, the version's labels and the audit's predictions.
  for (const auto& item : (*errors)["items"]) {
    const nlohmann::json& im = (*errors)["images"][item["image"].get<std::string>()];
    EXPECT_EQ(im["sha"].get<std::string>().size(), 64u);
    EXPECT_FALSE(im["labels"].empty());
    if (item["kind"] == "missing") {
      bool corner = false;
      for (const auto& p : im["predictions"])
        corner = corner || p["box"] == nlohmann::json::array({0, 0, 6, 6});
      EXPECT_TRUE(corner) << im.dump();
    }
  }
  // One kind, sorted lowest first, paged.
  page.kind = "ok";
  page.sort = "-score";
  page.limit = 2;
  page.offset = 1;
  Result<nlohmann::json> ok = AuditPage(*meta_, *blobs_, page);
  ASSERT_TRUE(ok.IsOk());
  EXPECT_EQ((*ok)["total"], int64_t(r->items.size()) - 3);
  ASSERT_EQ((*ok)["items"].size(), 2u);
  EXPECT_LE((*ok)["items"][0]["score"].get<double>(), (*ok)["items"][1]["score"].get<double>());
  page.sort = "image";
  ASSERT_TRUE(AuditPage(*meta_, *blobs_, page).IsOk());
  page.kind = "nonsense";
  EXPECT_EQ(AuditPage(*meta_, *blobs_, page).GetStatus().Where().field, "kind");
  page.kind = "all";
  page.number = 2;
  EXPECT_EQ(AuditPage(*meta_, *blobs_, page).GetStatus().Code(), StatusCode::kNotFound);
  // gc keeps the stored audit's blob: the version references it.
  Result<References> refs = CollectReferences(*meta_, *blobs_);
  ASSERT_TRUE(refs.IsOk());
  EXPECT_EQ(refs->all.count((*stored)[0].sha), 1u);
}

TEST_F(DatasetAuditTest, BadKeysAndEmptySplitsNameTheirKey) {
  auto never = [](const std::string&, const eval::InferenceOptions&,
                  const DetectorPlacement&) -> Result<std::unique_ptr<Detector>> {
    return Status::Internal("the model must not load");
  };
  AuditKeys keys;
  keys.data = "shapes@v1";
  Result<AuditReport> r = AuditDataset(*meta_, *blobs_, keys, never);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Where().field, "model");
  keys.model = "m.safetensors";
  keys.loose_iou = 0.6;
  r = AuditDataset(*meta_, *blobs_, keys, never);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Where().field, "loose_iou");
  keys.loose_iou = 0.1;
  keys.split = "test";  // the synthetic set has train and val only
  r = AuditDataset(*meta_, *blobs_, keys, never);
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().Message().find("test"), std::string::npos) << r.GetStatus().ToString();
  keys.split = "all";
  keys.data = "nosuch@v1";
  r = AuditDataset(*meta_, *blobs_, keys, never);
  ASSERT_FALSE(r.IsOk());
}

}  // namespace
}  // namespace kestrel::app
