#include "model/internal/layers.h"

#include <c10/util/Exception.h>
#include <torch/nn/functional/upsampling.h>
#include <torch/nn/init.h>
#include <torch/utils.h>

#include <cmath>

#include "model/anchors.h"
#include "model/spec.h"

namespace kestrel::model {

// ---- Conv ----

ConvImpl::ConvImpl(int c1, int c2, int k, int s, int p, int g, bool act) : act_(act) {
  conv = register_module(
      "conv",
      torch::nn::Conv2d(
          torch::nn::Conv2dOptions(c1, c2, k).stride(s).padding(p >= 0 ? p : k / 2).groups(g).bias(false)));
  bn = register_module("bn",
                       torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(c2).eps(1e-3).momentum(0.03)));
}

torch::Tensor ConvImpl::forward(const torch::Tensor& x) {
  at::Tensor y = fused_ ? conv->forward(x) : bn->forward(conv->forward(x));
  return act_ ? torch::silu(y) : y;
}

void ConvImpl::Fuse() {
  if (fused_) return;
  torch::NoGradGuard no_grad;
  const auto& o = conv->options;
  auto fused = torch::nn::Conv2d(torch::nn::Conv2dOptions(o.in_channels(), o.out_channels(), o.kernel_size())
                                     .stride(o.stride())
                                     .padding(o.padding())
                                     .groups(o.groups())
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

BottleneckImpl::BottleneckImpl(int c1, int c2, int k1, int k2, double e, bool shortcut)
    : add_(shortcut && c1 == c2) {
  const int hidden = static_cast<int>(c2 * e);
  cv1 = register_module("cv1", Conv(c1, hidden, k1, 1));
  cv2 = register_module("cv2", Conv(hidden, c2, k2, 1));
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
    bottlenecks_.emplace_back(c, c, 3, 3, 1.0, shortcut);
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

// ---- C3 (and C3k) ----

C3Impl::C3Impl(int c1, int c2, int n, bool shortcut, int hidden, int k1) {
  cv1 = register_module("cv1", Conv(c1, hidden, 1, 1));
  cv2 = register_module("cv2", Conv(c1, hidden, 1, 1));
  cv3 = register_module("cv3", Conv(2 * hidden, c2, 1, 1));
  m = register_module("m", torch::nn::ModuleList());
  for (int i = 0; i < n; ++i) {
    bottlenecks_.emplace_back(hidden, hidden, k1, 3, 1.0, shortcut);
    m->push_back(bottlenecks_.back());
  }
}

torch::Tensor C3Impl::forward(const torch::Tensor& x) {
  at::Tensor y = cv1->forward(x);
  for (auto& b : bottlenecks_) y = b->forward(y);
  return cv3->forward(torch::cat({y, cv2->forward(x)}, 1));
}

void C3Impl::Fuse() {
  cv1->Fuse();
  cv2->Fuse();
  cv3->Fuse();
  for (auto& b : bottlenecks_) b->Fuse();
}

// ---- C3k2 ----

C3k2Impl::C3k2Impl(int c1, int c2, int n, bool c3k, int hidden, bool shortcut) {
  cv1 = register_module("cv1", Conv(c1, 2 * hidden, 1, 1));
  cv2 = register_module("cv2", Conv((2 + n) * hidden, c2, 1, 1));
  m = register_module("m", torch::nn::ModuleList());
  for (int i = 0; i < n; ++i) {
    if (c3k) {
      c3k_.emplace_back(hidden, hidden, 2, shortcut, hidden / 2, 3);
      m->push_back(c3k_.back());
    } else {
      bottlenecks_.emplace_back(hidden, hidden, 3, 3, 0.5, shortcut);
      m->push_back(bottlenecks_.back());
    }
  }
}

torch::Tensor C3k2Impl::forward(const torch::Tensor& x) {
  std::vector<at::Tensor> y = cv1->forward(x).chunk(2, 1);
  for (auto& b : bottlenecks_) y.push_back(b->forward(y.back()));
  for (auto& b : c3k_) y.push_back(b->forward(y.back()));
  return cv2->forward(torch::cat(y, 1));
}

void C3k2Impl::Fuse() {
  cv1->Fuse();
  cv2->Fuse();
  for (auto& b : bottlenecks_) b->Fuse();
  for (auto& b : c3k_) b->Fuse();
}

// ---- Attention, PSABlock, C2PSA ----

AttentionImpl::AttentionImpl(int dim, int heads)
    : heads_(heads), key_dim_(dim / heads / 2), head_dim_(dim / heads) {
  qkv = register_module("qkv", Conv(dim, dim + 2 * key_dim_ * heads_, 1, 1, -1, 1, /*act=*/false));
  proj = register_module("proj", Conv(dim, dim, 1, 1, -1, 1, /*act=*/false));
  pe = register_module("pe", Conv(dim, dim, 3, 1, -1, dim, /*act=*/false));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x) {
  const int64_t b = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  std::vector<at::Tensor> qkv_parts = qkv->forward(x)
                                          .view({b, heads_, 2 * key_dim_ + head_dim_, h * w})
                                          .split_with_sizes({key_dim_, key_dim_, head_dim_}, 2);
  const at::Tensor& q = qkv_parts[0];  // [B, heads, key_dim, N]
  const at::Tensor& k = qkv_parts[1];
  const at::Tensor& v = qkv_parts[2];  // [B, heads, head_dim, N]
  at::Tensor attn =
      (q.transpose(-2, -1).matmul(k) * std::pow(key_dim_, -0.5)).softmax(-1);  // [B, heads, N, N]
  at::Tensor y = v.matmul(attn.transpose(-2, -1)).view({b, c, h, w}) + pe->forward(v.reshape({b, c, h, w}));
  return proj->forward(y);
}

void AttentionImpl::Fuse() {
  qkv->Fuse();
  proj->Fuse();
  pe->Fuse();
}

PsaBlockImpl::PsaBlockImpl(int c, int heads) {
  attn = register_module("attn", Attention(c, heads));
  ffn =
      register_module("ffn", torch::nn::Sequential(Conv(c, 2 * c, 1, 1), Conv(2 * c, c, 1, 1, -1, 1, false)));
}

torch::Tensor PsaBlockImpl::forward(const torch::Tensor& x) {
  at::Tensor y = x + attn->forward(x);
  return y + ffn->forward(y);
}

void PsaBlockImpl::Fuse() {
  attn->Fuse();
  for (size_t j = 0; j < ffn->size(); ++j) ffn->ptr<ConvImpl>(j)->Fuse();
}

C2psaImpl::C2psaImpl(int c1, int c2, int n, int hidden) : hidden_(hidden) {
  cv1 = register_module("cv1", Conv(c1, 2 * hidden, 1, 1));
  cv2 = register_module("cv2", Conv(2 * hidden, c2, 1, 1));
  m = register_module("m", torch::nn::ModuleList());
  for (int i = 0; i < n; ++i) {
    blocks_.emplace_back(hidden, AttentionHeads(hidden));
    m->push_back(blocks_.back());
  }
}

torch::Tensor C2psaImpl::forward(const torch::Tensor& x) {
  std::vector<at::Tensor> ab = cv1->forward(x).split(hidden_, 1);
  at::Tensor b = ab[1];
  for (auto& blk : blocks_) b = blk->forward(b);
  return cv2->forward(torch::cat({ab[0], b}, 1));
}

void C2psaImpl::Fuse() {
  cv1->Fuse();
  cv2->Fuse();
  for (auto& blk : blocks_) blk->Fuse();
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

DetectImpl::DetectImpl(int nc, const std::vector<int>& ch, const std::vector<int>& strides, bool dw_cls)
    : nc_(nc), strides_(strides) {
  TORCH_CHECK(strides.size() == ch.size(), "Detect: ", ch.size(), " levels but ", strides.size(), " strides");
  const int c2 = DetectBoxChannels(ch);
  const int c3 = DetectClsChannels(ch, nc);
  cv2 = register_module("cv2", torch::nn::ModuleList());
  cv3 = register_module("cv3", torch::nn::ModuleList());
  for (int x : ch) {
    box_out_.push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(c2, int64_t{4} * kRegMax, 1)));
    cls_out_.push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(c3, nc, 1)));
    Conv b0(x, c2, 3, 1), b1(c2, c2, 3, 1);
    box_convs_.push_back(b0);
    box_convs_.push_back(b1);
    box_.push_back(torch::nn::Sequential(b0, b1, box_out_.back()));
    cv2->push_back(box_.back());
    // The class branch as a ModuleList (names cv3.<level>.<stage>[.<k>]): a
    // LibTorch Sequential cannot hold the nested stages of the DW variant.
    torch::nn::ModuleList branch;
    std::vector<Conv> convs;
    if (dw_cls) {
      for (auto [cin, cout] : {std::pair{x, c3}, std::pair{c3, c3}}) {
        Conv dw(cin, cin, 3, 1, -1, /*g=*/cin), pw(cin, cout, 1, 1);  // DWConv: g = gcd(cin, cin)
        branch->push_back(torch::nn::ModuleList(dw, pw));
        convs.push_back(dw);
        convs.push_back(pw);
      }
    } else {
      convs = {Conv(x, c3, 3, 1), Conv(c3, c3, 3, 1)};
      for (auto& c : convs) branch->push_back(c);
    }
    branch->push_back(cls_out_.back());
    cv3->push_back(branch);
    cls_convs_.push_back(std::move(convs));
  }
  dfl = register_module("dfl", Dfl());
  InitBiases();
}

