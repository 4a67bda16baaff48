// dataset_eval: manifest -> pixel ground truth, reading predictions for a
// split (YOLO txt folder, COCO results JSON with both id conventions),
// errors that name file/line/field, evaluation, table text, record JSON.
#include "eval/dataset_eval.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace kestrel::eval {
namespace {

namespace fs = std::filesystem;

data::ManifestEntry Entry(const std::string& path, data::Split split, int w, int h,
                          std::vector<data::Box> boxes) {
  data::ManifestEntry e;
  e.path = path;
  e.split = split;
  e.image_sha = "sha_" + path;
  e.width = w;
  e.height = h;
  e.boxes = std::move(boxes);
  return e;
}

data::Manifest TwoImageManifest() {
  data::Manifest m;
  m.names = {"cat", "dog", "bird"};
  m.entries.push_back(Entry("a/000000000007.jpg", data::Split::kVal, 200, 100,
                            {{0, 0.5, 0.5, 0.2, 0.4}, {2, 0.25, 0.25, 0.1, 0.1}}));
  m.entries.push_back(Entry("b/000000000009.png", data::Split::kVal, 100, 100, {{1, 0.5, 0.5, 0.5, 0.5}}));
  m.entries.push_back(Entry("t.jpg", data::Split::kTrain, 64, 64, {{0, 0.5, 0.5, 0.5, 0.5}}));
  return m;
}

class DatasetEvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_dseval_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    ASSERT_TRUE(Env::Default().WriteFileAtomic((dir_ / rel).string(), text).IsOk());
  }
  fs::path dir_;
};

TEST_F(DatasetEvalTest, ManifestBoxesBecomePixelsOfTheOrientedImage) {
  auto s = LoadEvalSplit(TwoImageManifest(), data::Split::kVal);
  ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
  ASSERT_EQ(s->images.size(), 2u);
  EXPECT_EQ(s->split, "val");
  const SplitImage& a = s->images[0];
  EXPECT_EQ(a.stem, "000000000007");
  EXPECT_EQ(a.export_id, 1);
  EXPECT_EQ(s->images[1].export_id, 2);
  ASSERT_EQ(a.labels.size(), 2u);
  // cx 0.5*200=100, w 0.2*200=40 -> x 80..120; cy 50, h 40 -> y 30..70.
  EXPECT_FLOAT_EQ(a.labels[0].box.x1, 80);
  EXPECT_FLOAT_EQ(a.labels[0].box.x2, 120);
  EXPECT_FLOAT_EQ(a.labels[0].box.y1, 30);
  EXPECT_FLOAT_EQ(a.labels[0].box.y2, 70);
  EXPECT_EQ(a.labels[1].class_id, 2);
}

TEST_F(DatasetEvalTest, EmptySplitIsAClearError) {
  auto s = LoadEvalSplit(TwoImageManifest(), data::Split::kTest);
  ASSERT_FALSE(s.IsOk());
  EXPECT_EQ(s.GetStatus().Code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.GetStatus().Message().find("'test' has no images"), std::string::npos)
      << s.GetStatus().ToString();
  EXPECT_NE(s.GetStatus().Message().find("val 2"), std::string::npos);
}

