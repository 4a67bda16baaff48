// The study plots (issue 32): geometry read back from the decoded PNGs —
// how many trials are drawn, where the best-so-far line and the best
// trial's polyline go, one panel per param, bar lengths proportional to
// the importances.
#include "eval/study_plots.h"

#include <gtest/gtest.h>

#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "core/env.h"

namespace kestrel::eval {
namespace {

cv::Mat Decode(const Result<std::string>& png) {
  EXPECT_TRUE(png.IsOk()) << png.GetStatus().ToString();
  if (!png.IsOk()) return {};
  std::vector<uchar> buf(png->begin(), png->end());
  return cv::imdecode(buf, cv::IMREAD_COLOR);
}

// Pixels within `tol` of a BGR colour.
cv::Mat Near(const cv::Mat& img, cv::Scalar bgr, int tol) {
  cv::Mat mask;
  cv::inRange(img, bgr - cv::Scalar::all(tol), bgr + cv::Scalar::all(tol), mask);
  return mask;
}

const cv::Scalar kDot(180, 119, 31);  // study_plots.cc's colours (BGR)
const cv::Scalar kRed(40, 39, 214);

// Blobs of `mask` whose area is in [lo, hi] pixels.
std::vector<cv::Point2d> Blobs(const cv::Mat& mask, int lo, int hi) {
  cv::Mat labels, stats, centroids;
  const int n = cv::connectedComponentsWithStats(mask, labels, stats, centroids);
  std::vector<cv::Point2d> out;
  for (int i = 1; i < n; ++i) {
    const int area = stats.at<int>(i, cv::CC_STAT_AREA);
    if (area >= lo && area <= hi) out.emplace_back(centroids.at<double>(i, 0), centroids.at<double>(i, 1));
  }
  return out;
}

// Mean row of the set pixels of `mask` in columns [x0, x1); -1 when none.
double MeanRow(const cv::Mat& mask, int x0, int x1) {
  double sum = 0;
  int n = 0;
  for (int y = 0; y < mask.rows; ++y) {
    for (int x = x0; x < x1; ++x) {
      if (mask.at<uchar>(y, x)) {
        sum += y;
        ++n;
      }
    }
  }
  return n ? sum / n : -1;
}

StudyPlotData Study(bool maximize) {
  StudyPlotData d;
  d.study = "demo";
  d.maximize = maximize;
  d.params = {{"lr0", true, {}}, {"mosaic", false, {}}, {"optimizer", false, {"SGD", "AdamW"}}};
  // Values rise with mosaic; trial 5 was pruned (no value), trial 6 failed.
  const double values[] = {0.10, 0.30, 0.20, 0.50, 0.40};
  for (int i = 0; i < 5; ++i) {
    d.trials.push_back({i, {std::pow(10.0, -4 + 0.7 * i), 0.1 + 0.2 * i, double(i % 2)}, values[i]});
  }
  d.trials.push_back({5, {1e-2, 0.5, 0.0}, std::nullopt});
  d.trials.push_back({6, {1e-3, 0.2, 1.0}, std::nullopt});
  return d;
}

TEST(StudyPlots, HistoryDrawsOneDotPerValuedTrialAndTheBestSoFarRises) {
  const cv::Mat img = Decode(RenderStudyHistory(Study(true)));
  ASSERT_EQ(img.cols, kStudyHistoryWidth);
  ASSERT_EQ(img.rows, kStudyHistoryHeight);
  // Five dots (the legend's blue line is a bar, not a dot-sized blob).
  EXPECT_EQ(Blobs(Near(img, kDot, 40), 20, 90).size(), 5u);
  // The best-so-far line (red) ends higher on the image than it starts:
  // 0.10 at trial 0, 0.50 from trial 3 on.
  const cv::Mat red = Near(img, kRed, 40);
  const double left = MeanRow(red, 80, 200), right = MeanRow(red, 560, 700);
  ASSERT_GT(left, 0);
  ASSERT_GT(right, 0);
  EXPECT_GT(left - right, 200);  // 0.4 of a ~0.48 range over ~420 plot pixels
}

TEST(StudyPlots, HistoryBestSoFarFallsWhenMinimizing) {
  const cv::Mat img = Decode(RenderStudyHistory(Study(false)));
  const cv::Mat red = Near(img, kRed, 40);
  // Minimizing: best is 0.10 from trial 0 on, a flat line at the bottom.
  const double left = MeanRow(red, 80, 200), right = MeanRow(red, 560, 700);
  ASSERT_GT(left, 0);
  EXPECT_NEAR(left, right, 3);
  EXPECT_GT(left, kStudyHistoryHeight / 2);
}

TEST(StudyPlots, HistoryWithoutValuesSaysSo) {
  StudyPlotData d = Study(true);
  for (auto& t : d.trials) t.value.reset();
  const cv::Mat img = Decode(RenderStudyHistory(d));
  EXPECT_EQ(Blobs(Near(img, kDot, 40), 20, 90).size(), 0u);
  EXPECT_EQ(cv::countNonZero(Near(img, kRed, 40)), 0);
}

// Columns holding a black vertical line over most of the image height.
std::vector<int> AxisColumns(const cv::Mat& img) {
  const cv::Mat black = Near(img, cv::Scalar(0, 0, 0), 10);
  std::vector<int> cols;
  for (int x = 0; x < img.cols; ++x) {
    if (cv::countNonZero(black.col(x)) > img.rows * 0.6 && (cols.empty() || x > cols.back() + 3)) {
      cols.push_back(x);
    }
  }
  return cols;
}

TEST(StudyPlots, ParallelCoordinatesHasAnAxisPerParamAndTheObjective) {
  for (bool maximize : {true, false}) {
    const cv::Mat img = Decode(RenderStudyParallelCoordinates(Study(maximize)));
    ASSERT_EQ(img.cols, kStudyParallelWidth);
    ASSERT_EQ(img.rows, kStudyParallelHeight);
    const std::vector<int> axes = AxisColumns(img);
    ASSERT_EQ(axes.size(), 4u) << "3 params + the objective";
    // Evenly spaced.
    EXPECT_NEAR(axes[1] - axes[0], axes[3] - axes[2], 2);
    // The best trial (red, drawn last) meets the objective axis at its top
    // when maximizing (0.50 is the largest) and at its bottom when
    // minimizing (0.10 the smallest).
    const cv::Mat red = Near(img, kRed, 40);
    const double row = MeanRow(red, axes[3] - 6, axes[3] - 2);
    ASSERT_GT(row, 0);
    if (maximize) {
      EXPECT_LT(row, img.rows * 0.25);
    } else {
      EXPECT_GT(row, img.rows * 0.75);
    }
    // Every valued trial draws a line between the first two axes; the two
    // value-less trials do not: 5 crossings of the mid column.
    const int mid = (axes[0] + axes[1]) / 2;
    cv::Mat colored;
    cv::Mat hsv;
    cv::cvtColor(img.col(mid), hsv, cv::COLOR_BGR2HSV);
    int runs = 0;
    bool in = false;
    for (int y = 0; y < img.rows; ++y) {
      const bool ink = hsv.at<cv::Vec3b>(y, 0)[1] > 25;
      if (ink && !in) ++runs;
      in = ink;
    }
    EXPECT_EQ(runs, 5);
  }
}

TEST(StudyPlots, SlicesHaveOnePanelPerParamAndFollowTheObjective) {
  StudyPlotData d = Study(true);
  d.params.push_back({"box", false, {}});
  for (auto& t : d.trials) t.params.push_back(7.5);
  const cv::Mat img = Decode(RenderStudySlices(d));
  // 4 params, 3 per row: 2 rows.
  ASSERT_EQ(img.cols, 3 * kStudySlicePanelWidth);
  ASSERT_EQ(img.rows, 2 * kStudySlicePanelHeight);
  auto panel = [&](int i) {
    return img(cv::Rect((i % 3) * kStudySlicePanelWidth, (i / 3) * kStudySlicePanelHeight,
                        kStudySlicePanelWidth, kStudySlicePanelHeight));
  };
  auto dots = [](const cv::Mat& p) {
    cv::Mat hsv, mask;
    cv::cvtColor(p, hsv, cv::COLOR_BGR2HSV);
    cv::inRange(hsv, cv::Scalar(0, 40, 0), cv::Scalar(180, 255, 255), mask);
    return mask;
  };
  for (int i = 0; i < 4; ++i) EXPECT_GT(cv::countNonZero(dots(panel(i))), 100) << "panel " << i;
  // The sixth cell is empty: white.
  EXPECT_EQ(cv::countNonZero(dots(panel(5))), 0);
  const cv::Mat mosaic = dots(panel(1));
  // mosaic panel: the objective rises with mosaic except trial 2 (0.5, 0.2)
  // -> the left third's dots sit lower than the right third's.
  const int w = kStudySlicePanelWidth;
  EXPECT_GT(MeanRow(mosaic, 78, 78 + (w - 96) / 3), MeanRow(mosaic, w - 18 - (w - 96) / 3, w - 18) + 60);
}

TEST(StudyPlots, ImportanceBarsAreProportionalAndSorted) {
  StudyPlotData d = Study(true);
  d.importances = {0.3, 0.6, 0.1};
  const cv::Mat img = Decode(RenderStudyImportances(d));
  ASSERT_EQ(img.cols, kStudyImportanceWidth);
  ASSERT_EQ(img.rows, 90 + 36 * 3);
  const cv::Mat bar = Near(img, kDot, 10);
  std::vector<int> lengths;
  for (int row = 0; row < img.rows; ++row) {
    const int n = cv::countNonZero(bar.row(row));
    if (n > 0 && (lengths.empty() || n != lengths.back())) lengths.push_back(n);
  }
  // Three bar lengths, largest first (sorted), in ratio 0.6 : 0.3 : 0.1.
  ASSERT_EQ(lengths.size(), 3u);
  EXPECT_NEAR(double(lengths[1]) / lengths[0], 0.5, 0.01);
  EXPECT_NEAR(double(lengths[2]) / lengths[0], 1.0 / 6, 0.01);
}

TEST(StudyPlots, NoImportancesDrawsNoBars) {
  const cv::Mat img = Decode(RenderStudyImportances(Study(true)));
  EXPECT_EQ(cv::countNonZero(Near(img, kDot, 10)), 0);
}

TEST(StudyPlots, BadInputIsRefusedNamingTheTrialAndParam) {
  StudyPlotData d = Study(true);
  d.trials[2].params.pop_back();
  Status s = RenderStudyHistory(d).GetStatus();
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.Message().find("trial 2"), std::string::npos) << s.ToString();

