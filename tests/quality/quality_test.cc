// Training quality: YOLOv8 trained from scratch on the synthetic shapes
// dataset must reach a mAP50 threshold on its frozen val split. Every knob
// has an environment override so the same test serves as the documented
// benchmark (docs/training.md, "Quality"). The defaults are the issue's
// YOLOv8n at imgsz 320 (about 13 minutes on 2 CPU cores); YOLO11n and
// YOLOv5nu (issue 29) run the same recipe in their own tests (the MODEL knob
// is the first test's only):
//   KESTREL_QUALITY_MODEL (n)      KESTREL_QUALITY_IMGSZ (320)
//   KESTREL_QUALITY_IMAGES (400)   KESTREL_QUALITY_EPOCHS (30)
//   KESTREL_QUALITY_BATCH (16)     KESTREL_QUALITY_MIN_MAP50 (0.9)
//   KESTREL_QUALITY_THREADS (0 = all cores)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "quality_support.h"
#include "train/trainer.h"

namespace kestrel::train {
namespace {

namespace fs = std::filesystem;
using quality::EnvOr;

// The shapes recipe for `model` (the knobs above but KESTREL_QUALITY_MODEL);
// prints the mAP50 curve and asserts the best mAP50.
void TrainShapesAndCheck(const std::string& model) {
  const int imgsz = std::stoi(EnvOr("KESTREL_QUALITY_IMGSZ", "320"));
  const int images = std::stoi(EnvOr("KESTREL_QUALITY_IMAGES", "400"));
  const int epochs = std::stoi(EnvOr("KESTREL_QUALITY_EPOCHS", "30"));
  const int batch = std::stoi(EnvOr("KESTREL_QUALITY_BATCH", "16"));
  const int threads = std::stoi(EnvOr("KESTREL_QUALITY_THREADS", "0"));
  const double min_map50 = std::stod(EnvOr("KESTREL_QUALITY_MIN_MAP50", "0.9"));

  const std::string root =
      fs::temp_directory_path() / ("kestrel_quality_" + model + "_" + std::to_string(getpid()));
  fs::remove_all(root);
  data::SynthOptions so;
  so.images = images;
  so.classes = 3;
  so.imgsz = imgsz;
  so.seed = 5;
  ASSERT_NO_FATAL_FAILURE(quality::SynthAndImport(so, root, "shapes", imgsz));
  const std::string home = root + "/home";

  TrainOptions o;
  o.data = "shapes";
  o.model = model;
  o.epochs = epochs;
  o.threads = threads;
  o.home = home;
  o.run_dir = root + "/run";
  o.loader.imgsz = imgsz;
  o.loader.batch = batch;
  o.optimizer.nbs = batch;  // one optimizer step per batch: the most updates per CPU minute
  o.optimizer.warmup_epochs = 1;
  o.plots = false;
  TrainHooks hooks;
  hooks.out = &std::cout;
  auto r = Train(o, hooks);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->ExitCode(), 0) << r->message;
  std::printf("[ quality ] model %s imgsz %d images %d epochs %d: mAP50 curve", model.c_str(), imgsz, images,
              epochs);
  for (const auto& e : r->history) std::printf(" %.3f", e.map50);
  std::printf("\n[ quality ] mAP50-95 curve");
  for (const auto& e : r->history) std::printf(" %.3f", e.map5095);
  std::printf("\n[ quality ] best epoch %d: mAP50 %.4f mAP50-95 %.4f (threshold %.2f), %.1f images/s\n",
              r->best_epoch, r->best_map50, r->best_map5095, min_map50, r->images_per_second);
  EXPECT_GE(r->best_map50, min_map50);
  fs::remove_all(root);
}

TEST(TrainingQuality, ShapesFromScratchReachesMap50Threshold) {
  TrainShapesAndCheck(EnvOr("KESTREL_QUALITY_MODEL", "n"));
}

// Issue 29: the two other families on the same recipe and threshold
// (docs/training.md, "Quality": their recorded curves).
TEST(TrainingQuality, Yolo11nShapesFromScratchReachesMap50Threshold) { TrainShapesAndCheck("yolo11n"); }

TEST(TrainingQuality, Yolov5nuShapesFromScratchReachesMap50Threshold) { TrainShapesAndCheck("yolov5nu"); }

}  // namespace
}  // namespace kestrel::train
