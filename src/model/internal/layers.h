// The module registry of the YOLO families (YOLOv8, YOLO11, YOLOv5u) as
// LibTorch modules. Private to src/model (other modules use yolo.h).
// Submodule names follow the common checkpoint layout (conv, bn, cv1, cv2,
// cv3, m.<i>, attn.qkv, ffn.<j>, cv2.<level>.<j>, cv3.<level>.<j>[.<k>],
// dfl.conv) so state-dict names match the reference's weights.
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

#include <memory>
#include <vector>

#include "model/spec.h"

namespace kestrel::model {

// A layer of the graph with one output: what the registry builds for every
// LayerKind but Detect. Run() takes the layer's inputs in `from` order.
class BlockImpl : public torch::nn::Module {
 public:
  virtual torch::Tensor Run(const std::vector<torch::Tensor>& xs) = 0;
  // Folds every BatchNorm into its conv (inference only); idempotent.
  virtual void Fuse() {}
};

// The registry: the block of plan row `p` (any kind but kDetect), built from
// the row alone. Throws c10::Error for kDetect (a caller bug).
std::shared_ptr<BlockImpl> MakeBlock(const LayerPlan& p);

// Conv2d(k, stride s, padding p (-1: k/2), g groups, no bias) +
// BatchNorm2d(eps 1e-3, momentum 0.03) + SiLU (none when !act).
// [B, c1, H, W] -> [B, c2, H/s, W/s]. DWConv is Conv with g = gcd(c1, c2).
// After Fuse(): Conv2d with bias (BN folded in); no "bn" submodule.
class ConvImpl : public BlockImpl {
 public:
  ConvImpl(int c1, int c2, int k, int s, int p = -1, int g = 1, bool act = true);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  torch::Tensor Run(const std::vector<torch::Tensor>& xs) override { return forward(xs.at(0)); }
  // Folds BN (running statistics) into the conv. Inference only.
  void Fuse() override;

  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};

 private:
  bool act_;
  bool fused_ = false;
};
TORCH_MODULE(Conv);

// cv1 (k1 x k1, c1 -> hidden = int(c2 * e)), cv2 (k2 x k2, hidden -> c2),
// plus the input when `shortcut` and c1 == c2.
class BottleneckImpl : public torch::nn::Module {
 public:
  BottleneckImpl(int c1, int c2, int k1, int k2, double e, bool shortcut);
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
class C2fImpl : public BlockImpl {
 public:
  C2fImpl(int c1, int c2, int n, bool shortcut);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  torch::Tensor Run(const std::vector<torch::Tensor>& xs) override { return forward(xs.at(0)); }
  void Fuse() override;

  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::ModuleList m{nullptr};

 private:
  std::vector<Bottleneck> bottlenecks_;  // typed handles into m
};
TORCH_MODULE(C2f);

// CSP bottleneck with 3 convolutions: cv1, cv2 (1x1, c1 -> hidden), n
// Bottlenecks (k1 x k1 then 3x3, e = 1) on cv1's branch, cv3 (1x1, 2*hidden ->
// c2) over the concat of both branches. YOLOv5u's C3 has k1 = 1; YOLO11's
// C3k is C3(c, c, 2, shortcut, hidden c/2, k1 = 3).
class C3Impl : public BlockImpl {
 public:
  C3Impl(int c1, int c2, int n, bool shortcut, int hidden, int k1);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  torch::Tensor Run(const std::vector<torch::Tensor>& xs) override { return forward(xs.at(0)); }
  void Fuse() override;

  Conv cv1{nullptr}, cv2{nullptr}, cv3{nullptr};
  torch::nn::ModuleList m{nullptr};

 private:
  std::vector<Bottleneck> bottlenecks_;  // typed handles into m
};
TORCH_MODULE(C3);

// YOLO11's C2f variant: cv1 (1x1, c1 -> 2*hidden) split in halves, n blocks
// chained on the last half — Bottleneck(hidden, hidden, 3, 3, e 0.5) or, with
// c3k, C3k — then all (2+n) pieces concatenated and cv2 (1x1 -> c2).
class C3k2Impl : public BlockImpl {
 public:
  C3k2Impl(int c1, int c2, int n, bool c3k, int hidden, bool shortcut);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  torch::Tensor Run(const std::vector<torch::Tensor>& xs) override { return forward(xs.at(0)); }
  void Fuse() override;

  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::ModuleList m{nullptr};

