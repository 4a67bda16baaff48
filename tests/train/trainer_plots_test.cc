// The plots of a training run folder: results.png after every epoch (a
// complete, current picture while the run goes on); train_batch0..2.jpg; at
// the end the reference's labels.jpg, confusion_matrix(_normalized).png and
// val_batch0_labels/pred.jpg (issue 28 item 5). One tiny run (model "t",
// imgsz 64, 8 train images, 3 val images, 3 epochs).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/env.h"
#include "data/version.h"
#include "eval/metrics.h"
#include "eval/plots.h"
#include "eval/results_plot.h"
#include "model/weights.h"
#include "model/yolo.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"
#include "tiny_train.h"
#include "train/progress.h"
#include "train/results_png.h"
#include "train/trainer.h"
#include "train/validator.h"

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

// Whether a pixel within 2 px of (x, y) is within `tol` of `bgr` (JPEG blur).
bool ColourNear(const cv::Mat& img, int x, int y, cv::Vec3b bgr, int tol = 70) {
  for (int dy = -2; dy <= 2; ++dy) {
    for (int dx = -2; dx <= 2; ++dx) {
      const int px = x + dx, py = y + dy;
      if (px < 0 || py < 0 || px >= img.cols || py >= img.rows) continue;
      const cv::Vec3b p = img.at<cv::Vec3b>(py, px);
      if (std::abs(p[0] - bgr[0]) + std::abs(p[1] - bgr[1]) + std::abs(p[2] - bgr[2]) < tol) return true;
    }
  }
  return false;
}