std::vector<torch::Tensor> DetectImpl::forward(const std::vector<torch::Tensor>& xs) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < xs.size(); ++i) {
    at::Tensor cls = xs[i];
    for (auto& c : cls_convs_[i]) cls = c->forward(cls);
    out.push_back(torch::cat({box_[i]->forward(xs[i]), cls_out_[i]->forward(cls)}, 1));
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
    strides.push_back(strides_[i]);
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
    const double s = strides_[i];
    box_out_[i]->bias.fill_(1.0);
    // Prior: about 5 objects per 640x640 image spread over nc classes.
    cls_out_[i]->bias.fill_(std::log(5.0 / nc_ / std::pow(640.0 / s, 2)));
  }
}

void DetectImpl::ResetClassifier(bool whole_branch) {
  for (auto& c : cls_out_) c->reset_parameters();
  if (whole_branch) {
    for (auto& level : cls_convs_) {
      for (auto& conv : level) {
        conv->conv->reset_parameters();
        if (conv->bn) conv->bn->reset_parameters();
      }
    }
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < cls_out_.size(); ++i) {
    cls_out_[i]->bias.fill_(std::log(5.0 / nc_ / std::pow(640.0 / strides_[i], 2)));
  }
}

void DetectImpl::Fuse() {
  for (auto& c : box_convs_) c->Fuse();
  for (auto& level : cls_convs_) {
    for (auto& c : level) c->Fuse();
  }
}

