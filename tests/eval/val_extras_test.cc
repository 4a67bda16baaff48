// What `kestrel val` writes besides the metrics: COCO image ids of a split,
// the exact COCO results JSON (round trip through ReadSplitPredictions), the
// COCO-style metrics of a split, and the val_batch0 label/prediction grids.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>

#include "eval/dataset_eval.h"
#include "eval/plots.h"
#include "eval/prediction_io.h"
#include "eval/split_coco.h"
#include "eval/val_batch.h"

namespace kestrel::eval {
namespace {

namespace fs = std::filesystem;

data::ManifestEntry Entry(const std::string& path, int w, int h, std::vector<data::Box> boxes) {
  data::ManifestEntry e;
  e.path = path;
  e.split = data::Split::kVal;
  e.image_sha = "sha_" + path;
  e.width = w;
  e.height = h;
  e.boxes = std::move(boxes);
  return e;
}

EvalSplit MakeSplit(const std::vector<std::string>& paths) {
  data::Manifest m;
  m.names = {"cat", "dog", "bird"};
  int k = 0;
  for (const auto& p : paths) {
    m.entries.push_back(Entry(p, 200 + 10 * k, 100 + 7 * k,
                              {{k % 3, 0.5, 0.5, 0.3, 0.4}, {(k + 1) % 3, 0.2, 0.25, 0.1, 0.12}}));
    ++k;
  }
  auto s = LoadEvalSplit(m, data::Split::kVal);
  EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
  return std::move(s).Value();
}

// Predictions with coordinates and scores that are not short decimals, so
// any rounding on the way through JSON would show.
std::vector<std::vector<Detection>> NoisyPredictions(const EvalSplit& split, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<std::vector<Detection>> out(split.images.size());
  for (size_t i = 0; i < split.images.size(); ++i) {
    for (const GroundTruth& g : split.images[i].labels) {
      const float dx = 6 * u(rng) - 3, dy = 6 * u(rng) - 3;
      out[i].push_back({{g.box.x1 + dx, g.box.y1 + dy, g.box.x2 + dx / 3, g.box.y2 - dy / 7},
                        u(rng),
                        u(rng) < 0.8f ? g.class_id : int(rng() % 3)});
    }
    const float x = 150 * u(rng), y = 80 * u(rng);
    out[i].push_back({{x, y, x + 1.0f / 3.0f + 20 * u(rng), y + 17 * u(rng)}, u(rng) / 3, int(rng() % 3)});
  }
  return out;
}

class ValExtrasTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_valextras_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST(SplitImageIds, AutoStemAndExport) {
  const EvalSplit numeric = MakeSplit({"a/000000000030.jpg", "b/7.png", "c/12.jpg"});
  auto ids = ResolveSplitImageIds(numeric, "auto");
  ASSERT_TRUE(ids.IsOk()) << ids.GetStatus().ToString();
  EXPECT_EQ(ids->mode, "stem");
  EXPECT_EQ(ids->ids, (std::vector<int64_t>{30, 7, 12}));
  auto exp = ResolveSplitImageIds(numeric, "export");
  ASSERT_TRUE(exp.IsOk());
  EXPECT_EQ(exp->ids, (std::vector<int64_t>{1, 2, 3}));

