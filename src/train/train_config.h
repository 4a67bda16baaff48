// TrainConfig: the keys of `kestrel train` without LibTorch. Same names,
// defaults, ranges and checks as TrainOptions::Bind/Validate (trainer.h),
// so `kestrel submit` resolves and validates a job's effective config in a
// build without the trainer (the worker host may be the only one with
// LibTorch). trainer.h cannot be included torch-free (LossOptions lives in
// the torch loss header), hence this mirror; the torch build's test
// `JobsCliTest.TrainConfigMatchesTrainOptions` keeps keys and defaults equal.
#pragma once

#include <cstdint>
#include <string>

#include "core/options.h"
#include "core/status.h"
#include "data/loader.h"
#include "train/schedule.h"

namespace kestrel::train {

struct TrainConfig {
  std::string data;              // registry spec NAME[@vN|@idprefix]
  std::string model = "n";       // n|s|m|l|x|t|yolov8n.yaml ...
  int epochs = 100;              // total epochs, >= 1
  std::string device = "cpu";    // cpu | 0 (CUDA device index)
  int64_t seed = 0;
  bool deterministic = true;
  int patience = 100;
  double save_period_min = 0;
  std::string pretrained;
  std::string resume;
  int threads = 0;
  int freeze = 0;
  std::string project = "runs/train";
  std::string name = "exp";
  bool exist_ok = false;
  std::string run_dir;
  bool val = true;
  bool plots = true;
  data::LoaderOptions loader;
  data::AugmentOptions augment;
  OptimizerOptions optimizer;
  // LossOptions' user keys (box, cls, dfl, label_smoothing).
  double box = 7.5, cls = 0.5, dfl = 1.5, label_smoothing = 0.0;

  void Bind(OptionSet& s);
  // The checks of TrainOptions::Validate that need no dataset or model.
  Status Validate() const;
};

}  // namespace kestrel::train
