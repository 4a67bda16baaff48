// BindLossKeys (train_config.h) in a TU of its own: loss.cc needs it, and
// the torch-only build (cmake/torch_only.cmake, docs/gpu.md) compiles the
// loss without train_config.cc, whose TrainConfig binds the data loader's
// keys (kestrel_data, OpenCV).
#include "train/train_config.h"

namespace kestrel::train {

void BindLossKeys(OptionSet& s, double* box, double* cls, double* dfl, double* label_smoothing) {
  s.Float("box", box, "box (CIoU) loss gain", Range::Closed(0, 1e4));
  s.Float("cls", cls, "classification (BCE) loss gain", Range::Closed(0, 1e4));
  s.Float("dfl", dfl, "distribution focal loss gain", Range::Closed(0, 1e4));
  // 1 would turn every target into 0.5.
  s.Float("label_smoothing", label_smoothing, "BCE label smoothing epsilon", Range::ClosedOpen(0, 1));
}

}  // namespace kestrel::train