  d = Study(true);
  d.trials[1].params[0] = 0;  // lr0 is log-scaled
  s = RenderStudySlices(d).GetStatus();
  EXPECT_NE(s.Message().find("'lr0'"), std::string::npos) << s.ToString();

  d = Study(true);
  d.trials[3].params[2] = 2;  // optimizer has two choices
  s = RenderStudyParallelCoordinates(d).GetStatus();
  EXPECT_NE(s.Message().find("'optimizer'"), std::string::npos) << s.ToString();

  d = Study(true);
  d.importances = {1.0};
  s = WriteStudyPlots(Env::Default(), std::string(KESTREL_BINARY_DIR) + "/study_plots_bad", d);
  EXPECT_NE(s.Message().find("importances"), std::string::npos) << s.ToString();
}

TEST(StudyPlots, WriteStudyPlotsWritesTheFourPngs) {
  StudyPlotData d = Study(true);
  d.importances = {0.3, 0.6, 0.1};
  const std::string dir = std::string(KESTREL_BINARY_DIR) + "/study_plots";
  ASSERT_TRUE(WriteStudyPlots(Env::Default(), dir, d).IsOk());
  for (const char* f : {"history.png", "parallel_coordinates.png", "slice.png", "importances.png"}) {
    auto bytes = Env::Default().ReadFile(dir + "/" + f);
    ASSERT_TRUE(bytes.IsOk()) << f;
    std::vector<uchar> buf(bytes->begin(), bytes->end());
    EXPECT_FALSE(cv::imdecode(buf, cv::IMREAD_COLOR).empty()) << f;
  }
}

}  // namespace
}  // namespace kestrel::eval
