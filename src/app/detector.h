// Detector: what predict, val model= and compare run, whatever executes the
// network. The backends provide them (app/backends.h): src/backend_torch
// wraps model::Predictor (LibTorch weights), src/backend_onnx runs an
// exported file (OpenCV DNN or ONNX Runtime). The use cases written against
// it (predict.h, score_split.h, evaluate.h) are the same in every program
// (docs/deploy.md). Torch-free and OpenCV-free header. Thread-safety: one
// Detector per thread.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/inference.h"
#include "eval/val_shapes.h"

namespace kestrel::app {

class Detector {
 public:
  virtual ~Detector() = default;
  Detector() = default;
  Detector(const Detector&) = delete;
  Detector& operator=(const Detector&) = delete;
  Detector(Detector&&) = delete;
  Detector& operator=(Detector&&) = delete;

  virtual int NumClasses() const = 0;
  // Class names; "class<i>" (or the model's own fallback) where not recorded.
  virtual const std::vector<std::string>& Names() const = 0;
  // The architecture's name ("yolov8n", or what the ONNX file records).
  virtual std::string Arch() const = 0;
  // imgsz (the network's square side), batch and NMS settings in effect.
  virtual const eval::InferenceOptions& Options() const = 0;
  // eval::BatchInference over the images (8-bit RGB views, any sizes).
  virtual Result<std::vector<eval::ImagePrediction>> Predict(const std::vector<eval::ImageView>& images) = 0;
  // The validator's batches (eval/val_shapes.h); `load(i)` returns image i,
  // valid until the next call of `load`.
  virtual Result<std::vector<eval::ImagePrediction>> PredictVal(
      const std::vector<eval::ImageSize>& sizes, const eval::ValShapeOptions& shapes,
      const std::function<Result<eval::ImageView>(size_t index)>& load) = 0;
  // Mean per-image stage times after the warm-up batch.
  virtual eval::StageTimes Timing() const = 0;
  // True when the network takes one input side only (an ONNX file exported
  // without dynamic=true): validation then letterboxes every image into
  // Options().imgsz (rect=false).
  virtual bool FixedInputSize() const { return false; }
  // The runtime when it is not LibTorch ("opencv-dnn 4.6.0"), else "".
  virtual std::string RuntimeName() const { return ""; }
};

// Where a detector runs: `device` for LibTorch weights (cpu, cuda, cuda:N or
// N: core/device_spec.h; ONNX files run on the CPU), `runtime` for ONNX
// files ("opencv": OpenCV DNN in process; "onnxruntime": ONNX Runtime
// through node).
struct DetectorPlacement {
  std::string device = "cpu";
  std::string runtime = "opencv";
};

// Loads the detector for a resolved weights path with `options` (imgsz,
// batch, NMS). An ONNX file with a fixed input side replaces options.imgsz.
using DetectorLoader = std::function<Result<std::unique_ptr<Detector>>(
    const std::string& weights, const eval::InferenceOptions& options, const DetectorPlacement& where)>;

// True when `model` names an ONNX file (extension `.onnx`, any case): the
// rule LoadDetector (app/backends.h) dispatches by.
bool IsOnnxModelPath(const std::string& model);

}  // namespace kestrel::app