TEST_F(DatasetEvalTest, PerfectYoloTxtPredictionsScoreTheMaximum) {
  auto s = LoadEvalSplit(TwoImageManifest(), data::Split::kVal);
  ASSERT_TRUE(s.IsOk());
  Write("p/000000000007.txt", "0 0.5 0.5 0.2 0.4 0.9\n2 0.25 0.25 0.1 0.1 0.8\n");
  Write("p/000000000009.txt", "1 0.5 0.5 0.5 0.5 0.7\n");
  auto p = ReadSplitPredictions(Env::Default(), (dir_ / "p").string(), *s);
  ASSERT_TRUE(p.IsOk()) << p.GetStatus().ToString();
  EXPECT_EQ(p->format, "yolo_txt");
  ASSERT_EQ(p->per_image.size(), 2u);
  EXPECT_EQ(p->per_image[0].size(), 2u);
  auto r = EvaluateSplit(*s, p->per_image, {});
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_NEAR(r->map50, 0.995, 1e-12);
  EXPECT_NEAR(r->map5095, 0.995, 1e-12);
  EXPECT_EQ(r->images, 2);
  EXPECT_EQ(r->instances, 3);
  const std::string text = EvalSummaryText(*r);
  EXPECT_NE(text.find("mAP50-95"), std::string::npos);
  EXPECT_NE(text.find("bird"), std::string::npos);
  EXPECT_NE(text.find("best F1"), std::string::npos);
  EXPECT_NE(text.find("background 0"), std::string::npos);

  EvalProvenance prov{"toy", "v1", "abc", "val", "predictions", "p", {{"format", "yolo_txt"}}};
  nlohmann::json rec = EvalRecordJson(*r, prov, 1700000000);
  EXPECT_EQ(rec["kind"], "kestrel.eval_result");
  EXPECT_EQ(rec["provenance"]["version_id"], "abc");
  EXPECT_DOUBLE_EQ(rec["settings"]["conf"].get<double>(), 0.001);
  EXPECT_EQ(rec["settings"]["max_det"].get<int>(), 300);
  EXPECT_NEAR(rec["metrics"]["map50"].get<double>(), 0.995, 1e-12);
  // The mean curves the plots draw, at 101 points; at x = k/100 they
  // interpolate the 1000-point curves (the plots' own samples).
  const nlohmann::json& curves = rec["metrics"]["curves"];
  ASSERT_EQ(curves["pr"]["recall"].size(), 101u);
  ASSERT_EQ(curves["f1"].size(), 101u);
  EXPECT_DOUBLE_EQ(curves["confidence"][50].get<double>(), 0.5);
  const MeanCurves full = MeanCurvesOf(*r);
  ASSERT_EQ(full.f1.size(), r->curves.x.size());
  EXPECT_DOUBLE_EQ(curves["f1"][0].get<double>(), full.f1[0]);
  EXPECT_DOUBLE_EQ(curves["f1"][100].get<double>(), full.f1.back());
  EXPECT_DOUBLE_EQ(curves["pr"]["precision"][0].get<double>(), full.pr_precision[0]);
  EXPECT_NEAR(curves["pr"]["precision"][50].get<double>(), 1.0, 1e-9) << "perfect predictions";
  // The stored metrics read back into the EvalResult compare's deltas take.
  auto back = EvalResultFromJson(rec["metrics"]);
  ASSERT_TRUE(back.IsOk()) << back.GetStatus().ToString();
  nlohmann::json want = EvalResultToJson(*r), got = EvalResultToJson(*back);
  want.erase("errors");  // error counts stay in the record's JSON
  got.erase("errors");
  EXPECT_EQ(got, want);
  EXPECT_EQ(back->confusion.Counts(), r->confusion.Counts());
  EXPECT_EQ(back->classes.size(), r->classes.size());
  EXPECT_DOUBLE_EQ(back->map5095, r->map5095);
  EXPECT_EQ(back->settings.class_names, r->settings.class_names);
  EXPECT_FALSE(EvalResultFromJson(nlohmann::json{{"images", 1}}).IsOk());
  // Each match of MatchImage is one count of ProcessImage.
  const auto kept = ScoredPredictions(p->per_image[0], 0.001, 300);
  ConfusionMatrix cm(3, 0.25, 0.45);
  cm.ProcessImage(s->images[0].labels, kept);
  std::vector<int64_t> counts(16, 0);
  for (const ConfusionMatch& m : cm.MatchImage(s->images[0].labels, kept))
    ++counts[size_t(m.row * 4 + m.col)];
  EXPECT_EQ(counts, cm.Counts());
}

TEST_F(DatasetEvalTest, NanCoordinateNamesFileLineAndField) {
  auto s = LoadEvalSplit(TwoImageManifest(), data::Split::kVal);
  ASSERT_TRUE(s.IsOk());
  Write("p/000000000007.txt", "0 0.5 0.5 0.2 0.4 0.9\n0 0.5 nan 0.2 0.4 0.9\n");
  auto p = ReadSplitPredictions(Env::Default(), (dir_ / "p").string(), *s);
  ASSERT_FALSE(p.IsOk());
  EXPECT_EQ(p.GetStatus().Where().line, 2);
  EXPECT_EQ(p.GetStatus().Where().field, "cy");
  EXPECT_NE(p.GetStatus().Where().file.find("000000000007.txt"), std::string::npos);
}

