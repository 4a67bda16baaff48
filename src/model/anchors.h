// Anchor grid and box <-> distance helpers shared by the Detect head and the
// loss. Anchor points are cell centers in grid units of their level
// (x + offset, y + offset); multiply by the stride for input pixels.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace kestrel::model {

struct AnchorGrid {
  at::Tensor points;   // [A, 2] (x, y) in grid units, levels concatenated, each row-major
  at::Tensor strides;  // [A, 1] stride of each anchor's level
};

// feature_hw: (H_i, W_i) per level, strides: same length. A = sum H_i * W_i.
// `like` gives dtype and device of the result.
AnchorGrid MakeAnchors(const std::vector<std::pair<int64_t, int64_t>>& feature_hw,
                       const std::vector<double>& strides, const at::Tensor& like, double offset = 0.5);
// Same, from the raw head maps [B, C, H_i, W_i].
AnchorGrid MakeAnchors(const std::vector<at::Tensor>& maps, const std::vector<double>& strides,
                       double offset = 0.5);

// distance (left, top, right, bottom) from anchor points -> boxes, both in the
// same units. Along `dim` distance has 4 entries and points 2 (broadcast).
// xywh=true: (cx, cy, w, h); false: (x1, y1, x2, y2).
at::Tensor Dist2Bbox(const at::Tensor& distance, const at::Tensor& points, bool xywh, int64_t dim = -1);
// Inverse for xyxy boxes [..., 4] and points [..., 2]: (l, t, r, b) clamped to
// [0, max_dist - 0.01]. The YOLOv8 DFL targets use max_dist = kRegMax - 1 = 15.
at::Tensor Bbox2Dist(const at::Tensor& points, const at::Tensor& xyxy, double max_dist);

}  // namespace kestrel::model
