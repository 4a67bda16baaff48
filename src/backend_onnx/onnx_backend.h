// The ONNX backend (README.md): what kestrel-torch and kestrel-deploy lend
// the use cases through app/backends.h — exported .onnx files run in OpenCV
// DNN or ONNX Runtime. Included only by main.cc, bench programs and this
// module's tests; the use cases reach it through app::Backends. Torch-free
// and OpenCV-free header.
#pragma once

#include <memory>
#include <string>

#include "app/backends.h"
#include "app/detector.h"
#include "core/status.h"
#include "eval/inference.h"

namespace kestrel::backend_onnx {

// Fills the ONNX slots of `backends` (app/backends.h): onnx_detector,
// opencv_dnn, locate_onnxruntime, onnxruntime, onnxruntime_output_stats.
// REQUIRES: before app::InstallBackends (main()).
void RegisterOnnxBackend(app::Backends& backends);

// The onnx_detector slot: an .onnx file run by OnnxPredictor (onnx_predict.h)
// in where.runtime ("opencv": OpenCV DNN; "onnxruntime": ONNX Runtime
// through node); its input side replaces options.imgsz when fixed. A
// runtime other than those is kInvalidArgument naming `runtime`; the rest
// are OnnxPredictor::Load's errors (naming `model`).
Result<std::unique_ptr<app::Detector>> LoadOnnxDetector(const std::string& weights,
                                                        const eval::InferenceOptions& options,
                                                        const app::DetectorPlacement& where);

}  // namespace kestrel::backend_onnx
