#include "train/loss.h"

#include <cmath>
#include <string>
#include <utility>

namespace kestrel::train {
namespace {

Status Field(const std::string& field, const std::string& message) {
  return Status::InvalidArgument(message, ErrorLocation{"", 0, field});
}

// Ground truth padded per image: the reference's [B, M, ...] layout, with rows
// of one image in their original order (order decides argmax ties).
struct PaddedTargets {
  torch::Tensor labels;  // [B, M] int64
  torch::Tensor boxes;   // [B, M, 4] float32 xyxy pixels
  torch::Tensor valid;   // [B, M] bool
};

Result<PaddedTargets> PadTargets(const DetectionTargets& targets, int64_t batch, int num_classes,
                                 ImageSize image, const torch::Device& device) {
  if (!targets.batch_idx.defined() || !targets.cls.defined() || !targets.bboxes.defined()) {
    return Field("targets", "batch_idx, cls and bboxes must all be set (may be empty)");
  }
  const auto boxes = targets.bboxes.to(torch::kCPU, torch::kFloat32).contiguous();
  if (boxes.dim() != 2 || boxes.size(1) != 4) return Field("bboxes", "expected [N, 4]");
  const int64_t n = boxes.size(0);
  const auto index = targets.batch_idx.reshape({-1}).to(torch::kCPU, torch::kFloat64).contiguous();
  const auto cls = targets.cls.reshape({-1}).to(torch::kCPU, torch::kFloat64).contiguous();
  if (index.numel() != n) return Field("batch_idx", "expected [N] matching bboxes [N, 4]");
  if (cls.numel() != n) return Field("cls", "expected [N, 1] matching bboxes [N, 4]");

  const double* index_p = index.data_ptr<double>();
  const double* cls_p = cls.data_ptr<double>();
  const float* box_p = boxes.data_ptr<float>();
  std::vector<int64_t> count(static_cast<size_t>(batch), 0);
  std::vector<int64_t> slot(static_cast<size_t>(n), 0);
  int64_t max_count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double b = index_p[i];
    if (!(b >= 0 && b < static_cast<double>(batch)) || b != std::floor(b)) {
      return Field("batch_idx", "row " + std::to_string(i) + ": " + std::to_string(b) +
                                    " is not an image index in [0, " + std::to_string(batch) + ")");
    }
    const double c = cls_p[i];
    if (!(c >= 0 && c < num_classes) || c != std::floor(c)) {
      return Field("cls", "row " + std::to_string(i) + ": " + std::to_string(c) + " is not a class in [0, " +
                              std::to_string(num_classes) + ")");
    }
    for (int k = 0; k < 4; ++k) {
      if (!std::isfinite(box_p[i * 4 + k])) {
        return Field("bboxes", "row " + std::to_string(i) + " is not finite");
      }
    }
    slot[static_cast<size_t>(i)] = count[static_cast<size_t>(b)]++;
    max_count = std::max(max_count, count[static_cast<size_t>(b)]);
  }

  auto labels = torch::zeros({batch, max_count}, torch::kLong);
  auto cxcywh = torch::zeros({batch, max_count, 4}, torch::kFloat32);
  auto valid = torch::zeros({batch, max_count}, torch::kBool);
  auto labels_a = labels.accessor<int64_t, 2>();
  auto boxes_a = cxcywh.accessor<float, 3>();
  auto valid_a = valid.accessor<bool, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const auto b = static_cast<int64_t>(index_p[i]);
    const int64_t s = slot[static_cast<size_t>(i)];
    labels_a[b][s] = static_cast<int64_t>(cls_p[i]);
    for (int k = 0; k < 4; ++k) boxes_a[b][s][k] = box_p[i * 4 + k];
    valid_a[b][s] = true;
  }
  // Normalized cx,cy,w,h -> pixels (scale x by width, y by height) -> xyxy.
  const auto scale = torch::tensor({static_cast<float>(image.width), static_cast<float>(image.height),
                                    static_cast<float>(image.width), static_cast<float>(image.height)});
  const auto scaled = cxcywh * scale;
  const auto half = scaled.slice(-1, 2, 4) / 2;
  const auto xyxy = torch::cat({scaled.slice(-1, 0, 2) - half, scaled.slice(-1, 0, 2) + half}, -1);
  return PaddedTargets{labels.to(device), xyxy.to(device), valid.to(device)};
}

}  // namespace

Result<DetectionLoss> DetectionLoss::Create(LossOptions options) {
  KESTREL_RETURN_IF_ERROR(options.Validate());
  return DetectionLoss(std::move(options));
}

torch::Tensor DecodeBoxes(const torch::Tensor& distribution, const torch::Tensor& anchor_points,
                          int reg_max) {
  auto shape = distribution.sizes().vec();
  TORCH_CHECK(!shape.empty() && shape.back() == 4 * reg_max, "DecodeBoxes: last dim must be 4*reg_max");
  shape.back() = 4;
  shape.push_back(reg_max);
  const auto bins = torch::arange(reg_max, distribution.options());
  const auto dist = distribution.view(shape).softmax(-1).matmul(bins);  // [..., 4]
  return torch::cat({anchor_points - dist.slice(-1, 0, 2), anchor_points + dist.slice(-1, 2, 4)}, -1);
}

