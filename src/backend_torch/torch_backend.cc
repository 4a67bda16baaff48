#include "backend_torch/torch_backend.h"

#include <utility>

#include "app/job_runners.h"
#include "model/device.h"
#include "train/trainer.h"

namespace kestrel::backend_torch {

void RegisterTorchBackend(app::Backends& backends) {
  backends.torch_detector = LoadTorchDetector;
  backends.check_device = model::CheckDeviceAvailable;
  backends.reference_forward = TorchReferenceForward;
  backends.train = TorchTrain;
  // The built-in kinds' runners need the slots above (app/job_runners.h).
  for (app::KindRunner& r : app::BuiltinKindRunners()) backends.runners.push_back(std::move(r));
}

}  // namespace kestrel::backend_torch