  const EvalSplit named = MakeSplit({"x/cat.jpg", "x/12.jpg"});
  auto a = ResolveSplitImageIds(named, "auto");
  ASSERT_TRUE(a.IsOk());
  EXPECT_EQ(a->mode, "export");
  EXPECT_EQ(a->ids, (std::vector<int64_t>{1, 2}));
  auto bad = ResolveSplitImageIds(named, "stem");
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "image_ids");
  // Two images with the same numeric stem cannot be told apart by stem.
  EXPECT_EQ(ResolveSplitImageIds(MakeSplit({"a/5.jpg", "b/5.jpg"}), "auto")->mode, "export");
  EXPECT_FALSE(ResolveSplitImageIds(named, "bogus").IsOk());
}

TEST_F(ValExtrasTest, CocoJsonReadsBackBitIdenticalAndScoresTheSame) {
  for (const std::string mode : {"auto", "export"}) {
    const EvalSplit split = MakeSplit({"a/000000000030.jpg", "b/7.png", "c/12.jpg", "d/99.jpg"});
    const auto preds = NoisyPredictions(split, 11);
    auto cj = SplitPredictionsCocoJson(split, preds, mode);
    ASSERT_TRUE(cj.IsOk()) << cj.GetStatus().ToString();
    EXPECT_EQ(cj->image_ids, mode == "auto" ? "stem" : "export");
    EXPECT_EQ(cj->detections, 12);
    EXPECT_NE(cj->text.find("\"category_id\":1"), std::string::npos);  // class 0 -> category 1
    const std::string path = (dir_ / ("p_" + mode + ".json")).string();
    ASSERT_TRUE(Env::Default().WriteFileAtomic(path, cj->text).IsOk());
    PredictionReadOptions ro;
    ro.image_ids = cj->image_ids;
    auto back = ReadSplitPredictions(Env::Default(), path, split, ro);
    ASSERT_TRUE(back.IsOk()) << back.GetStatus().ToString();
    ASSERT_EQ(back->per_image.size(), preds.size());
    for (size_t i = 0; i < preds.size(); ++i) {
      ASSERT_EQ(back->per_image[i].size(), preds[i].size()) << i;
      for (size_t k = 0; k < preds[i].size(); ++k) {
        const Detection& a = preds[i][k];
        const Detection& b = back->per_image[i][k];
        EXPECT_EQ(a.box.x1, b.box.x1);
        EXPECT_EQ(a.box.y1, b.box.y1);
        EXPECT_EQ(a.box.x2, b.box.x2);
        EXPECT_EQ(a.box.y2, b.box.y2);
        EXPECT_EQ(a.score, b.score);
        EXPECT_EQ(a.class_id, b.class_id);
      }
    }
    auto r1 = EvaluateSplit(split, preds, {});
    auto r2 = EvaluateSplit(split, back->per_image, {});
    ASSERT_TRUE(r1.IsOk() && r2.IsOk());
    EXPECT_GT(r1->map5095, 0.0);
    EXPECT_EQ(r1->map50, r2->map50);
    EXPECT_EQ(r1->map5095, r2->map5095);
    EXPECT_EQ(r1->precision, r2->precision);
    EXPECT_EQ(r1->recall, r2->recall);
  }
}

TEST(SplitCoco, RoundedWriterIsUnchangedAndExactOneIsNot) {
  const std::vector<std::pair<int64_t, std::vector<Detection>>> images = {
      {1, {{{1.0f / 3.0f, 2, 10, 20}, 0.123456789f, 0}}}};
  const std::string rounded = CocoResultsJson(images, {1});
  EXPECT_NE(rounded.find("0.333"), std::string::npos) << rounded;
  EXPECT_EQ(rounded.find("0.3333"), std::string::npos) << rounded;
  EXPECT_NE(rounded.find("0.12346"), std::string::npos) << rounded;
  CocoWriteOptions exact;
  exact.round = false;
  const std::string full = CocoResultsJson(images, {1}, exact);
  EXPECT_NE(full.find("0.3333333"), std::string::npos) << full;
}

TEST(SplitCoco, ClassOutsideTheSplitIsAnErrorNamingTheImage) {
  const EvalSplit split = MakeSplit({"a/1.jpg", "b/2.jpg"});
  std::vector<std::vector<Detection>> preds(2);
  preds[1].push_back({{0, 0, 5, 5}, 0.5f, 3});
  auto cj = SplitPredictionsCocoJson(split, preds, "auto");
  ASSERT_FALSE(cj.IsOk());
  EXPECT_EQ(cj.GetStatus().Where().file, "b/2.jpg");
  EXPECT_EQ(cj.GetStatus().Where().field, "class");
  EXPECT_FALSE(CocoEvaluateSplit(split, preds).IsOk());
  preds.pop_back();
  EXPECT_FALSE(SplitPredictionsCocoJson(split, preds, "auto").IsOk());  // not parallel
}

TEST(SplitCoco, PerfectPredictionsScoreOneAndMissesLower) {
  const EvalSplit split = MakeSplit({"a/1.jpg", "b/2.jpg", "c/3.jpg"});
  std::vector<std::vector<Detection>> perfect(split.images.size());
  for (size_t i = 0; i < split.images.size(); ++i) {
    for (const GroundTruth& g : split.images[i].labels) perfect[i].push_back({g.box, 0.9f, g.class_id});
  }
  auto m = CocoEvaluateSplit(split, perfect);
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  EXPECT_DOUBLE_EQ(m->Ap(), 1.0);
  EXPECT_DOUBLE_EQ(m->Ap50(), 1.0);
  EXPECT_DOUBLE_EQ(m->stats[8], 1.0);  // AR100
  ASSERT_EQ(m->per_class_ap.size(), 3u);
  auto half = perfect;
  for (auto& p : half) p.pop_back();
  auto mh = CocoEvaluateSplit(split, half);
  ASSERT_TRUE(mh.IsOk());
  EXPECT_LT(mh->Ap(), 0.9);
  EXPECT_GT(mh->Ap(), 0.1);
}

std::string Png(const cv::Mat& img) {
  std::vector<uchar> buf;
  cv::imencode(".png", img, buf);
  return std::string(buf.begin(), buf.end());
}

cv::Mat DecodeJpeg(const std::string& bytes) {
  EXPECT_GE(bytes.size(), 3u);
  EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0xFF);  // JPEG SOI
  EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0xD8);
  std::vector<uchar> buf(bytes.begin(), bytes.end());
  return cv::imdecode(buf, cv::IMREAD_COLOR);
}

