#include "eval/plots.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <set>

#include "core/env.h"
#include "data/text_render.h"
#include "eval/results_plot.h"

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

// Pixels with colour (max - min channel > 20) in `roi` of `img`: data drawn
// in series/class colours, as opposed to black text, gray grid and white.
int Colored(const cv::Mat& img, cv::Rect roi) {
  int n = 0;
  const cv::Mat m = img(roi);
  for (int y = 0; y < m.rows; ++y) {
    for (int x = 0; x < m.cols; ++x) {
      const cv::Vec3b p = m.at<cv::Vec3b>(y, x);
      const int mx = std::max({p[0], p[1], p[2]}), mn = std::min({p[0], p[1], p[2]});
      n += mx - mn > 20;
    }
  }
  return n;
}

bool FileExists(const std::string& path) { return std::ifstream(path).good(); }

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
        preds.push_back({{x + 4 * u(rng), y, x + 50, y + 40 - 6 * u(rng)},
                         u(rng),
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
  ASSERT_TRUE(
      Env::Default().WriteFileAtomic(std::string(KESTREL_BINARY_DIR) + "/eval_grid.png", *png).IsOk());
  tiles[1].image.data = nullptr;
  EXPECT_FALSE(RenderDetectionGrid(tiles, {}, GridOptions{}).IsOk());
}

using data::FontWeight;
using data::HAlign;
using data::VAlign;

// Restores the default fonts after a test that changed them.
struct DefaultFonts {
  ~DefaultFonts() { data::SetFontFilesForTesting(data::kDefaultFontFile, data::kDefaultBoldFontFile); }
};

// Distinct gray levels and ink pixels in a text crop.
std::pair<size_t, int> TextPixels(const cv::Mat& img) {
  std::set<int> levels;
  int ink = 0;
  for (int y = 0; y < img.rows; ++y) {
    for (int x = 0; x < img.cols; ++x) {
      const int v = img.channels() == 3 ? img.at<cv::Vec3b>(y, x)[1] : img.at<uint8_t>(y, x);
      levels.insert(v);
      ink += v < 250;
    }
  }
  return {levels.size(), ink};
}

TEST(TextRender, TrueTypeTextIsAntiAliased) {
  DefaultFonts restore;
  data::SetFontFilesForTesting(data::kDefaultFontFile, data::kDefaultBoldFontFile);
  if (!data::TrueTypeBuiltIn() || !FileExists(data::kDefaultFontFile)) {
    GTEST_SKIP() << "no freetype module or no " << data::kDefaultFontFile;
  }
  ASSERT_TRUE(data::UsingTrueTypeFont());
  EXPECT_EQ(data::FontWarningCount(), 0);
  cv::Mat img(40, 300, CV_8UC3, cv::Scalar::all(255));
  data::PutText(img, "mAP50-95 Agy", cv::Point(4, 4), 20, cv::Scalar::all(0));
  const auto [levels, ink] = TextPixels(img);
  EXPECT_GT(levels, 2u);  // black, white and the anti-aliased edges
  EXPECT_GT(ink, 100);
  // The text box is where the ink is: nothing above its top or past its width.
  const cv::Size box = data::TextSize("mAP50-95 Agy", 20);
  EXPECT_EQ(box.height, data::LineHeight(20));
  EXPECT_GT(box.width, 80);
  EXPECT_LT(box.width, 200);
  EXPECT_EQ(TextPixels(img(cv::Rect(0, 0, 300, 4))).second, 0);
  EXPECT_EQ(TextPixels(img(cv::Rect(box.width + 8, 0, 300 - box.width - 8, 40))).second, 0);
  // Bold is wider; centring and right alignment move the box.
  EXPECT_GT(data::TextSize("mAP50-95 Agy", 20, FontWeight::kBold).width, box.width);
  cv::Mat right(40, 300, CV_8UC3, cv::Scalar::all(255));
  data::PutText(right, "x", cv::Point(299, 20), 20, cv::Scalar::all(0), FontWeight::kRegular, HAlign::kRight,
                VAlign::kMiddle);
  EXPECT_EQ(TextPixels(right(cv::Rect(0, 0, 270, 40))).second, 0);
  EXPECT_GT(TextPixels(right(cv::Rect(270, 0, 30, 40))).second, 10);
}

TEST(TextRender, VerticalAndGrayAndClippedText) {
  cv::Mat v(200, 40, CV_8UC3, cv::Scalar::all(255));
  data::PutTextVertical(v, "instances", cv::Point(20, 100), 16, cv::Scalar(0, 0, 255), FontWeight::kRegular,
                        HAlign::kCenter, VAlign::kMiddle);
  EXPECT_GT(Colored(v, cv::Rect(0, 0, 40, 200)), 30);  // red, reads bottom to top
  cv::Mat g(40, 200, CV_8UC1, cv::Scalar(255));
  data::PutText(g, "gray canvas", cv::Point(2, 2), 16, cv::Scalar(0));
  EXPECT_GT(TextPixels(g).second, 30);
  // Partly or wholly outside the image: clipped, no crash.
  data::PutText(g, "outside", cv::Point(-30, -8), 16, cv::Scalar(0));
  data::PutText(g, "far away", cv::Point(5000, 5000), 16, cv::Scalar(0));
  data::PutTextVertical(g, "outside", cv::Point(190, 30), 16, cv::Scalar(0));
  data::PutText(g, "", cv::Point(2, 2), 16, cv::Scalar(0));
}

TEST(TextRender, MissingFontFallsBackToHersheyWithOneWarning) {
  DefaultFonts restore;
  data::SetFontFilesForTesting("/nonexistent/kestrel/NoSuchFont.ttf", "");
  EXPECT_FALSE(data::UsingTrueTypeFont());
  cv::Mat img(40, 300, CV_8UC3, cv::Scalar::all(255));
  for (int i = 0; i < 3; ++i) {
    data::PutText(img, "fallback text", cv::Point(4, 4), 20, cv::Scalar::all(0));
  }
  EXPECT_GT(TextPixels(img).second, 50);
  EXPECT_EQ(data::FontWarningCount(), 1);
  EXPECT_GT(data::TextSize("fallback text", 20).width, 60);
  // Whole plots still render.
  auto png = RenderLabelHistogram({3, 5}, {"cat", "dog"});
  ASSERT_TRUE(png.IsOk()) << png.GetStatus().ToString();
  EXPECT_GT(Ink(Decode(*png)), 0.01);
  EXPECT_EQ(data::FontWarningCount(), 1);

  // A file that is not a font: the same fallback, never an exception.
  const std::string bad = std::string(KESTREL_BINARY_DIR) + "/not_a_font.ttf";
  ASSERT_TRUE(Env::Default().WriteFileAtomic(bad, "this is not a TrueType font").IsOk());
  data::SetFontFilesForTesting(bad, bad);
  EXPECT_FALSE(data::UsingTrueTypeFont());
  data::PutText(img, "still fine", cv::Point(4, 4), 20, cv::Scalar::all(0));
  EXPECT_EQ(data::FontWarningCount(), 1);
}

LabelStats SomeLabels() {
  LabelStats s;
  s.names = {"cat", "dog", "a rather long class name that must be cut"};
  s.counts = {0, 0, 0};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0, 1);
  for (int i = 0; i < 400; ++i) {
    const int c = int(rng() % 3);
    ++s.counts[size_t(c)];
    s.boxes.push_back(
        {c, 0.2f + 0.6f * u(rng), 0.3f + 0.4f * u(rng), 0.05f + 0.3f * u(rng), 0.05f + 0.2f * u(rng)});
  }
  s.subtitle = "train split: 100 images, 400 instances";
  return s;
}

