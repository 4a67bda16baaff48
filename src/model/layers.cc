#include "model/internal/layers.h"

#include <torch/nn/functional/upsampling.h>
#include <torch/nn/init.h>
#include <torch/utils.h>

#include <cmath>

#include "model/anchors.h"
#include "model/spec.h"

namespace kestrel::model {

// ---- Conv ----

ConvImpl::ConvImpl(int c1, int c2, int k, int s) {
  conv = register_module(
      "conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(c1, c2, k).stride(s).padding(k / 2).bias(false)));
  bn = register_module("bn",
                       torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(c2).eps(1e-3).momentum(0.03)));
}

torch::Tensor ConvImpl::forward(const torch::Tensor& x) {
  if (fused_) return torch::silu(conv->forward(x));
  return torch::silu(bn->forward(conv->forward(x)));
}

void ConvImpl::Fuse() {
  if (fused_) return;
  torch::NoGradGuard no_grad;
  const auto& o = conv->options;
  auto fused = torch::nn::Conv2d(torch::nn::Conv2dOptions(o.in_channels(), o.out_channels(), o.kernel_size())
                                     .stride(o.stride())
                                     .padding(o.padding())
                                     .bias(true));
  fused->to(conv->weight.device(), conv->weight.scalar_type());
  // BN(y) = gamma * (y - mean) / sqrt(var + eps) + beta, folded per output channel.
  at::Tensor scale = bn->weight / (bn->running_var + bn->options.eps()).sqrt();
  fused->weight.copy_(conv->weight * scale.view({-1, 1, 1, 1}));
  fused->bias.copy_(bn->bias - bn->running_mean * scale);
  conv = replace_module("conv", fused);
  unregister_module("bn");
  bn = nullptr;
  fused_ = true;
}

// ---- Bottleneck ----

BottleneckImpl::BottleneckImpl(int c, bool shortcut) : add_(shortcut) {
  cv1 = register_module("cv1", Conv(c, c, 3, 1));
  cv2 = register_module("cv2", Conv(c, c, 3, 1));
}

torch::Tensor BottleneckImpl::forward(const torch::Tensor& x) {
  at::Tensor y = cv2->forward(cv1->forward(x));
  return add_ ? x + y : y;
}

void BottleneckImpl::Fuse() {
  cv1->Fuse();
  cv2->Fuse();
}

// ---- C2f ----

C2fImpl::C2fImpl(int c1, int c2, int n, bool shortcut) {
  const int c = c2 / 2;
  cv1 = register_module("cv1", Conv(c1, 2 * c, 1, 1));
  cv2 = register_module("cv2", Conv((2 + n) * c, c2, 1, 1));
  m = register_module("m", torch::nn::ModuleList());
  for (int i = 0; i < n; ++i) {
    bottlenecks_.emplace_back(c, shortcut);
    m->push_back(bottlenecks_.back());
  }
}

torch::Tensor C2fImpl::forward(const torch::Tensor& x) {
  std::vector<at::Tensor> y = cv1->forward(x).chunk(2, 1);
  for (auto& b : bottlenecks_) y.push_back(b->forward(y.back()));
  return cv2->forward(torch::cat(y, 1));
}

void C2fImpl::Fuse() {
  cv1->Fuse();
  cv2->Fuse();
  for (auto& b : bottlenecks_) b->Fuse();
}

// ---- SPPF ----

SppfImpl::SppfImpl(int c1, int c2, int k) {
  const int c = c1 / 2;
  cv1 = register_module("cv1", Conv(c1, c, 1, 1));
  cv2 = register_module("cv2", Conv(4 * c, c2, 1, 1));
  m = register_module("m", torch::nn::MaxPool2d(torch::nn::MaxPool2dOptions(k).stride(1).padding(k / 2)));
}

torch::Tensor SppfImpl::forward(const torch::Tensor& x) {
  at::Tensor y0 = cv1->forward(x);
  at::Tensor y1 = m->forward(y0);
  at::Tensor y2 = m->forward(y1);
  at::Tensor y3 = m->forward(y2);
  return cv2->forward(torch::cat({y0, y1, y2, y3}, 1));
}

void SppfImpl::Fuse() {
  cv1->Fuse();
  cv2->Fuse();
}

// ---- Upsample, Concat ----

torch::Tensor UpsampleImpl::forward(const torch::Tensor& x) {
  namespace F = torch::nn::functional;
  return F::interpolate(
      x, F::InterpolateFuncOptions().scale_factor(std::vector<double>{2.0, 2.0}).mode(torch::kNearest));
}

torch::Tensor ConcatImpl::forward(const std::vector<torch::Tensor>& xs) { return torch::cat(xs, 1); }

// ---- DFL ----

DflImpl::DflImpl() {
  conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(kRegMax, 1, 1).bias(false)));
  torch::NoGradGuard no_grad;
  conv->weight.copy_(torch::arange(kRegMax, torch::kFloat).view({1, kRegMax, 1, 1}));
  conv->weight.set_requires_grad(false);
}

