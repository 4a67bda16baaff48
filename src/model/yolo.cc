#include "model/yolo.h"

#include <c10/util/Exception.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/utils.h>

#include "model/internal/layers.h"

namespace kestrel::model {

YoloImpl::YoloImpl(const ModelSpec& spec) : spec_(spec), plan_(BuildLayerPlan(spec)) {
  auto list = register_module("model", torch::nn::ModuleList());
  for (const LayerPlan& p : plan_) {
    std::shared_ptr<torch::nn::Module> layer;
    if (p.kind == LayerKind::kDetect) {
      detect_ = Detect(p.nc, p.detect_channels, p.detect_strides, p.detect_dw_cls).ptr();
      layer = detect_;
      blocks_.push_back(nullptr);
    } else {
      blocks_.push_back(MakeBlock(p));
      layer = blocks_.back();
    }
    list->push_back(layer);
  }
  last_use_.assign(plan_.size(), -1);
  for (const LayerPlan& p : plan_) {
    for (int f : p.from) {
      const int src = f < 0 ? p.index - 1 : f;
      if (src >= 0) last_use_[static_cast<size_t>(src)] = p.index;
    }
  }
}

YoloOutput YoloImpl::forward(const torch::Tensor& images) {
  TORCH_CHECK(images.dim() == 4 && images.size(1) == 3, "YOLO input must be [B, 3, H, W], got ",
              images.sizes());
  TORCH_CHECK(images.size(2) % kMaxStride == 0 && images.size(3) % kMaxStride == 0,
              "YOLO input height and width must be multiples of ", kMaxStride, ", got ", images.sizes());
  std::vector<at::Tensor> outs(plan_.size());
  auto input = [&](const LayerPlan& p, size_t k) -> const at::Tensor& {
    const int f = p.from[k];
    if (f < 0) return p.index == 0 ? images : outs[static_cast<size_t>(p.index - 1)];
    return outs[static_cast<size_t>(f)];
  };
  YoloOutput result;
  for (const LayerPlan& p : plan_) {
    std::vector<at::Tensor> xs;
    for (size_t k = 0; k < p.from.size(); ++k) xs.push_back(input(p, k));
    at::Tensor y;
    if (p.kind == LayerKind::kDetect) {
      result.maps = detect_->forward(xs);
      if (!is_training()) result.features = xs;
    } else {
      y = blocks_[static_cast<size_t>(p.index)]->Run(xs);
    }
    outs[static_cast<size_t>(p.index)] = std::move(y);
    // Drop activations nobody reads any more (autograd keeps what it needs).
    for (int f : p.from) {
      const int src = f < 0 ? p.index - 1 : f;
      if (src >= 0 && last_use_[static_cast<size_t>(src)] == p.index)
        outs[static_cast<size_t>(src)] = at::Tensor();
    }
  }
  if (!is_training()) result.decoded = detect_->Decode(result.maps);
  return result;
}

torch::Tensor YoloImpl::Decode(const std::vector<torch::Tensor>& maps) { return detect_->Decode(maps); }

std::vector<double> YoloImpl::Strides() const {
  std::vector<double> out;
  for (int s : plan_.back().detect_strides) out.push_back(static_cast<double>(s));
  return out;
}

void YoloImpl::Fuse() {
  if (fused_) return;
  for (auto& block : blocks_) {
    if (block) block->Fuse();
  }
  detect_->Fuse();
  fused_ = true;
}

void YoloImpl::ResetClassifier(bool whole_branch) { detect_->ResetClassifier(whole_branch); }

Result<Yolo> CreateModel(const ModelSpec& spec) {
  ModelSpec checked = spec;
  if (spec.graph) {
    if (spec.nc < 1 || spec.nc > 10000)
      return Status::InvalidArgument("class count " + std::to_string(spec.nc) + " out of range [1, 10000]",
                                     {"", 0, "nc"});
    KESTREL_RETURN_IF_ERROR(CheckGraph(spec));
  } else {
    KESTREL_ASSIGN_OR_RETURN(checked, ParseModelSpec(spec.Name(), spec.nc));
  }
  try {
    return Yolo(checked);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("building ") + spec.Name() + ": " + e.what_without_backtrace());
  }
}

Result<Yolo> CreateModel(const std::string& spec, int nc) {
  KESTREL_ASSIGN_OR_RETURN(ModelSpec parsed, ParseModelSpec(spec, nc));
  return CreateModel(parsed);
}

Yolo CloneModel(YoloImpl& source) {
  Yolo copy(source.Spec());
  if (source.IsFused()) copy->Fuse();
  torch::NoGradGuard no_grad;
  auto src_params = source.named_parameters();
  auto src_buffers = source.named_buffers();
  auto params = source.parameters();
  // Device only: Module::to(dtype) would also convert the I64 BN counters.
  copy->to(params.empty() ? torch::Device(torch::kCPU) : params.front().device());
  for (auto& item : copy->named_parameters()) {
    item.value().copy_(src_params[item.key()]);
    item.value().set_requires_grad(src_params[item.key()].requires_grad());
  }
  for (auto& item : copy->named_buffers()) item.value().copy_(src_buffers[item.key()]);
  copy->train(source.is_training());
  return copy;
}

}  // namespace kestrel::model
