// train::CheckBeforeStart (trainer.h): in kestrel_train beside Train(),
// because the device check is LibTorch's (model/device.h, torch_compat.cc);
// this file includes no LibTorch header itself.
#include "model/device.h"
#include "train/trainer.h"

namespace kestrel::train {

Status CheckBeforeStart(const TrainOptions& o) {
  if (!o.resume.empty()) {
    TrainConfig only_resume;
    only_resume.resume = o.resume;
    return only_resume.ValidateFiles();
  }
  KESTREL_RETURN_IF_ERROR(o.Validate());
  KESTREL_RETURN_IF_ERROR(o.ValidateFiles());
  // Whether this machine has the device (submit cannot know: a worker may).
  return model::ResolveDevice(o.device).GetStatus();
}

}  // namespace kestrel::train
