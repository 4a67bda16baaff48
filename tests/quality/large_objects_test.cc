// The large-object regression gate of issue 11: photos with mostly one large
// object per image and widely varying, non-square resolutions showed a train
// DFL loss well above the reference trainer's. This test generates such a set
// (`kestrel dataset synth` with min_side/max_side and large objects), trains
// YOLOv8n from scratch with a fixed seed and asserts that the final train DFL
// loss stays below, and the final mAP50 and mAP50-95 above, thresholds set
// from Kestrel's recorded run and the reference trainer's two seeds on the
// same set (docs/training.md, "Large objects on varied photos"). Labelled `slow` (not in the default
// suite). Knobs (environment, defaults):
//   KESTREL_LARGE_EPOCHS (20)       KESTREL_LARGE_IMGSZ (256)
//   KESTREL_LARGE_THREADS (0 = all cores)
//   KESTREL_LARGE_MAX_DFL (see kMaxFinalDfl)
//   KESTREL_LARGE_MIN_MAP50 (see kMinFinalMap50)
//   KESTREL_LARGE_MIN_MAP5095 (see kMinFinalMap5095)
// The thresholds only mean something for the default epochs and imgsz.
// imgsz 256, not the 320: 320 took ~2.8 min an epoch on the shared
// 2-core VM; at 256 the largest objects still span ~29 cells at stride 8 and
// ~14 at stride 16, so the DFL clamp at reg_max - 1 is exercised.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "quality_support.h"
#include "train/trainer.h"

namespace kestrel::train {
namespace {

namespace fs = std::filesystem;

// Set from both curves (docs/training.md, "Large objects": Kestrel's recorded
// run and the reference trainer's two seeds on this exact set and recipe,
// ../shared/reference/large_objects/). Each threshold is the worse reference
// seed's final value moved by the largest difference between the two
// reference seeds at any closed-mosaic epoch (11-20) — the reference's own
// scatter: a Kestrel run fails only when it is further from the reference
// than the reference is from itself.
//   final train DFL: reference 1.9969 / 2.0208, scatter 0.238 -> < 2.25
//   final mAP50:     reference 0.8823 / 0.8344, scatter 0.083 -> > 0.75
//   final mAP50-95:  reference 0.5782 / 0.5688, scatter 0.062 -> > 0.50
// Kestrel's recorded run: 2.1170, 0.8403, 0.5336 (margins 0.13, 0.09, 0.034).
constexpr double kMaxFinalDfl = 2.25;
constexpr double kMinFinalMap50 = 0.75;
constexpr double kMinFinalMap5095 = 0.50;

using quality::EnvOr;

// The dataset of the gate: 160 train / 40 val images, one class, every image
// W x H with W, H in [180, 1400] drawn independently, 1-2 objects each of
// 30-90% of the image's width and height (a second one is dropped when it
// would hide more than 30% of the first).
data::SynthOptions LargeObjectSet() {
  data::SynthOptions so;
  so.images = 200;
  so.val_fraction = 0.2;
  so.classes = 1;
  so.background_fraction = 0;
  so.min_objects = 1;
  so.max_objects = 2;
  so.min_object = 0.3;
  so.max_object = 0.9;
  so.min_side = 180;
  so.max_side = 1400;
  so.seed = 11;
  return so;
}

TEST(LargeObjectQuality, FinalDflAndMap50BeatTheRecordedRun) {
  const int epochs = std::stoi(EnvOr("KESTREL_LARGE_EPOCHS", "20"));
  const int imgsz = std::stoi(EnvOr("KESTREL_LARGE_IMGSZ", "256"));
  const int threads = std::stoi(EnvOr("KESTREL_LARGE_THREADS", "0"));
  const double max_dfl = std::stod(EnvOr("KESTREL_LARGE_MAX_DFL", std::to_string(kMaxFinalDfl)));
  const double min_map50 = std::stod(EnvOr("KESTREL_LARGE_MIN_MAP50", std::to_string(kMinFinalMap50)));
  const double min_map5095 = std::stod(EnvOr("KESTREL_LARGE_MIN_MAP5095", std::to_string(kMinFinalMap5095)));

  const std::string root = fs::temp_directory_path() / ("kestrel_large_" + std::to_string(getpid()));
  fs::remove_all(root);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_NO_FATAL_FAILURE(quality::SynthAndImport(LargeObjectSet(), root, "large", imgsz));
  const auto t1 = std::chrono::steady_clock::now();
  const std::string home = root + "/home";

  TrainOptions o;
  o.data = "large";
  o.model = "n";
  o.epochs = epochs;
  o.threads = threads;
  o.seed = 0;
  o.home = home;
  o.run_dir = root + "/run";
  o.loader.imgsz = imgsz;
  o.loader.batch = 16;
  o.optimizer.nbs = 16;  // one optimizer step per batch, as TrainingQuality
  o.optimizer.warmup_epochs = 1;
  o.plots = false;
  TrainHooks hooks;
  hooks.out = &std::cout;
  auto r = Train(o, hooks);
  const auto t2 = std::chrono::steady_clock::now();
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->ExitCode(), 0) << r->message;
  ASSERT_EQ(static_cast<int>(r->history.size()), epochs);

  std::printf("[ large ] epoch   box     cls     dfl     mAP50   mAP50-95  seconds\n");
  for (const auto& e : r->history) {
    std::printf("[ large ] %5d  %.4f  %.4f  %.4f  %.4f  %.4f  %6.1f\n", e.epoch, e.box, e.cls, e.dfl, e.map50,
                e.map5095, e.seconds);
  }
  const EpochRecord& last = r->history.back();
  std::printf(
      "[ large ] synth + import %.1f s, train %.1f s; final dfl %.4f (max %.2f), mAP50 %.4f (min %.2f), "
      "mAP50-95 %.4f (min %.2f)\n",
      std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
      last.dfl, max_dfl, last.map50, min_map50, last.map5095, min_map5095);
  EXPECT_LT(last.dfl, max_dfl);
  EXPECT_GT(last.map50, min_map50);
  EXPECT_GT(last.map5095, min_map5095);
  fs::remove_all(root);
}

}  // namespace
}  // namespace kestrel::train
