// YOLOv8 building blocks as LibTorch modules. Private to src/model (other
// modules use yolo.h). Submodule names follow the common checkpoint layout
// (conv, bn, cv1, cv2, m.<i>, cv2.<level>.<j>, cv3.<level>.<j>, dfl.conv) so
// state-dict names match public YOLOv8 weights.
//
// All inputs/outputs are NCHW float tensors. forward() keeps LibTorch's
// lowercase name (Sequential/AnyModule call it), hence the NOLINTs.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/pimpl.h>

#include <vector>

namespace kestrel::model {

// Conv2d(k, stride s, padding k/2, no bias) + BatchNorm2d(eps 1e-3,
// momentum 0.03) + SiLU. [B, c1, H, W] -> [B, c2, H/s, W/s].
// After Fuse(): Conv2d with bias (BN folded in) + SiLU; no "bn" submodule.
class ConvImpl : public torch::nn::Module {
 public:
  ConvImpl(int c1, int c2, int k, int s);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  // Folds BN (running statistics) into the conv. Inference only.
  void Fuse();

  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};

 private:
  bool fused_ = false;
};
TORCH_MODULE(Conv);

// Two 3x3 Convs (c -> c -> c), plus the input when `shortcut`.
class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(int c, bool shortcut);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  void Fuse();

  Conv cv1{nullptr}, cv2{nullptr};

 private:
  bool add_;
};
TORCH_MODULE(Bottleneck);

// CSP block with 2 convolutions: cv1 (1x1, c1 -> 2c, c = c2/2) split in two
// halves, n Bottlenecks chained on the second half, all (2+n) pieces
// concatenated and fused by cv2 (1x1 -> c2). [B, c1, H, W] -> [B, c2, H, W].
class C2fImpl : public torch::nn::Module {
 public:
  C2fImpl(int c1, int c2, int n, bool shortcut);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  void Fuse();

  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::ModuleList m{nullptr};

 private:
  std::vector<Bottleneck> bottlenecks_;  // typed handles into m
};
TORCH_MODULE(C2f);

// Spatial pyramid pooling, fast: cv1 (1x1, c1 -> c1/2), three chained k x k
// stride-1 max pools, concat of the 4 maps, cv2 (1x1 -> c2). Spatial size kept.
class SppfImpl : public torch::nn::Module {
 public:
  SppfImpl(int c1, int c2, int k);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  void Fuse();

  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::MaxPool2d m{nullptr};
};
TORCH_MODULE(Sppf);

// Parameter-free placeholders so layer indices match the yaml (10, 11, ...).
class UpsampleImpl : public torch::nn::Module {  // nearest, 2x: [B,C,H,W] -> [B,C,2H,2W]
 public:
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
};
TORCH_MODULE(Upsample);
class ConcatImpl : public torch::nn::Module {  // along channels
 public:
  torch::Tensor forward(const std::vector<torch::Tensor>& xs);  // NOLINT(readability-identifier-naming)
};
TORCH_MODULE(Concat);

// Distribution focal loss integral: softmax over 16 bins, expectation via a
// frozen 1x1 conv with weights 0..15. [B, 4*16, A] -> [B, 4, A] (in bins).
class DflImpl : public torch::nn::Module {
 public:
  DflImpl();
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)

  torch::nn::Conv2d conv{nullptr};
};
TORCH_MODULE(Dfl);

// Anchor-free decoupled head over P3/P4/P5. For each level i with ch[i]
// input channels: cv2[i] = Conv(ch,c2,3), Conv(c2,c2,3), Conv2d(c2,64,1)
// (box distributions); cv3[i] = Conv(ch,c3,3), Conv(c3,c3,3), Conv2d(c3,nc,1)
// (class logits). forward: [B, ch[i], H_i, W_i] -> [B, 64+nc, H_i, W_i].
class DetectImpl : public torch::nn::Module {
 public:
  DetectImpl(int nc, const std::vector<int>& ch);
  // NOLINTNEXTLINE(readability-identifier-naming)
  std::vector<torch::Tensor> forward(const std::vector<torch::Tensor>& xs);
  // Raw maps -> [B, 4+nc, A]: cx, cy, w, h in input pixels, sigmoid scores.
  torch::Tensor Decode(const std::vector<torch::Tensor>& maps);
  // Box bias 1.0, class bias log(5 / nc / (640 / stride)^2).
  void InitBiases();
  // Fresh default init of the final class conv of each cv3 branch + bias
  // init; with `whole_branch` also its two Conv+BN stages (weights, BN affine
  // and running statistics).
  void ResetClassifier(bool whole_branch);
  void Fuse();

  torch::nn::ModuleList cv2{nullptr}, cv3{nullptr};
  Dfl dfl{nullptr};

 private:
  int nc_;
  // Typed handles into cv2/cv3: the branches and their final 1x1 convs.
  std::vector<torch::nn::Sequential> box_, cls_;
  std::vector<torch::nn::Conv2d> box_out_, cls_out_;
};
TORCH_MODULE(Detect);

}  // namespace kestrel::model
