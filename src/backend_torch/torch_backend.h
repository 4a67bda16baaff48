// The LibTorch backend (README.md): what kestrel-torch lends the use cases
// through app/backends.h. Included only by main.cc, bench programs and this
// module's tests; the use cases reach it through app::Backends. Torch-free
// header.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/backends.h"
#include "app/detector.h"
#include "app/onnx_runtime.h"
#include "core/status.h"
#include "eval/inference.h"

namespace kestrel::backend_torch {

// Fills the LibTorch slots of `backends` (app/backends.h): torch_detector,
// check_device (model/device.h: the CUDA devices LibTorch sees),
// reference_forward, train, and the runners of the built-in job kinds
// (app/job_runners.h BuiltinKindRunners: train, val, export), which need them.
// REQUIRES: before app::InstallBackends (main()).
void RegisterTorchBackend(app::Backends& backends);

// The torch_detector slot: LibTorch weights (.safetensors, .pt) run by
// model::Predictor on where.device (cpu, cuda, cuda:N or N), BatchNorm fused,
// with `options` (imgsz, batch, NMS). Errors: NotFound for a missing file,
// InvalidArgument for weights that do not match their spec or a device this
// machine lacks (model::Predictor::Load's).
Result<std::unique_ptr<app::Detector>> LoadTorchDetector(const std::string& weights,
                                                         const eval::InferenceOptions& options,
                                                         const app::DetectorPlacement& where);

// The reference_forward slot (torch_reference.cc): model::Predictor of
// `weights` with BatchNorm not fused (the network as trained), each input
// forwarded and decoded without NMS (app/backends.h ReferenceForward).
// Errors: model::Predictor::Load's; InvalidArgument for an input that is
// not [B, 3, H, W].
Result<std::vector<app::FloatTensor>> TorchReferenceForward(const std::string& weights,
                                                            const std::vector<app::FloatTensor>& inputs);

// The train slot (torch_train.cc): train::Train.
Result<train::TrainSummary> TorchTrain(const train::TrainOptions& options, const train::TrainHooks& hooks);

}  // namespace kestrel::backend_torch