TEST(Plots, LabelsPlotFillsAllFourPanels) {
  auto png = RenderLabelsPlot(SomeLabels());
  ASSERT_TRUE(png.IsOk()) << png.GetStatus().ToString();
  const cv::Mat img = Decode(*png);
  ASSERT_EQ(img.cols, 1400);
  ASSERT_EQ(img.rows, 1440);
  // Each 700 x 700 panel (below the 40 px header) has data drawn in colour.
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 2; ++c) {
      const cv::Rect panel(c * 700 + 80, 40 + r * 700 + 50, 580, 500);
      EXPECT_GT(Colored(img, panel), 2000) << "panel row " << r << " col " << c;
    }
  }
  ASSERT_TRUE(
      Env::Default().WriteFileAtomic(std::string(KESTREL_BINARY_DIR) + "/eval_labels.png", *png).IsOk());
  // Counts only: one wide histogram.
  auto counts = RenderLabelHistogram({10, 0, 4}, {"a", "b"});
  ASSERT_TRUE(counts.IsOk());
  const cv::Mat h = Decode(*counts);
  EXPECT_EQ(h.cols, 1400);
  EXPECT_EQ(h.rows, 740);
  EXPECT_GT(Colored(h, cv::Rect(0, 40, 1400, 700)), 5000);
  // Many classes and no classes render too.
  LabelStats many;
  for (int c = 0; c < 300; ++c) {
    many.counts.push_back(c % 7);
    many.boxes.push_back({c, 0.5f, 0.5f, 0.1f, 0.1f});
  }
  EXPECT_TRUE(RenderLabelsPlot(many).IsOk());
  EXPECT_TRUE(RenderLabelsPlot(LabelStats{}).IsOk());
}

