#include "train/assigner.h"

#include <algorithm>
#include <numbers>

namespace kestrel::train {

Anchors MakeAnchors(const std::vector<std::array<int64_t, 2>>& level_sizes,
                    const std::vector<double>& strides, const torch::Device& device) {
  TORCH_CHECK(level_sizes.size() == strides.size(), "MakeAnchors: ", level_sizes.size(), " levels but ",
              strides.size(), " strides");
  const auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  std::vector<torch::Tensor> points;
  std::vector<torch::Tensor> level_strides;
  for (size_t i = 0; i < level_sizes.size(); ++i) {
    const int64_t h = level_sizes[i][0];
    const int64_t w = level_sizes[i][1];
    auto xs = (torch::arange(w, opts) + 0.5).view({1, w}).expand({h, w});
    auto ys = (torch::arange(h, opts) + 0.5).view({h, 1}).expand({h, w});
    points.push_back(torch::stack({xs, ys}, -1).reshape({h * w, 2}));
    level_strides.push_back(torch::full({h * w, 1}, strides[i], opts));
  }
  return {torch::cat(points), torch::cat(level_strides)};
}

torch::Tensor BoxCiou(const torch::Tensor& box1, const torch::Tensor& box2, double eps) {
  const auto b1x1 = box1.select(-1, 0), b1y1 = box1.select(-1, 1);
  const auto b1x2 = box1.select(-1, 2), b1y2 = box1.select(-1, 3);
  const auto b2x1 = box2.select(-1, 0), b2y1 = box2.select(-1, 1);
  const auto b2x2 = box2.select(-1, 2), b2y2 = box2.select(-1, 3);
  const auto w1 = b1x2 - b1x1, h1 = b1y2 - b1y1 + eps;
  const auto w2 = b2x2 - b2x1, h2 = b2y2 - b2y1 + eps;

  const auto inter = (torch::minimum(b1x2, b2x2) - torch::maximum(b1x1, b2x1)).clamp_min(0) *
                     (torch::minimum(b1y2, b2y2) - torch::maximum(b1y1, b2y1)).clamp_min(0);
  const auto uni = w1 * h1 + w2 * h2 - inter + eps;
  const auto iou = inter / uni;

  const auto cw = torch::maximum(b1x2, b2x2) - torch::minimum(b1x1, b2x1);
  const auto ch = torch::maximum(b1y2, b2y2) - torch::minimum(b1y1, b2y1);
  const auto c2 = cw.pow(2) + ch.pow(2) + eps;
  const auto rho2 = ((b2x1 + b2x2 - b1x1 - b1x2).pow(2) + (b2y1 + b2y2 - b1y1 - b1y2).pow(2)) / 4;
  const auto v =
      (4 / (std::numbers::pi * std::numbers::pi)) * (torch::atan(w2 / h2) - torch::atan(w1 / h1)).pow(2);
  // The aspect-ratio trade-off weight is a constant for the gradient (CIoU paper).
  const auto v_const = v.detach();
  const auto alpha = v_const / (v_const - iou.detach() + (1 + eps));
  return iou - (rho2 / c2 + v * alpha);
}

Assignment AssignTaskAligned(const torch::Tensor& pred_scores_in, const torch::Tensor& pred_boxes_in,
                             const torch::Tensor& anchor_points_in, const torch::Tensor& gt_labels,
                             const torch::Tensor& gt_boxes_in, const torch::Tensor& gt_valid,
                             const AssignerOptions& options) {
  const auto pred_scores = pred_scores_in.detach().to(torch::kFloat32);
  const auto pred_boxes = pred_boxes_in.detach().to(torch::kFloat32);
  const auto anchor_points = anchor_points_in.detach().to(torch::kFloat32);
  const auto gt_boxes = gt_boxes_in.detach().to(torch::kFloat32);
  TORCH_CHECK(pred_scores.dim() == 3 && pred_boxes.dim() == 3 && pred_boxes.size(2) == 4,
              "AssignTaskAligned: pred_scores [B,A,nc], pred_boxes [B,A,4] expected");
  TORCH_CHECK(gt_boxes.dim() == 3 && gt_boxes.size(2) == 4 && gt_labels.dim() == 2 && gt_valid.dim() == 2,
              "AssignTaskAligned: gt_labels [B,M], gt_boxes [B,M,4], gt_valid [B,M] expected");
  const int64_t batch = pred_scores.size(0);
  const int64_t num_anchors = pred_scores.size(1);
  const int64_t nc = pred_scores.size(2);
  const int64_t max_boxes = gt_boxes.size(1);
  const auto fopts = pred_scores.options();

  Assignment out;
  if (max_boxes == 0 || num_anchors == 0) {
    out.target_boxes = torch::zeros({batch, num_anchors, 4}, fopts);
    out.target_scores = torch::zeros({batch, num_anchors, nc}, fopts);
    out.foreground = torch::zeros({batch, num_anchors}, fopts.dtype(torch::kBool));
    out.target_gt_index = torch::zeros({batch, num_anchors}, fopts.dtype(torch::kLong));
    return out;
  }

  // 1. Candidates: anchor centers strictly inside a valid gt box. [B, M, A]
  const auto xy = anchor_points.view({1, 1, num_anchors, 2});
  const auto deltas = torch::cat(
      {xy - gt_boxes.slice(-1, 0, 2).unsqueeze(2), gt_boxes.slice(-1, 2, 4).unsqueeze(2) - xy}, -1);
  const auto candidate = deltas.amin(-1).gt(1e-9).logical_and(gt_valid.to(torch::kBool).unsqueeze(-1));

  // 2. Align metric from the predicted probability of the gt's class and the
  // CIoU of the predicted box with the gt box (both zero outside candidates).
  const auto labels = gt_labels.to(torch::kLong).clamp_min(0);
  const auto zeros = torch::zeros({batch, max_boxes, num_anchors}, fopts);
  const auto class_scores =
      pred_scores.transpose(1, 2).gather(1, labels.unsqueeze(-1).expand({batch, max_boxes, num_anchors}));
  const auto bbox_scores = torch::where(candidate, class_scores, zeros);
  const auto ciou = BoxCiou(gt_boxes.unsqueeze(2), pred_boxes.unsqueeze(1)).clamp_min(0);
  const auto overlaps = torch::where(candidate, ciou, zeros);
  auto align = bbox_scores.pow(options.alpha) * overlaps.pow(options.beta);

  // 3. Top-k anchors per gt, restricted to candidates.
  const int64_t k = std::min<int64_t>(options.top_k, num_anchors);
  const auto topk_index = std::get<1>(align.topk(k, -1, /*largest=*/true, /*sorted=*/true));
  auto mask_pos = torch::zeros_like(align).scatter_(-1, topk_index, 1.0) * candidate.to(torch::kFloat32);

  // 4. An anchor claimed by several gts keeps the one it overlaps most (over
  // all gts it lies in, as the reference does).
  const auto multi = mask_pos.sum(1, /*keepdim=*/true).gt(1);  // [B, 1, A]
  const auto best = overlaps.argmax(1, /*keepdim=*/true);      // [B, 1, A]
  const auto is_best = torch::zeros_like(mask_pos).scatter_(1, best, 1.0);
  mask_pos = torch::where(multi, is_best, mask_pos);
  const auto foreground = mask_pos.sum(1).gt(0);  // [B, A]
  const auto gt_index = mask_pos.argmax(1);       // [B, A]

  // 5. Targets; scores normalized per gt so its best anchor scores its best IoU.
  const auto target_labels = labels.gather(1, gt_index);  // [B, A]
  out.target_boxes = gt_boxes.gather(1, gt_index.unsqueeze(-1).expand({batch, num_anchors, 4}));
  const auto one_hot =
      torch::zeros({batch, num_anchors, nc}, fopts).scatter_(-1, target_labels.unsqueeze(-1), 1.0) *
      foreground.unsqueeze(-1).to(torch::kFloat32);
  align = align * mask_pos;
  const auto gt_max_align = align.amax(-1, /*keepdim=*/true);                     // [B, M, 1]
  const auto gt_max_iou = (overlaps * mask_pos).amax(-1, /*keepdim=*/true);       // [B, M, 1]
  const auto norm = (align * gt_max_iou / (gt_max_align + options.eps)).amax(1);  // [B, A]
  out.target_scores = one_hot * norm.unsqueeze(-1);
  out.foreground = foreground;
  out.target_gt_index = gt_index;
  return out;
}

}  // namespace kestrel::train
