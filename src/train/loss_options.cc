// LossOptions and the loss keys (loss_options.h) in a torch-free TU of their
// own: the trainer's options carry them without LibTorch, and the torch-only
// build (cmake/torch_only.cmake, docs/gpu.md) compiles the loss with them
// but without train_config.cc, whose TrainConfig binds the data loader's keys.
#include "train/loss_options.h"

#include <cmath>
#include <cstdio>

namespace kestrel::train {
namespace {

Status Field(const std::string& field, const std::string& message) {
  return Status::InvalidArgument(message, ErrorLocation{"", 0, field});
}

}  // namespace

void BindLossKeys(OptionSet& s, double* box, double* cls, double* dfl) {
  s.Float("box", box, "box (CIoU) loss gain", Range::Closed(0, 1e4));
  s.Float("cls", cls, "classification (BCE) loss gain", Range::Closed(0, 1e4));
  s.Float("dfl", dfl, "distribution focal loss gain", Range::Closed(0, 1e4));
}

void BindLabelSmoothingKey(OptionSet& s, double* label_smoothing) {
  // The reference's range, so a config it accepted still loads here.
  s.Float("label_smoothing", label_smoothing,
          "deprecated, no effect (the YOLOv8 detection loss never used it)", Range::ClosedOpen(0, 1));
}

std::string LabelSmoothingWarning(double value) {
  if (value == 0) return "";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%g", value);
  return std::string("label_smoothing=") + buf +
         " is deprecated and has no effect: the YOLOv8 detection loss does not smooth its targets "
         "(docs/training.md \"Loss\")";
}

void LossOptions::Bind(OptionSet& set) { BindLossKeys(set, &box_gain, &cls_gain, &dfl_gain); }

Status LossOptions::Validate() const {
  if (num_classes <= 0) return Field("nc", "must be > 0");
  if (reg_max <= 1) return Field("reg_max", "must be > 1");
  if (strides.empty()) return Field("strides", "needs at least one level");
  for (double s : strides) {
    if (!(s > 0) || !std::isfinite(s)) return Field("strides", "must be positive");
  }
  KESTREL_RETURN_IF_ERROR(CheckBoundValues(*this));  // box, cls, dfl
  if (!class_weights.empty()) {
    if (class_weights.size() != static_cast<size_t>(num_classes)) {
      return Field("class_weights", "needs one weight per class (" + std::to_string(num_classes) + "), got " +
                                        std::to_string(class_weights.size()));
    }
    for (double w : class_weights) {
      if (!(w >= 0) || !std::isfinite(w)) return Field("class_weights", "must be finite and >= 0");
    }
  }
  if (assigner.top_k < 1) return Field("top_k", "must be >= 1");
  if (!(assigner.alpha >= 0) || !(assigner.beta >= 0) || !(assigner.eps > 0)) {
    return Field("assigner", "alpha, beta must be >= 0 and eps > 0");
  }
  return Status();
}

}  // namespace kestrel::train
