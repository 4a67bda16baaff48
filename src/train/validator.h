// Per-epoch validation: the val split through a letterbox-only loader, the
// model in eval mode, eval's decode + NMS (conf 0.001, IoU 0.7, max_det 300,
// multi-label, as the reference validator), boxes mapped back from the
// letterbox to original pixels, and the reference mAP (eval/metrics.h).
// Not thread-safe; one per run.
#pragma once
#include <torch/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/loader.h"
#include "data/manifest.h"
#include "eval/metrics.h"
#include "model/yolo.h"
#include "train/loss.h"

namespace kestrel::train {

class Validator {
 public:
  // Uses the kVal split of `manifest` (kFailedPrecondition when empty).
  // `loader` gives imgsz/batch/workers; augment and shuffle are forced off.
  static Result<std::unique_ptr<Validator>> Create(const data::Manifest& manifest, data::ImageSource source,
                                                   data::LoaderOptions loader, const std::vector<std::string>& names,
                                                   torch::Device device);
  // Runs `model` (switched to eval mode, restored to train mode after) over
  // the whole val split. With `loss`, also the mean loss items (box, cls,
  // dfl) over the val batches, in LastLoss(). `on_progress(done, total)`,
  // when set, is called with done = 0 before the first batch and after every
  // batch with the val images done so far (nondecreasing, == total =
  // NumImages() after the last batch; not called past a failure).
  Result<eval::EvalResult> Run(model::YoloImpl& model, DetectionLoss* loss = nullptr,
                               const std::function<void(int64_t done, int64_t total)>& on_progress = {});
  int64_t NumImages() const;  // images in the val split
  const std::array<double, 3>& LastLoss() const { return last_loss_; }

 private:
  Validator() = default;
  std::unique_ptr<data::Loader> loader_;
  std::map<std::string, const data::ManifestEntry*> by_path_;
  const data::Manifest* manifest_ = nullptr;
  std::vector<std::string> names_;
  torch::Device device_ = torch::kCPU;
  std::array<double, 3> last_loss_{};
};

// The per-class table printed after each epoch: all, then one row per class
// (images, instances, P, R, mAP50, mAP50-95).
std::string FormatValidationTable(const eval::EvalResult& r);

}  // namespace kestrel::train
