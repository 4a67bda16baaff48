#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>

#include "core/env.h"
#include "eval/plots.h"

namespace kestrel::eval {
namespace {

cv::Mat Decode(const std::string& png) {
  std::vector<uchar> buf(png.begin(), png.end());
  return cv::imdecode(buf, cv::IMREAD_COLOR);
}

// Nonwhite pixel fraction: something was drawn, but not a flood.
double Ink(const cv::Mat& img) {
  cv::Mat gray;
  cv::extractChannel(img, gray, 0);
  return double(cv::countNonZero(gray < 250)) / double(gray.total());
}

EvalResult SmallResult() {
  EvalOptions o;
  o.num_classes = 3;
  o.class_names = {"cat", "dog", "traffic light"};
  DetectionEvaluator ev(o);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(0, 1);
  for (int i = 0; i < 30; ++i) {
    std::vector<GroundTruth> gt;
    std::vector<Detection> preds;
    for (int k = 0; k < 4; ++k) {
      const float x = 400 * u(rng), y = 400 * u(rng);
      gt.push_back({{x, y, x + 50, y + 40}, int(rng() % 3)});
      if (u(rng) < 0.8f) {
        preds.push_back({{x + 4 * u(rng), y, x + 50, y + 40 - 6 * u(rng)}, u(rng),
                         u(rng) < 0.8f ? gt.back().class_id : int(rng() % 3)});
      }
    }
    preds.push_back({{10, 10, 30, 30}, 0.5f * u(rng), int(rng() % 3)});
    EXPECT_TRUE(ev.AddImage(gt, preds).IsOk());
  }
  return std::move(ev.Finalize()).Value();
}

TEST(Plots, RenderAllKindsAsPng) {
  const EvalResult r = SmallResult();
  for (auto png : {RenderPrCurve(r), RenderConfidenceCurve(r, ConfidenceCurve::kF1),
                   RenderConfidenceCurve(r, ConfidenceCurve::kPrecision),
                   RenderConfusionMatrix(r.confusion, r.settings.class_names, true),
                   RenderLabelHistogram(r.label_counts, r.settings.class_names)}) {
    ASSERT_TRUE(png.IsOk()) << png.GetStatus().ToString();
    const cv::Mat img = Decode(*png);
    ASSERT_FALSE(img.empty());
    EXPECT_GE(img.cols, 400);
    EXPECT_GT(Ink(img), 0.01);
    EXPECT_LT(Ink(img), 0.6);
  }
  const std::string dir = std::string(KESTREL_BINARY_DIR) + "/eval_plots_small";
  ASSERT_TRUE(WritePlots(Env::Default(), dir, r).IsOk());
  EXPECT_TRUE(Env::Default().Stat(dir + "/confusion_matrix_normalized.png").is_regular);
}

TEST(Plots, DetectionGrid) {
  cv::Mat a(240, 320, CV_8UC3, cv::Scalar(90, 140, 60));
  cv::Mat b(300, 200, CV_8UC1, cv::Scalar(128));
  std::vector<GridTile> tiles(2);
  tiles[0].image = {a.data, a.cols, a.rows, 3, a.step};
  tiles[0].predictions = {{{20, 20, 200, 150}, 0.87f, 1}};
  tiles[0].labels = {{{25, 25, 190, 160}, 1}};
  tiles[0].title = "a.jpg";
  tiles[1].image = {b.data, b.cols, b.rows, 1, b.step};
  tiles[1].predictions = {{{10, 10, 50, 50}, 0.1f, 0}};  // below min_score: not drawn
  auto png = RenderDetectionGrid(tiles, {"cat", "dog"}, GridOptions{2, 256, 0.25f});
  ASSERT_TRUE(png.IsOk()) << png.GetStatus().ToString();
  const cv::Mat img = Decode(*png);
  EXPECT_EQ(img.cols, 512);
  EXPECT_EQ(img.rows, 256);
  ASSERT_TRUE(Env::Default()
                  .WriteFileAtomic(std::string(KESTREL_BINARY_DIR) + "/eval_grid.png", *png)
                  .IsOk());
  tiles[1].image.data = nullptr;
  EXPECT_FALSE(RenderDetectionGrid(tiles, {}, GridOptions{}).IsOk());
}

}  // namespace
}  // namespace kestrel::eval
