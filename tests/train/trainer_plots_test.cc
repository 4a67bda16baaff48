// The plots of a training run folder: results.png after every epoch (a
// complete, current picture while the run goes on) and labels.png at the end.
// One tiny run (model "t", imgsz 64, 8 train images, 3 epochs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "eval/results_plot.h"
#include "store/metadata_store.h"
#include "tiny_train.h"
#include "train/results_png.h"
#include "train/trainer.h"

namespace kestrel::train {
namespace {

namespace fs = std::filesystem;

// Pixels with colour (max - min channel > 20): data drawn in series/class
// colours, as opposed to black text, gray grid lines and white.
int Colored(const cv::Mat& img, cv::Rect roi) {
  int n = 0;
  const cv::Mat m = img(roi);
  for (int y = 0; y < m.rows; ++y) {
    for (int x = 0; x < m.cols; ++x) {
      const cv::Vec3b p = m.at<cv::Vec3b>(y, x);
      n += std::max({p[0], p[1], p[2]}) - std::min({p[0], p[1], p[2]}) > 20;
    }
  }
  return n;
}

// The plot area of panel p of results.png (inside its frame).
cv::Rect ResultsPlotArea(int p) {
  return cv::Rect((p % 5) * eval::kResultsPanelWidth + 80,
                  eval::kResultsHeaderHeight + (p / 5) * eval::kResultsPanelHeight + 42,
                  eval::kResultsPanelWidth - 100, eval::kResultsPanelHeight - 102);
}

TEST(TrainerPlots, ResultsPngAfterEveryEpochAndLabelsPngAtTheEnd) {
  const std::string root = fs::temp_directory_path() / ("kestrel_trainer_plots_" + std::to_string(getpid()));
  fs::remove_all(root);
  const std::string home = root + "/home";
  testing::ImportTinyDataset(home, root + "/synth", "tiny");
  if (HasFatalFailure()) return;
  TrainOptions o;
  o.data = "tiny";
  o.model = "t";
  o.epochs = 3;
  o.threads = 1;
  o.home = home;
  o.run_dir = root + "/runs/plots";
  o.loader.imgsz = 64;
  o.loader.batch = 4;
  o.loader.workers = 1;
  o.optimizer.warmup_epochs = 0;
  o.plots = true;

  std::vector<int> seen;
  TrainHooks hooks;
  hooks.on_epoch = [&](const EpochRecord& rec) {
    // Already rewritten for this epoch when the hook runs.
    const cv::Mat img = cv::imread(o.run_dir + "/results.png", cv::IMREAD_COLOR);
    ASSERT_FALSE(img.empty()) << "epoch " << rec.epoch;
    EXPECT_EQ(img.cols, 5 * eval::kResultsPanelWidth);
    EXPECT_EQ(img.rows, eval::kResultsHeaderHeight + 2 * eval::kResultsPanelHeight);
    for (int p = 0; p < 10; ++p) {
      EXPECT_GT(Colored(img, ResultsPlotArea(p)), 10) << "epoch " << rec.epoch << ", panel " << p;
    }
    seen.push_back(rec.epoch);
  };
  auto r = Train(o, hooks);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));

  const cv::Mat labels = cv::imread(o.run_dir + "/labels.png", cv::IMREAD_COLOR);
  ASSERT_FALSE(labels.empty());
  EXPECT_EQ(labels.cols, 1400);
  EXPECT_EQ(labels.rows, 1440);
  for (int p = 0; p < 4; ++p) {
    const cv::Rect panel((p % 2) * 700 + 80, 40 + (p / 2) * 700 + 50, 580, 500);
    EXPECT_GT(Colored(labels, panel), 200) << "labels.png panel " << p;
  }
  // Atomic writes leave no temp files behind.
  for (const auto& e : fs::directory_iterator(o.run_dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  fs::remove_all(root);
}

TEST(TrainerPlots, WithoutValSplitTheValPanelsSaySo) {
  std::vector<EpochRecord> h(2);
  h[0].epoch = 1;
  h[1].epoch = 2;
  h[0].box = 2;
  h[1].box = 1.5;
  const eval::ResultsTable t = ResultsTableFromHistory(h, false);
  ASSERT_EQ(t.series.size(), 10u);
  EXPECT_EQ(t.epochs, (std::vector<int>{1, 2}));
  EXPECT_EQ(t.series[0].title, "train/box_loss");
  EXPECT_EQ(t.series[0].values, (std::vector<double>{2, 1.5}));
  for (size_t i : {3u, 4u, 5u, 6u, 7u, 8u, 9u}) EXPECT_FALSE(t.series[i].missing.empty()) << i;
  const eval::ResultsTable v = ResultsTableFromHistory(h, true);
  for (const auto& s : v.series) EXPECT_TRUE(s.missing.empty()) << s.title;
  EXPECT_EQ(v.series[9].title, "metrics/mAP50-95");
}

}  // namespace
}  // namespace kestrel::train