// Largest channel difference from gray 128 in a 5x5 patch around (x, y).
int MaxDeviationFromGray(const cv::Mat& img, int x, int y) {
  int dev = 0;
  for (int yy = y - 2; yy <= y + 2; ++yy) {
    for (int xx = x - 2; xx <= x + 2; ++xx) {
      const cv::Vec3b p = img.at<cv::Vec3b>(yy, xx);
      for (int c = 0; c < 3; ++c) dev = std::max(dev, std::abs(int(p[c]) - 128));
    }
  }
  return dev;
}

TEST(ValBatch, LabelsAndPredictionsDrawnWhereTheyAre) {
  // One 200x100 gray image, one label at [20, 20, 120, 80]; a prediction at
  // [140, 10, 190, 60] (drawn) and one below 0.25 (not drawn).
  data::Manifest m;
  m.names = {"cat", "dog"};
  m.entries.push_back(Entry("img/one.png", 200, 100, {{1, 0.35, 0.5, 0.5, 0.6}}));
  auto split = LoadEvalSplit(m, data::Split::kVal);
  ASSERT_TRUE(split.IsOk());
  const cv::Mat gray(100, 200, CV_8UC3, cv::Scalar::all(128));
  const std::map<std::string, std::string> bytes = {{"sha_img/one.png", Png(gray)}};
  ImageBytesReader read = [&](const SplitImage& im) -> Result<std::string> { return bytes.at(im.image_sha); };
  std::vector<std::vector<Detection>> preds = {{{{140, 10, 190, 60}, 0.9f, 0}, {{20, 20, 120, 80}, 0.2f, 0}}};
  auto g = RenderValBatch(*split, preds, read);
  ASSERT_TRUE(g.IsOk()) << g.GetStatus().ToString();
  EXPECT_EQ(g->images, 1u);
  const cv::Mat labels = DecodeJpeg(g->labels_jpg);
  const cv::Mat pred = DecodeJpeg(g->pred_jpg);
  ASSERT_EQ(labels.cols, 320);  // one tile
  ASSERT_EQ(labels.rows, 320);
  ASSERT_EQ(pred.size(), labels.size());
  // Tile scale 1.6, image at y offset 80: the label's left edge is x = 32,
  // y 112..208; the prediction's right edge x = 304, y 96..176.
  EXPECT_GT(MaxDeviationFromGray(labels, 32, 180), 40) << "label box not drawn";
  EXPECT_LT(MaxDeviationFromGray(pred, 32, 180), 20) << "low-score prediction or label drawn in pred grid";
  EXPECT_GT(MaxDeviationFromGray(pred, 304, 150), 40) << "prediction not drawn";
  EXPECT_LT(MaxDeviationFromGray(labels, 304, 150), 20) << "prediction drawn in labels grid";
  EXPECT_LT(MaxDeviationFromGray(labels, 160, 190), 20) << "inside of the image should stay gray";
}

