// Anchors, CIoU and the task-aligned assigner of the YOLOv8 loss.
//
// Conventions: boxes are xyxy (x1, y1, x2, y2); x is the image width axis.
// Anchors are cell centers (+0.5) ordered P3, P4, P5, each row-major (y then
// x). All functions here are pure tensor functions; they raise c10::Error on
// shape mismatches (programmer bugs). DetectionLoss (loss.h) is the boundary
// that validates user input and returns Status.
#pragma once

#include <torch/types.h>

#include <array>
#include <cstdint>
#include <vector>

#include "train/loss_options.h"  // AssignerOptions

namespace kestrel::train {

struct Anchors {
  torch::Tensor points;   // [A, 2] float32, (x+0.5, y+0.5) in grid cells of its level
  torch::Tensor strides;  // [A, 1] float32, the level's stride in input pixels
};

// `level_sizes` = {H_i, W_i} of each level, `strides` the matching strides.
// A = sum H_i*W_i.
Anchors MakeAnchors(const std::vector<std::array<int64_t, 2>>& level_sizes,
                    const std::vector<double>& strides, const torch::Device& device);

// Complete IoU of box1 [..., 4] and box2 [..., 4] (xyxy, broadcastable),
// returning [...]: IoU - (center distance^2 / enclosing diagonal^2 + v*alpha)
// with v = 4/pi^2 (atan(w2/h2) - atan(w1/h1))^2, alpha = v/(v - IoU + 1 + eps)
// held constant for gradients, and eps added to heights and union as the
// reference does. Identical boxes give ~1; disjoint far boxes approach -1.
torch::Tensor BoxCiou(const torch::Tensor& box1, const torch::Tensor& box2, double eps = 1e-7);

struct Assignment {
  torch::Tensor target_boxes;     // [B, A, 4] xyxy, units of gt_boxes (meaningful where fg)
  torch::Tensor target_scores;    // [B, A, nc] float32: normalized align metric on the
                                  // assigned class, 0 elsewhere and on background anchors
  torch::Tensor foreground;       // [B, A] bool
  torch::Tensor target_gt_index;  // [B, A] int64 index into the M gt rows (0 for background)
};

// Task-aligned assignment (TOOD / YOLOv8), no gradients:
//  1. candidates: anchors whose center lies strictly inside a valid gt box;
//  2. align metric = score(gt class)^alpha * max(CIoU(gt, pred), 0)^beta;
//  3. each gt keeps its top_k anchors by align metric (among candidates);
//  4. an anchor claimed by several gts goes to the gt with the highest CIoU;
//  5. target score = align / (max align of the gt + eps) * max IoU of the gt.
// pred_scores [B, A, nc] sigmoid probabilities; pred_boxes [B, A, 4] xyxy pixels;
// anchor_points [A, 2] pixels; gt_labels [B, M] int64; gt_boxes [B, M, 4] xyxy
// pixels; gt_valid [B, M] bool (false = padding row). M may be 0.
Assignment AssignTaskAligned(const torch::Tensor& pred_scores, const torch::Tensor& pred_boxes,
                             const torch::Tensor& anchor_points, const torch::Tensor& gt_labels,
                             const torch::Tensor& gt_boxes, const torch::Tensor& gt_valid,
                             const AssignerOptions& options = {});

}  // namespace kestrel::train
