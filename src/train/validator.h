// Per-epoch validation: the val split in the reference validator's batches
// (eval/val_shapes.h: by default images grouped by aspect ratio, each batch
// letterboxed to its own shape with half a stride of border; rect=false:
// imgsz x imgsz), the model in eval mode, eval's decode + NMS (conf 0.001,
// IoU 0.7, max_det 300, multi-label, as the reference validator), boxes
// mapped back to original pixels, and the reference mAP (eval/metrics.h).
// Images are decoded on the calling thread, one batch at a time.
// Not thread-safe; one per run.
#pragma once
#include <torch/types.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/loader.h"
#include "data/manifest.h"
#include "eval/metrics.h"
#include "eval/val_shapes.h"
#include "model/yolo.h"
#include "train/loss.h"
#include "train/samples.h"

namespace kestrel::train {

struct ValidatorOptions {
  bool rect = true;  // eval::ValShapeOptions::rect: batches by aspect ratio (false: imgsz x imgsz)
  double pad = 0.5;  // eval::ValShapeOptions::pad, in strides, >= 0
  // Images per val batch; 0 = twice the training batch (what the reference
  // trainer validates with). With rect, the batch size changes the shapes
  // and so the numbers on non-square data.
  int batch = 0;
  // The first N val images (manifest order) whose detections (conf >=
  // kSampleConf) Run() keeps in LastSamples(); 0 = none. Costs nothing
  // extra: they are scored anyway.
  int samples = 0;
  // The first N val batches (N <= 3) whose first kGridImages images Run()
  // keeps with their detections (conf >= kSampleConf) in LastGrids(): the
  // run's val_batch{0,1,2}_labels/pred.jpg, as the reference validator
  // plots its first three batches. 0 = none.
  int grid_batches = 0;
};

// Images per val_batch grid (the reference's plot_images shows up to 16).
inline constexpr size_t kGridImages = 16;

class Validator {
 public:
  // Uses the kVal split of `manifest` (kFailedPrecondition when empty;
  // kInvalidArgument for bad options). From `loader`: imgsz, batch (see
  // ValidatorOptions::batch) and max_bad_fraction (share of val images that
  // may be unreadable; they are left out of the metrics and counted in
  // BadImages()). `manifest` must outlive the Validator.
  static Result<std::unique_ptr<Validator>> Create(const data::Manifest& manifest, data::ImageSource source,
                                                   data::LoaderOptions loader,
                                                   const std::vector<std::string>& names,
                                                   torch::Device device,
                                                   const ValidatorOptions& options = {});
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
  int64_t BadImages() const { return bad_images_; }  // unreadable images in the last Run()
  // The last Run()'s sample images (ValidatorOptions::samples), manifest
  // order; an unreadable one is left out. Entries borrow from the manifest.
  const std::vector<SampleImage>& LastSamples() const { return last_samples_; }
  // The last Run()'s grid images (ValidatorOptions::grid_batches): per
  // batch, its first kGridImages readable images in batch order.
  const std::vector<std::vector<SampleImage>>& LastGrids() const { return last_grids_; }
  // The batches Run() goes through (indices into the val entries in manifest order).
  const std::vector<eval::ValBatchShape>& Batches() const { return plan_; }

 private:
  Validator() = default;
  std::vector<const data::ManifestEntry*> entries_;  // the val split, manifest order
  std::vector<eval::ValBatchShape> plan_;
  data::ImageSource source_;
  int imgsz_ = 640;
  double max_bad_fraction_ = 0.01;
  std::vector<std::string> names_;
  torch::Device device_ = torch::kCPU;
  std::array<double, 3> last_loss_{};
  int64_t bad_images_ = 0;
  int samples_ = 0;
  std::vector<SampleImage> last_samples_;
  int grid_batches_ = 0;
  std::vector<std::vector<SampleImage>> last_grids_;
};

// The validation table: the header and the "all" row (images, instances, P,
// R, mAP50, mAP50-95), then with `per_class` one row per class. As the
// reference trainer: after each epoch the "all" row only, the per-class rows
// once at the end of the run.
std::string FormatValidationTable(const eval::EvalResult& r, bool per_class = true);

}  // namespace kestrel::train
