// The YOLOv8 detection loss: task-aligned assignment, CIoU box loss,
// distribution focal loss (DFL) and BCE classification, with the public
// YOLOv8 defaults. Reproduces the reference implementation's loss items and
// gradients (tests/train/loss_test.cc). See docs/training.md.
//
// Inputs are the raw head outputs, one per level (P3, P4, P5):
//   [B, 4*reg_max + nc, H_i, W_i]; channels 0..4*reg_max-1 are the box
//   distributions (sides left, top, right, bottom; reg_max bins each), then nc
//   class logits. Computation runs in float32 on the heads' device.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <vector>

#include "core/options.h"
#include "core/status.h"
#include "train/assigner.h"
#include "train/loss_options.h"

namespace kestrel::train {

// Ground truth of one batch, in the reference's flat layout.
struct DetectionTargets {
  torch::Tensor batch_idx;  // [N] image index in the batch (integral values, any dtype)
  torch::Tensor cls;        // [N, 1] or [N] class id (integral values, any dtype)
  torch::Tensor bboxes;     // [N, 4] cx, cy, w, h normalized to the input image
};

struct ImageSize {
  int64_t height = 0;  // input (letterboxed) image size in pixels
  int64_t width = 0;
};

struct LossOutput {
  torch::Tensor total;  // [] float32 = (box + cls + dfl) * B; backpropagate this
  torch::Tensor items;  // [3] float32 detached: box, cls, dfl after gains, each
                        // divided by max(sum of target scores, 1)
};

// Thread-compatible (const methods only).
class DetectionLoss {
 public:
  static Result<DetectionLoss> Create(LossOptions options);

  // Errors (InvalidArgument): wrong number of heads, shape/channel mismatch,
  // batch_idx outside [0, B), class outside [0, nc), non-finite boxes.
  Result<LossOutput> Compute(const std::vector<torch::Tensor>& heads, const DetectionTargets& targets,
                             ImageSize image) const;

  const LossOptions& Options() const { return options_; }

 private:
  explicit DetectionLoss(LossOptions options) : options_(std::move(options)) {}
  LossOptions options_;
};

// Decodes box distributions [B, A, 4*reg_max] (logits) into xyxy boxes
// [B, A, 4] in grid units: softmax expectation over bins 0..reg_max-1 gives
// distances (left, top, right, bottom) from `anchor_points` [A, 2].
torch::Tensor DecodeBoxes(const torch::Tensor& distribution, const torch::Tensor& anchor_points, int reg_max);

// Distribution focal loss per row: logits [K, reg_max], target [K] in bins,
// clamped to [0, reg_max-1-0.01]; returns [K] =
// CE(logits, floor(t))*(floor(t)+1-t) + CE(logits, floor(t)+1)*(t-floor(t)).
torch::Tensor DistributionFocalLoss(const torch::Tensor& logits, const torch::Tensor& target);

}  // namespace kestrel::train