torch::Tensor DflImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), a = x.size(2);
  // [B, 64, A] -> [B, 16 bins, 4 sides, A], softmax over bins, expectation.
  at::Tensor p = x.view({b, 4, kRegMax, a}).transpose(2, 1).softmax(1);
  return conv->forward(p).view({b, 4, a});
}

// ---- Detect ----

DetectImpl::DetectImpl(int nc, const std::vector<int>& ch) : nc_(nc) {
  const int c2 = DetectBoxChannels(ch);
  const int c3 = DetectClsChannels(ch, nc);
  cv2 = register_module("cv2", torch::nn::ModuleList());
  cv3 = register_module("cv3", torch::nn::ModuleList());
  for (int x : ch) {
    box_out_.push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(c2, int64_t{4} * kRegMax, 1)));
    cls_out_.push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(c3, nc, 1)));
    box_.push_back(torch::nn::Sequential(Conv(x, c2, 3, 1), Conv(c2, c2, 3, 1), box_out_.back()));
    cls_.push_back(torch::nn::Sequential(Conv(x, c3, 3, 1), Conv(c3, c3, 3, 1), cls_out_.back()));
    cv2->push_back(box_.back());
    cv3->push_back(cls_.back());
  }
  dfl = register_module("dfl", Dfl());
  InitBiases();
}

std::vector<torch::Tensor> DetectImpl::forward(const std::vector<torch::Tensor>& xs) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < xs.size(); ++i) {
    out.push_back(torch::cat({box_[i]->forward(xs[i]), cls_[i]->forward(xs[i])}, 1));
  }
  return out;
}

torch::Tensor DetectImpl::Decode(const std::vector<torch::Tensor>& maps) {
  const int64_t b = maps.at(0).size(0);
  const int64_t no = 4 * kRegMax + nc_;
  std::vector<at::Tensor> flat;
  std::vector<double> strides;
  for (size_t i = 0; i < maps.size(); ++i) {
    flat.push_back(maps[i].reshape({b, no, -1}));
    strides.push_back(kDetectStrides[i]);
  }
  at::Tensor x = torch::cat(flat, 2);  // [B, 64+nc, A]
  AnchorGrid grid = MakeAnchors(maps, strides, 0.5);
  at::Tensor dist = dfl->forward(x.slice(1, 0, 4 * kRegMax));  // [B, 4, A]
  at::Tensor box = Dist2Bbox(dist, grid.points.transpose(0, 1).unsqueeze(0), /*xywh=*/true, 1) *
                   grid.strides.transpose(0, 1);
  return torch::cat({box, x.slice(1, 4 * kRegMax).sigmoid()}, 1);
}

void DetectImpl::InitBiases() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < box_out_.size(); ++i) {
    const double s = kDetectStrides[i];
    box_out_[i]->bias.fill_(1.0);
    // Prior: about 5 objects per 640x640 image spread over nc classes.
    cls_out_[i]->bias.fill_(std::log(5.0 / nc_ / std::pow(640.0 / s, 2)));
  }
}

void DetectImpl::ResetClassifier(bool whole_branch) {
  for (auto& c : cls_out_) c->reset_parameters();
  if (whole_branch) {
    for (auto& branch : cls_) {
      for (size_t j = 0; j < 2; ++j) {
        auto conv = branch->ptr<ConvImpl>(j);
        conv->conv->reset_parameters();
        if (conv->bn) conv->bn->reset_parameters();
      }
    }
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < cls_out_.size(); ++i) {
    cls_out_[i]->bias.fill_(std::log(5.0 / nc_ / std::pow(640.0 / kDetectStrides[i], 2)));
  }
}

void DetectImpl::Fuse() {
  for (size_t i = 0; i < box_.size(); ++i) {
    for (size_t j = 0; j < 2; ++j) {
      box_[i]->ptr<ConvImpl>(j)->Fuse();
      cls_[i]->ptr<ConvImpl>(j)->Fuse();
    }
  }
}

}  // namespace kestrel::model
