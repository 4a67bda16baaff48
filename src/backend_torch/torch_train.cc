// The train slot (torch_backend.h): train::Train, the LibTorch training
// loop, behind app/backends.h's TrainEntry so the train kind's runner
// (app/train_job.h) is torch-free. train/trainer.h is torch-free: no torch
// precompiled header.
#include "backend_torch/torch_backend.h"
#include "train/trainer.h"

namespace kestrel::backend_torch {

Result<train::TrainSummary> TorchTrain(const train::TrainOptions& options, const train::TrainHooks& hooks) {
  return train::Train(options, hooks);
}

}  // namespace kestrel::backend_torch