// ---- The registry ----

namespace {

using BlockFactory = std::shared_ptr<BlockImpl> (*)(const LayerPlan&);

struct RegistryEntry {
  LayerKind kind;
  BlockFactory make;
};

// One entry per single-output kind; Detect is built by the model (it owns
// the decode). A new family adds its new modules here and its table in spec.cc.
constexpr RegistryEntry kRegistry[] = {
    {LayerKind::kConv,
     [](const LayerPlan& p) -> std::shared_ptr<BlockImpl> {
       return Conv(p.c_in, p.c_out, p.kernel, p.stride, p.padding).ptr();
     }},
    {LayerKind::kC2f,
     [](const LayerPlan& p) -> std::shared_ptr<BlockImpl> {
       return C2f(p.c_in, p.c_out, p.repeats, p.shortcut).ptr();
     }},
    {LayerKind::kC3,
     [](const LayerPlan& p) -> std::shared_ptr<BlockImpl> {
       return C3(p.c_in, p.c_out, p.repeats, p.shortcut, p.hidden, 1).ptr();
     }},
    {LayerKind::kC3k2,
     [](const LayerPlan& p) -> std::shared_ptr<BlockImpl> {
       return C3k2(p.c_in, p.c_out, p.repeats, p.c3k, p.hidden, p.shortcut).ptr();
     }},
    {LayerKind::kSppf,
     [](const LayerPlan& p) -> std::shared_ptr<BlockImpl> { return Sppf(p.c_in, p.c_out, p.kernel).ptr(); }},
    {LayerKind::kC2psa,
     [](const LayerPlan& p) -> std::shared_ptr<BlockImpl> {
       return C2psa(p.c_in, p.c_out, p.repeats, p.hidden).ptr();
     }},
    {LayerKind::kUpsample, [](const LayerPlan&) -> std::shared_ptr<BlockImpl> { return Upsample().ptr(); }},
    {LayerKind::kConcat, [](const LayerPlan&) -> std::shared_ptr<BlockImpl> { return Concat().ptr(); }},
};

}  // namespace

std::shared_ptr<BlockImpl> MakeBlock(const LayerPlan& p) {
  for (const auto& e : kRegistry) {
    if (e.kind == p.kind) return e.make(p);
  }
  TORCH_CHECK(false, "no registered module for layer ", p.index, " (", LayerKindName(p.kind), ")");
}

}  // namespace kestrel::model
