// Per-epoch validation: the val split through a letterbox-only loader, the
// model in eval mode, eval's decode + NMS (conf 0.001, IoU 0.7, max_det 300,
// multi-label, as the reference validator), boxes mapped back from the
// letterbox to original pixels, and the reference mAP (eval/metrics.h).
// Not thread-safe; one per run.
#pragma once
#include <torch/types.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/loader.h"
#include "data/manifest.h"
#include "eval/metrics.h"
#include "model/yolo.h"

namespace kestrel::train {

class Validator {
 public:
  // Uses the kVal split of `manifest` (kFailedPrecondition when empty).
  // `loader` gives imgsz/batch/workers; augment and shuffle are forced off.
  static Result<std::unique_ptr<Validator>> Create(const data::Manifest& manifest, data::ImageSource source,
                                                   data::LoaderOptions loader, const std::vector<std::string>& names,
                                                   torch::Device device);
  // Runs `model` (switched to eval mode, restored to train mode after) over
  // the whole val split.
  Result<eval::EvalResult> Run(model::YoloImpl& model);

 private:
  Validator() = default;
  std::unique_ptr<data::Loader> loader_;
  std::map<std::string, const data::ManifestEntry*> by_path_;
  const data::Manifest* manifest_ = nullptr;
  std::vector<std::string> names_;
  torch::Device device_ = torch::kCPU;
};

// The per-class table printed after each epoch: all, then one row per class
// (images, instances, P, R, mAP50, mAP50-95).
std::string FormatValidationTable(const eval::EvalResult& r);

}  // namespace kestrel::train
