// Detector: what predict, val model= and compare run, whatever executes the
// network: model::Predictor (LibTorch, wrapped in predict.cc/evaluate.cc) or
// OnnxPredictor (an exported file in OpenCV DNN). The file pipelines written
// against it (predict_files.cc, score_split.cc) are torch-free, so the
// LibTorch-free `kestrel-deploy` and `kestrel` share them (docs/deploy.md).
// Torch-free and OpenCV-free header. Thread-safety: one per thread.
#pragma once

#include <cstddef>
#include <functional>
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

}  // namespace kestrel::app