TEST(ValBatch, AtMostSixteenTilesBigImagesAndReadErrors) {
  std::vector<std::string> paths;
  for (int i = 0; i < 20; ++i) paths.push_back("img/" + std::to_string(100 + i) + ".png");
  const EvalSplit split = MakeSplit(paths);
  int reads = 0;
  const cv::Mat big(600, 900, CV_8UC3, cv::Scalar(20, 200, 90));
  const std::string big_png = Png(big);
  ImageBytesReader read = [&](const SplitImage&) -> Result<std::string> {
    ++reads;
    return big_png;  // larger than the manifest says: only the grid geometry is checked here
  };
  auto g = RenderValBatch(split, NoisyPredictions(split, 3), read);
  ASSERT_TRUE(g.IsOk()) << g.GetStatus().ToString();
  EXPECT_EQ(g->images, 16u);
  EXPECT_EQ(reads, 16);
  const cv::Mat img = DecodeJpeg(g->labels_jpg);
  EXPECT_EQ(img.cols, 4 * 320);
  EXPECT_EQ(img.rows, 4 * 320);

  ImageBytesReader broken = [&](const SplitImage& im) -> Result<std::string> {
    if (im.path == "img/103.png") return std::string("not an image");
    return big_png;
  };
  auto bad = RenderValBatch(split, NoisyPredictions(split, 3), broken);
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().file, "img/103.png");
  ValBatchOptions few;
  few.max_images = 3;
  auto g3 = RenderValBatch(split, NoisyPredictions(split, 3), read, few);
  ASSERT_TRUE(g3.IsOk());
  EXPECT_EQ(DecodeJpeg(g3->pred_jpg).cols, 3 * 320);
}

TEST(Plots, GridAsJpegWithNamedLabels) {
  cv::Mat a(100, 100, CV_8UC3, cv::Scalar::all(128));
  std::vector<GridTile> tiles(1);
  tiles[0].image = {a.data, a.cols, a.rows, 3, a.step};
  tiles[0].labels = {{{10, 10, 90, 90}, 0}};
  GridOptions png_white;
  png_white.columns = 1;
  png_white.tile_size = 100;
  auto p = RenderDetectionGrid(tiles, {"cat"}, png_white);
  ASSERT_TRUE(p.IsOk());
  EXPECT_EQ(p->substr(1, 3), "PNG");
  GridOptions named = png_white;
  named.label_names = true;
  named.format = GridFormat::kJpeg;
  auto j = RenderDetectionGrid(tiles, {"cat"}, named);
  ASSERT_TRUE(j.IsOk());
  const cv::Mat white = cv::imdecode(std::vector<uchar>(p->begin(), p->end()), cv::IMREAD_COLOR);
  const cv::Mat col = DecodeJpeg(*j);
  // Default: a white outline; named: a class-coloured box (not white).
  const cv::Vec3b w = white.at<cv::Vec3b>(50, 10);
  EXPECT_GT(std::min({w[0], w[1], w[2]}), 200);
  const cv::Vec3b c = col.at<cv::Vec3b>(50, 10);
  EXPECT_LT(std::min({c[0], c[1], c[2]}), 200);
}

}  // namespace
}  // namespace kestrel::eval