TEST(Plots, LabelStatsFromManifestCountsOneSplit) {
  data::Manifest m;
  m.names = {"a", "b"};
  data::ManifestEntry e;
  e.path = "1.jpg";
  e.boxes = {{0, 0.5, 0.5, 0.2, 0.2}, {1, 0.1, 0.2, 0.1, 0.1}};
  m.entries.push_back(e);
  e.path = "2.jpg";
  e.split = data::Split::kVal;
  m.entries.push_back(e);
  const LabelStats s = LabelStatsFromManifest(m, data::Split::kTrain);
  EXPECT_EQ(s.counts, (std::vector<int64_t>{1, 1}));
  ASSERT_EQ(s.boxes.size(), 2u);
  EXPECT_FLOAT_EQ(s.boxes[1].cy, 0.2f);
  EXPECT_EQ(s.subtitle, "train split: 1 images, 2 instances");
}

ResultsTable SomeResults(int epochs) {
  ResultsTable t;
  for (int e = 1; e <= epochs; ++e) t.epochs.push_back(e);
  for (int k = 0; k < 10; ++k) {
    ResultsSeries s;
    s.title = "series " + std::to_string(k);
    s.ylabel = k < 3 ? "loss" : "value";
    for (int e = 1; e <= epochs; ++e) s.values.push_back(k < 3 ? 3.0 / e + 0.1 * (e % 2) : 1 - 1.0 / e);
    t.series.push_back(s);
  }
  return t;
}

TEST(Plots, ResultsPlotHasEveryPanel) {
  for (int epochs : {1, 2, 30}) {
    auto png = RenderResultsPlot(SomeResults(epochs));
    ASSERT_TRUE(png.IsOk()) << png.GetStatus().ToString();
    const cv::Mat img = Decode(*png);
    ASSERT_EQ(img.cols, 5 * kResultsPanelWidth);
    ASSERT_EQ(img.rows, kResultsHeaderHeight + 2 * kResultsPanelHeight);
    for (int p = 0; p < 10; ++p) {
      const cv::Rect plot((p % 5) * kResultsPanelWidth + 80,
                          kResultsHeaderHeight + (p / 5) * kResultsPanelHeight + 42, kResultsPanelWidth - 100,
                          kResultsPanelHeight - 102);
      EXPECT_GT(Colored(img, plot), 20) << epochs << " epochs, panel " << p;
    }
    if (epochs == 30) {
      ASSERT_TRUE(
          Env::Default().WriteFileAtomic(std::string(KESTREL_BINARY_DIR) + "/eval_results.png", *png).IsOk());
    }
  }
  // A missing series shows its message instead of data; NaN values are gaps.
  ResultsTable t = SomeResults(5);
  t.series[5].values.clear();
  t.series[5].missing = "no val split";
  t.series[0].values[2] = NAN;
  auto png = RenderResultsPlot(t);
  ASSERT_TRUE(png.IsOk());
  const cv::Mat img = Decode(*png);
  EXPECT_EQ(Colored(img, cv::Rect(80, kResultsHeaderHeight + kResultsPanelHeight + 42, 340, 228)), 0);
  // Bad tables are refused.
  t.series[1].values.pop_back();
  EXPECT_FALSE(RenderResultsPlot(t).IsOk());
  t.columns = 0;
  EXPECT_FALSE(RenderResultsPlot(t).IsOk());
}

TEST(Plots, GaussianSmooth) {
  const std::vector<double> flat(7, 2.5);
  for (double v : GaussianSmooth(flat, 3)) EXPECT_NEAR(v, 2.5, 1e-12);
  // A symmetric input stays symmetric; a step is spread but keeps its mean.
  const std::vector<double> step = {0, 0, 0, 0, 1, 1, 1, 1};
  const std::vector<double> s = GaussianSmooth(step, 1);
  ASSERT_EQ(s.size(), step.size());
  for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(s[i], 1 - s[s.size() - 1 - i], 1e-12);
  EXPECT_GT(s[3], 0.1);
  EXPECT_LT(s[0], 0.05);
  // gaussian_filter1d([0, 0, 0, 0, 1, 1, 1, 1], 1)[3]: sum of the normalized weights 1..4.
  EXPECT_NEAR(s[3], 0.300528, 1e-5);
  // NaN is skipped, a single point and sigma 0 are the identity.
  const std::vector<double> gap = GaussianSmooth({1, NAN, 1}, 1);
  EXPECT_NEAR(gap[1], 1, 1e-12);
  EXPECT_EQ(GaussianSmooth({4}, 3), std::vector<double>{4});
  EXPECT_EQ(GaussianSmooth(step, 0), step);
  EXPECT_EQ(ResultsSmoothingSigma(2), 0);
  EXPECT_EQ(ResultsSmoothingSigma(5), 1);
  EXPECT_EQ(ResultsSmoothingSigma(300), 3);
}

}  // namespace
}  // namespace kestrel::eval
