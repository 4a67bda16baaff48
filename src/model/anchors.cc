#include "model/anchors.h"

#include <ATen/ATen.h>

namespace kestrel::model {

AnchorGrid MakeAnchors(const std::vector<std::pair<int64_t, int64_t>>& feature_hw,
                       const std::vector<double>& strides, const at::Tensor& like, double offset) {
  std::vector<at::Tensor> points, stride_list;
  const auto opts = like.options();
  for (size_t i = 0; i < feature_hw.size(); ++i) {
    const auto [h, w] = feature_hw[i];
    // Same arithmetic as the reference (arange in the target dtype, then +offset).
    at::Tensor sx = at::arange(w, opts) + offset;
    at::Tensor sy = at::arange(h, opts) + offset;
    at::Tensor gx = sx.view({1, w}).expand({h, w});
    at::Tensor gy = sy.view({h, 1}).expand({h, w});
    points.push_back(at::stack({gx, gy}, -1).reshape({h * w, 2}));
    stride_list.push_back(at::full({h * w, 1}, strides[i], opts));
  }
  return {at::cat(points, 0), at::cat(stride_list, 0)};
}

AnchorGrid MakeAnchors(const std::vector<at::Tensor>& maps, const std::vector<double>& strides,
                       double offset) {
  std::vector<std::pair<int64_t, int64_t>> hw;
  for (const auto& m : maps) hw.emplace_back(m.size(2), m.size(3));
  return MakeAnchors(hw, strides, maps.at(0), offset);
}

at::Tensor Dist2Bbox(const at::Tensor& distance, const at::Tensor& points, bool xywh, int64_t dim) {
  auto lt_rb = distance.chunk(2, dim);
  at::Tensor x1y1 = points - lt_rb[0];
  at::Tensor x2y2 = points + lt_rb[1];
  if (xywh) return at::cat({(x1y1 + x2y2) / 2, x2y2 - x1y1}, dim);
  return at::cat({x1y1, x2y2}, dim);
}

at::Tensor Bbox2Dist(const at::Tensor& points, const at::Tensor& xyxy, double max_dist) {
  auto xy = xyxy.chunk(2, -1);
  return at::cat({points - xy[0], xy[1] - points}, -1).clamp(0, max_dist - 0.01);
}

}  // namespace kestrel::model
