// BindLossKeys (train_config.h) in a TU of its own: loss.cc needs it, and
// the torch-only build (cmake/torch_only.cmake, docs/gpu.md) compiles the
// loss without train_config.cc, whose TrainConfig binds the data loader's
// keys (kestrel_data, OpenCV).
#include <cstdio>

#include "train/train_config.h"

namespace kestrel::train {

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

}  // namespace kestrel::train