TEST(TrainerPlots, ResultsPngAfterEveryEpochAndTheReferencesPlotsAtTheEnd) {
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

  // labels.jpg, as the reference trainer names it (kestrel val keeps its labels.png).
  EXPECT_FALSE(fs::exists(o.run_dir + "/labels.png"));
  const cv::Mat labels = cv::imread(o.run_dir + "/labels.jpg", cv::IMREAD_COLOR);
  ASSERT_FALSE(labels.empty());
  EXPECT_EQ(labels.cols, 1400);
  EXPECT_EQ(labels.rows, 1440);
  for (int p = 0; p < 4; ++p) {
    const cv::Rect panel((p % 2) * 700 + 80, 40 + (p / 2) * 700 + 50, 580, 500);
    EXPECT_GT(Colored(labels, panel), 200) << "labels.jpg panel " << p;
  }

  // Both confusion matrices; the counts one is another picture.
  const cv::Mat cm = cv::imread(o.run_dir + "/confusion_matrix.png", cv::IMREAD_COLOR);
  const cv::Mat cmn = cv::imread(o.run_dir + "/confusion_matrix_normalized.png", cv::IMREAD_COLOR);
  ASSERT_FALSE(cm.empty());
  ASSERT_FALSE(cmn.empty());
  EXPECT_TRUE(cm.size() != cmn.size() || cv::norm(cm, cmn, cv::NORM_L1) > 0);

  // The first three training batches (2 per epoch here, 6 in all).
  for (int b = 0; b < 3; ++b) {
    const cv::Mat tb = cv::imread(o.run_dir + "/train_batch" + std::to_string(b) + ".jpg", cv::IMREAD_COLOR);
    ASSERT_FALSE(tb.empty()) << b;
    EXPECT_EQ(tb.cols, 2 * 64) << b;  // 4 images of 64 px, 2 x 2
    EXPECT_EQ(tb.rows, 2 * 64) << b;
  }
  EXPECT_FALSE(fs::exists(o.run_dir + "/train_batch3.jpg"));

  // val_batch0: the one val batch (3 images; batch 2 x 4 = 8), tiles of 320
  // px in manifest order (square images keep it); each label's box edge in
  // its class colour at its place in its tile. No val_batch1.
  const cv::Mat vl = cv::imread(o.run_dir + "/val_batch0_labels.jpg", cv::IMREAD_COLOR);
  const cv::Mat vp = cv::imread(o.run_dir + "/val_batch0_pred.jpg", cv::IMREAD_COLOR);
  ASSERT_FALSE(vl.empty());
  ASSERT_FALSE(vp.empty());
  EXPECT_EQ(vl.cols, 3 * 320);
  EXPECT_EQ(vl.rows, 320);
  EXPECT_EQ(vp.size(), vl.size());
  EXPECT_FALSE(fs::exists(o.run_dir + "/val_batch1_labels.jpg"));
  auto meta = store::MetadataStore::Open(store::MetadataUrl(home));
  ASSERT_TRUE(meta.IsOk());
  store::LocalArtifactStore blobs(home);
  auto version = data::LoadVersion(**meta, blobs, "tiny");
  ASSERT_TRUE(version.IsOk()) << version.GetStatus().ToString();
  // eval::internal::SeriesColor's first two (BGR).
  const cv::Vec3b kClassColour[2] = {{0x38, 0x38, 0xFF}, {0x97, 0x9D, 0xFF}};
  int tile = 0, checked = 0;
  for (const data::ManifestEntry& e : version->manifest.entries) {
    if (e.split != data::Split::kVal) continue;
    const double scale = 320.0 / std::max(e.width, e.height);
    for (const data::Box& b : e.boxes) {
      const int x1 = tile * 320 + int(std::lround((b.cx - b.w / 2) * e.width * scale));
      const int ymid = int(std::lround(b.cy * e.height * scale));
      EXPECT_TRUE(ColourNear(vl, x1, ymid, kClassColour[b.cls]))
          << "tile " << tile << " class " << b.cls << " left edge at " << x1 << "," << ymid;
      ++checked;
    }
    ++tile;
  }
  EXPECT_EQ(tile, 3);
  EXPECT_GT(checked, 0);
  // Atomic writes leave no temp files behind.
  for (const auto& e : fs::directory_iterator(o.run_dir)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  fs::remove_all(root);
}

// Reads a whole file ("" when missing).
std::string Bytes(const std::string& path) {
  auto b = Env::Default().ReadFile(path);
  return b.IsOk() ? *b : std::string();
}

// The reference validates best.pt once more at the end and draws its plots
// and val_batch grids from that validation (issue 28): a run that stops
// early (patience=1) has a best epoch before its last, and its
// val_batch0_pred.jpg and F1_curve.png are byte for byte what a validation
// of weights/best.safetensors draws — and not what last.safetensors' does.
// Fine-tuned from the reference's shapes model (val_parity), so both
// epochs detect something and their pictures differ (a few epochs of model
// "t" detect nothing, and every picture would be the same); it stops after
// epoch 3 with epoch 2 best. ~3 s; skipped without ../shared.
TEST(TrainerPlots, FinalPlotsAndValBatchGridsComeFromTheBestWeights) {
  const std::string shapes =
      std::string(KESTREL_SHARED_DIR) + "/reference/val_parity/yolov8n_shapes_p.safetensors";
  if (!fs::exists(shapes)) GTEST_SKIP() << "no ../shared reference weights";
  const std::string root = fs::temp_directory_path() / ("kestrel_trainer_best_" + std::to_string(getpid()));
  fs::remove_all(root);
  const std::string home = root + "/home";
  testing::ImportTinyDataset(home, root + "/synth", "tiny", 3);
  if (HasFatalFailure()) return;
  TrainOptions o = testing::TinyRunOptions(home, "tiny", 6);
  o.model = "yolov8n";
  o.pretrained = shapes;
  o.optimizer.lr0 = 0.002;
  o.run_dir = root + "/runs/best";
  o.patience = 1;
  o.plots = true;
  std::ostringstream out;
  TrainHooks hooks;
  hooks.out = &out;
  auto r = Train(o, hooks);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  ASSERT_EQ(r->reason, ExitReason::kEarlyStopped) << r->message;
  ASSERT_LT(r->best_epoch, r->history.back().epoch);
  EXPECT_EQ(r->final_val_epoch, r->best_epoch);
  EXPECT_NE(out.str().find("final validation of " + o.run_dir + "/weights/best.safetensors (best epoch " +
                           std::to_string(r->best_epoch) + "), per class:"),
            std::string::npos)
      << out.str();

  auto meta = store::MetadataStore::Open(store::MetadataUrl(home));
  ASSERT_TRUE(meta.IsOk());
  store::LocalArtifactStore blobs(home);
  auto version = data::LoadVersion(**meta, blobs, "tiny");
  ASSERT_TRUE(version.IsOk()) << version.GetStatus().ToString();
  // What the trainer's validator does (ValidatorOptions as Setup makes them).
  nlohmann::json best_eval;
  auto draw = [&](const std::string& weights, const std::string& dir) {
    auto m = model::CreateModel("yolov8n", static_cast<int>(version->manifest.names.size()));
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    ASSERT_TRUE(model::LoadWeights(**m, weights, model::LoadMode::kStrict).IsOk());
    ValidatorOptions vo;
    vo.grid_batches = 3;
    auto v = Validator::Create(version->manifest, data::ArtifactImageSource(blobs), o.loader,
                               version->manifest.names, torch::kCPU, vo);
    ASSERT_TRUE(v.IsOk()) << v.GetStatus().ToString();
    auto ev = (*v)->Run(**m);
    ASSERT_TRUE(ev.IsOk()) << ev.GetStatus().ToString();
    if (best_eval.is_null()) best_eval = eval::EvalResultToJson(*ev);
    fs::create_directories(dir);
    ASSERT_TRUE(eval::WritePlots(Env::Default(), dir, *ev).IsOk());
    ASSERT_TRUE(WriteValBatchGrids(Env::Default(), dir, (*v)->LastGrids(), data::ArtifactImageSource(blobs),
                                   version->manifest.names)
                    .IsOk());
  };
  draw(o.run_dir + "/weights/best.safetensors", root + "/best");
  draw(o.run_dir + "/weights/last.safetensors", root + "/last");
  if (HasFatalFailure()) return;
  for (const char* f : {"val_batch0_pred.jpg", "F1_curve.png"}) {
    const std::string run = Bytes(o.run_dir + "/" + f), best = Bytes(root + "/best/" + f),
                      last = Bytes(root + "/last/" + f);
    ASSERT_FALSE(run.empty()) << f;
    EXPECT_TRUE(run == best) << f << " is not the best weights' validation";
    EXPECT_FALSE(run == last) << f << " is the last weights' (the test cannot tell them apart)";
  }
  // best_eval.json (what the registry's per-class table reads) is that validation.
  const nlohmann::json written = nlohmann::json::parse(Bytes(o.run_dir + "/best_eval.json"));
  ASSERT_TRUE(written["classes"].is_array());
  EXPECT_EQ(written["classes"].size(), version->manifest.names.size());
  EXPECT_DOUBLE_EQ(written["map5095"].get<double>(), best_eval["map5095"].get<double>());
  EXPECT_EQ(written["classes"], best_eval["classes"]);
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