TEST_F(DatasetEvalTest, UnknownClassAndStrayFileAndMissingPathAreErrors) {
  auto s = LoadEvalSplit(TwoImageManifest(), data::Split::kVal);
  ASSERT_TRUE(s.IsOk());
  Write("c/000000000007.txt", "3 0.5 0.5 0.2 0.4 0.9\n");  // nc = 3
  auto c = ReadSplitPredictions(Env::Default(), (dir_ / "c").string(), *s);
  ASSERT_FALSE(c.IsOk());
  EXPECT_EQ(c.GetStatus().Where().field, "class");

  Write("x/not_in_split.txt", "0 0.5 0.5 0.2 0.4 0.9\n");
  auto x = ReadSplitPredictions(Env::Default(), (dir_ / "x").string(), *s);
  ASSERT_FALSE(x.IsOk());
  EXPECT_NE(x.GetStatus().Where().file.find("not_in_split.txt"), std::string::npos);

  auto m = ReadSplitPredictions(Env::Default(), (dir_ / "missing").string(), *s);
  ASSERT_FALSE(m.IsOk());
  EXPECT_EQ(m.GetStatus().Code(), StatusCode::kNotFound);
}

TEST_F(DatasetEvalTest, CocoJsonByStemOrByExportId) {
  auto s = LoadEvalSplit(TwoImageManifest(), data::Split::kVal);
  ASSERT_TRUE(s.IsOk());
  // category_id = class + 1; stems 7 and 9.
  Write("stem.json", R"([{"image_id": 9, "category_id": 2, "bbox": [25, 25, 50, 50], "score": 0.5}])");
  auto a = ReadSplitPredictions(Env::Default(), (dir_ / "stem.json").string(), *s);
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  EXPECT_EQ(a->image_ids, "stem");
  ASSERT_EQ(a->per_image[1].size(), 1u);
  EXPECT_EQ(a->per_image[1][0].class_id, 1);
  EXPECT_FLOAT_EQ(a->per_image[1][0].box.x2, 75);

  Write("export.json", R"([{"image_id": 2, "category_id": 2, "bbox": [25, 25, 50, 50], "score": 0.5}])");
  PredictionReadOptions ro;
  ro.image_ids = "export";
  auto b = ReadSplitPredictions(Env::Default(), (dir_ / "export.json").string(), *s, ro);
  ASSERT_TRUE(b.IsOk()) << b.GetStatus().ToString();
  EXPECT_EQ(b->per_image[1].size(), 1u);
  // Under the stem convention, id 2 names no image: an error, not a silent drop.
  auto c = ReadSplitPredictions(Env::Default(), (dir_ / "export.json").string(), *s);
  ASSERT_FALSE(c.IsOk());
  EXPECT_EQ(c.GetStatus().Where().field, "image_id");
}

TEST_F(DatasetEvalTest, ClassCountMismatchIsRejected) {
  auto s = LoadEvalSplit(TwoImageManifest(), data::Split::kVal);
  ASSERT_TRUE(s.IsOk());
  EvalOptions o;
  o.num_classes = 80;
  auto r = EvaluateSplit(*s, std::vector<std::vector<Detection>>(2), o);
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().Message().find("class count mismatch"), std::string::npos);
}

TEST_F(DatasetEvalTest, NextRunDirIncrements) {
  Env& env = Env::Default();
  const std::string project = (dir_ / "runs").string();
  EXPECT_EQ(NextRunDir(env, project, "", "val", false), project + "/val");
  ASSERT_TRUE(env.CreateDirs(project + "/val").IsOk());
  EXPECT_EQ(NextRunDir(env, project, "", "val", false), project + "/val2");
  EXPECT_EQ(NextRunDir(env, project, "", "val", true), project + "/val");
  EXPECT_EQ(NextRunDir(env, project, "mine", "val", false), project + "/mine");
}

}  // namespace
}  // namespace kestrel::eval
