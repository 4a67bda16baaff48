// The YOLO detection model (YOLOv8, YOLO11, YOLOv5u) as a LibTorch module
// (the torch layer of src/model). Built by reading the layer plan of spec.h
// into the module registry (internal/layers.h); state-dict names follow the
// common checkpoint layout "model.<layer>.<submodule>..." (model.0.conv.weight,
// model.2.m.0.cv1.bn.running_var, model.22.cv3.1.2.bias, model.22.dfl.conv.weight;
// the Detect layer is model.23 for YOLO11, model.24 for YOLOv5u), so the
// reference's weights load one-to-one (see weights.h).
//
// Thread-safety: a module is not safe for concurrent forward() calls that may
// change state (train mode updates BN running stats); use one per thread.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/spec.h"

namespace kestrel::model {

class BlockImpl;
class DetectImpl;

struct YoloOutput {
  // Raw head maps, always set: [B, 64+nc, H/s, W/s] for s = 8, 16, 32.
  // Channels 0..63: 4 sides (l, t, r, b) x 16 DFL bin logits; then nc class logits.
  std::vector<torch::Tensor> maps;
  // Eval mode only (undefined in train mode): [B, 4+nc, A], A = sum H_i*W_i,
  // rows cx, cy, w, h in input pixels then sigmoid class scores; anchors
  // ordered P3, P4, P5, each row-major (y then x).
  torch::Tensor decoded;
  // Eval mode only: the Detect layer's inputs (the neck's P3, P4, P5 maps,
  // [B, C_i, H/s, W/s]), what model::Predictor pools into embeddings.
  std::vector<torch::Tensor> features;
};

class YoloImpl : public torch::nn::Module {
 public:
  // REQUIRES: spec.nc >= 1 (use CreateModel for validated construction).
  // Weights: PyTorch default conv init, BN (eps 1e-3, momentum 0.03) at 1/0,
  // Detect biases: box 1.0, class log(5 / nc / (640 / stride)^2).
  explicit YoloImpl(const ModelSpec& spec);

  // images: [B, 3, H, W] float, H and W multiples of 32 (non-square is fine),
  // on the module's device. Train mode: BN uses batch statistics (and updates
  // running ones); only `maps` is set. Eval mode: `maps` and `decoded`.
  // Throws c10::Error on a wrong input shape (a caller bug).
  YoloOutput forward(const torch::Tensor& images);  // NOLINT(readability-identifier-naming): LibTorch's name
  // Raw maps (from forward) -> [B, 4+nc, A] as YoloOutput::decoded, in any mode.
  torch::Tensor Decode(const std::vector<torch::Tensor>& maps);

  const ModelSpec& Spec() const { return spec_; }
  int NumClasses() const { return spec_.nc; }
  // Input pixels per cell of each Detect level: {8, 16, 32} (P3, P4, P5) for
  // the built-in graphs; a custom graph's detect_strides.
  std::vector<double> Strides() const;

  // Folds every BatchNorm into its conv for faster inference (outputs equal
  // to ~1e-5). Irreversible; a fused model has different state-dict names
  // (no ".bn."), cannot be trained, saved or loaded into. Idempotent.
  void Fuse();
  bool IsFused() const { return fused_; }

  // Fresh initialization of the class-logit convs (model.22.cv3.<i>.2) with
  // the class bias prior; with `whole_branch` also the two Conv+BN stages
  // before them (model.22.cv3.<i>.{0,1}). Used by fine-tune loading.
  void ResetClassifier(bool whole_branch = false);

 private:
  ModelSpec spec_;
  std::vector<LayerPlan> plan_;
  std::vector<std::shared_ptr<BlockImpl>> blocks_;  // index = layer; null for Detect
  std::shared_ptr<DetectImpl> detect_;
  std::vector<int> last_use_;  // last layer reading each layer's output
  bool fused_ = false;
};
TORCH_MODULE(Yolo);

// Model from a spec string ("n", "yolov8s", "yolov8m.yaml", ...; see
// ParseModelSpec) and class count; InvalidArgument for an unknown spec.
Result<Yolo> CreateModel(const std::string& spec, int nc);
Result<Yolo> CreateModel(const ModelSpec& spec);

// A new model with the same spec, fused state and device, holding a
// copy of every parameter and buffer of `source` (e.g. to start an EMA).
// Parameters of the copy require grad like the source's.
Yolo CloneModel(YoloImpl& source);

}  // namespace kestrel::model