torch::Tensor DistributionFocalLoss(const torch::Tensor& logits, const torch::Tensor& target_in) {
  const int64_t reg_max = logits.size(-1);
  const auto target = target_in.clamp(0, static_cast<double>(reg_max) - 1 - 0.01);
  const auto left = target.to(torch::kLong);
  const auto right = left + 1;
  const auto weight_left = right.to(target.scalar_type()) - target;
  const auto weight_right = 1 - weight_left;
  const auto log_p = torch::log_softmax(logits, -1);
  const auto ce_left = -log_p.gather(-1, left.unsqueeze(-1)).squeeze(-1);
  const auto ce_right = -log_p.gather(-1, right.unsqueeze(-1)).squeeze(-1);
  return ce_left * weight_left + ce_right * weight_right;
}

Result<LossOutput> DetectionLoss::Compute(const std::vector<torch::Tensor>& heads,
                                          const DetectionTargets& targets, ImageSize image) const {
  const int reg_max = options_.reg_max;
  const int nc = options_.num_classes;
  const int64_t channels = 4 * reg_max + nc;
  if (heads.size() != options_.strides.size()) {
    return Field("heads", "expected " + std::to_string(options_.strides.size()) + " levels, got " +
                              std::to_string(heads.size()));
  }
  for (size_t i = 0; i < heads.size(); ++i) {
    const auto& h = heads[i];
    if (!h.defined() || h.dim() != 4 || h.size(1) != channels || h.size(0) != heads[0].size(0) ||
        h.device() != heads[0].device()) {
      return Field("heads", "level " + std::to_string(i) + ": expected [B, " + std::to_string(channels) +
                                ", H, W] on one device");
    }
  }
  if (image.height <= 0 || image.width <= 0) return Field("image", "size must be positive");

  try {
    const int64_t batch = heads[0].size(0);
    const auto device = heads[0].device();
    KESTREL_ASSIGN_OR_RETURN(PaddedTargets gt, PadTargets(targets, batch, nc, image, device));

    std::vector<torch::Tensor> flat;
    std::vector<std::array<int64_t, 2>> sizes;
    for (const auto& h : heads) {
      flat.push_back(h.to(torch::kFloat32).reshape({batch, channels, -1}));
      sizes.push_back({h.size(2), h.size(3)});
    }
    const auto all = torch::cat(flat, 2);                                                 // [B, C, A]
    const auto pred_dist = all.slice(1, 0, 4 * reg_max).permute({0, 2, 1}).contiguous();  // [B, A, 64]
    const auto pred_logits = all.slice(1, 4 * reg_max, channels).permute({0, 2, 1}).contiguous();
    const Anchors anchors = MakeAnchors(sizes, options_.strides, device);
    const auto pred_boxes = DecodeBoxes(pred_dist, anchors.points, reg_max);  // grid units

    const Assignment a =
        AssignTaskAligned(pred_logits.detach().sigmoid(), pred_boxes.detach() * anchors.strides,
                          anchors.points * anchors.strides, gt.labels, gt.boxes, gt.valid, options_.assigner);
    const auto score_sum = a.target_scores.sum().clamp_min(1.0);

    const auto& cls_target = a.target_scores;
    torch::Tensor bce;
    if (options_.class_weights.empty()) {
      bce = torch::binary_cross_entropy_with_logits(pred_logits, cls_target, {}, {}, at::Reduction::None);
    } else {
      const auto w = torch::tensor(options_.class_weights, torch::kFloat64).to(device, torch::kFloat32);
      bce = torch::binary_cross_entropy_with_logits(pred_logits, cls_target, w, {}, at::Reduction::None);
    }
    const auto loss_cls = bce.sum() / score_sum;

    auto loss_box = torch::zeros({}, pred_dist.options());
    auto loss_dfl = torch::zeros({}, pred_dist.options());
    if (a.foreground.any().item<bool>()) {
      const auto& fg = a.foreground;
      const auto target_boxes = a.target_boxes / anchors.strides;             // grid units
      const auto weight = a.target_scores.sum(-1).index({fg}).unsqueeze(-1);  // [K, 1]
      const auto ciou = BoxCiou(pred_boxes.index({fg}), target_boxes.index({fg})).unsqueeze(-1);
      loss_box = ((1.0 - ciou) * weight).sum() / score_sum;

      const auto points = anchors.points.unsqueeze(0);
      const auto ltrb =
          torch::cat({points - target_boxes.slice(-1, 0, 2), target_boxes.slice(-1, 2, 4) - points}, -1)
              .clamp(0, reg_max - 1 - 0.01);
      const auto dfl =
          DistributionFocalLoss(pred_dist.index({fg}).view({-1, reg_max}), ltrb.index({fg}).view({-1}));
      loss_dfl = (dfl.view({-1, 4}).mean(-1, /*keepdim=*/true) * weight).sum() / score_sum;
    }

    const auto items = torch::stack(
        {loss_box * options_.box_gain, loss_cls * options_.cls_gain, loss_dfl * options_.dfl_gain});
    return LossOutput{items.sum() * static_cast<double>(batch), items.detach()};
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("detection loss: ") + e.what_without_backtrace());
  }
}

}  // namespace kestrel::train