 private:
  std::vector<Bottleneck> bottlenecks_;  // typed handles into m (without c3k)
  std::vector<C3> c3k_;                  // typed handles into m (with c3k)
};
TORCH_MODULE(C3k2);

// Multi-head self-attention over the H*W positions: qkv (1x1, no activation,
// dim -> dim + 2 * key_dim * heads; head_dim = dim / heads, key_dim =
// head_dim / 2), softmax(q^T k / sqrt(key_dim)) applied to v, plus a
// positional term pe (depthwise 3x3 on v, no activation), then proj (1x1, no
// activation). [B, dim, H, W] -> [B, dim, H, W].
class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(int dim, int heads);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  void Fuse();

  Conv qkv{nullptr}, proj{nullptr}, pe{nullptr};

 private:
  int heads_, key_dim_, head_dim_;
};
TORCH_MODULE(Attention);

// x + attn(x), then x + ffn(x) with ffn = Conv(c, 2c, 1), Conv(2c, c, 1, no act).
class PsaBlockImpl : public torch::nn::Module {
 public:
  PsaBlockImpl(int c, int heads);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  void Fuse();

  Attention attn{nullptr};
  torch::nn::Sequential ffn{nullptr};
};
TORCH_MODULE(PsaBlock);

// YOLO11's C2PSA: cv1 (1x1, c1 -> 2*hidden) split in halves a, b; n PSABlocks
// (AttentionHeads(hidden) heads) on b; cv2 (1x1, cat(a, b) -> c2).
class C2psaImpl : public BlockImpl {
 public:
  C2psaImpl(int c1, int c2, int n, int hidden);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  torch::Tensor Run(const std::vector<torch::Tensor>& xs) override { return forward(xs.at(0)); }
  void Fuse() override;

  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::ModuleList m{nullptr};

 private:
  int hidden_;
  std::vector<PsaBlock> blocks_;  // typed handles into m
};
TORCH_MODULE(C2psa);

// Spatial pyramid pooling, fast: cv1 (1x1, c1 -> c1/2), three chained k x k
// stride-1 max pools, concat of the 4 maps, cv2 (1x1 -> c2). Spatial size kept.
class SppfImpl : public BlockImpl {
 public:
  SppfImpl(int c1, int c2, int k);
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  torch::Tensor Run(const std::vector<torch::Tensor>& xs) override { return forward(xs.at(0)); }
  void Fuse() override;

  Conv cv1{nullptr}, cv2{nullptr};
  torch::nn::MaxPool2d m{nullptr};
};
TORCH_MODULE(Sppf);

// Parameter-free placeholders so layer indices match the yaml (10, 11, ...).
class UpsampleImpl : public BlockImpl {  // nearest, 2x: [B,C,H,W] -> [B,C,2H,2W]
 public:
  torch::Tensor forward(const torch::Tensor& x);  // NOLINT(readability-identifier-naming)
  torch::Tensor Run(const std::vector<torch::Tensor>& xs) override { return forward(xs.at(0)); }
};
TORCH_MODULE(Upsample);
class ConcatImpl : public BlockImpl {  // along channels
 public:
  torch::Tensor forward(const std::vector<torch::Tensor>& xs);  // NOLINT(readability-identifier-naming)
  torch::Tensor Run(const std::vector<torch::Tensor>& xs) override { return forward(xs); }
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
// (class logits), or with `dw_cls` (YOLO11) cv3[i] = (DWConv(ch,ch,3),
// Conv(ch,c3,1)), (DWConv(c3,c3,3), Conv(c3,c3,1)), Conv2d(c3,nc,1).
// forward: [B, ch[i], H_i, W_i] -> [B, 64+nc, H_i, W_i].
class DetectImpl : public torch::nn::Module {
 public:
  // strides[i]: input pixels per cell of level i (LayerPlan::detect_strides).
  DetectImpl(int nc, const std::vector<int>& ch, const std::vector<int>& strides, bool dw_cls);
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
  std::vector<int> strides_;  // per level
  // Typed handles into cv2/cv3: the box branches and the final 1x1 convs (a
  // class branch runs cls_convs_[i] in order, then cls_out_[i]).
  std::vector<torch::nn::Sequential> box_;
  std::vector<torch::nn::Conv2d> box_out_, cls_out_;
  std::vector<Conv> box_convs_;               // every Conv of the box branches
  std::vector<std::vector<Conv>> cls_convs_;  // per level: the Convs before cls_out_
};
TORCH_MODULE(Detect);

}  // namespace kestrel::model
