// OnnxPredictor: runs a detection graph written by `kestrel export` (or any
// YOLOv8 graph with its layout, docs/export.md) through OpenCV DNN, with the
// same letterbox, batching, decode, NMS and mapping back as model::Predictor
// (eval::BatchInference): `kestrel predict/val/compare model=*.onnx`.
//
// Torch-free (the TU is built without the torch precompiled header and
// includes no torch header): nothing on this path touches LibTorch. Torch-
// and OpenCV-free header. Thread-safety: not thread-safe (one per thread).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "app/detector.h"
#include "core/status.h"
#include "eval/inference.h"
#include "eval/plots.h"
#include "eval/val_shapes.h"
#include "export/onnx_info.h"

namespace kestrel::backend_onnx {

// The runtime an OnnxPredictor runs the file in: OpenCV DNN in process
// (predict/val/compare model=*.onnx), or ONNX Runtime through one
// `node run.js --serve` process (export_runtimes.h OpenOnnxRuntimeSession:
// the mAP check of `kestrel export data=` and bench/export_latency; it also
// runs FP16 files, which OpenCV DNN 4.6 cannot load).
enum class OnnxEngine { kOpenCvDnn, kOnnxRuntime };

class OnnxPredictor final : public app::Detector {
 public:
  // Reads `path`, checks the graph's layout (exporter::ReadOnnxDetectorInfo:
  // input [batch, 3, H, W], output [batch, 4 + nc, A]) and has OpenCV DNN
  // load it (CPU, the OpenCV backend). A file with a fixed H, W fixes the
  // input shape: options.imgsz is replaced by the file's side
  // (InvalidArgument naming "imgsz" when H != W: predict letterboxes into a
  // square); with dynamic H, W (`export dynamic=true`) options.imgsz stays.
  // options.batch stays the number of images per BatchInference batch; a
  // fixed-batch file runs its batch size at a time (the last run padded with
  // grey images), a dynamic-batch one the whole batch at once.
  // Errors: NotFound for a missing file, InvalidArgument naming "model" for
  // a file that is not such a graph or that OpenCV DNN cannot load;
  // kOnnxRuntime: FailedPrecondition when ONNX Runtime is not installed
  // (LocateOnnxRuntime's reason) or cannot load the file.
  static Result<std::unique_ptr<OnnxPredictor>> Load(const std::string& path,
                                                     const eval::InferenceOptions& options,
                                                     OnnxEngine engine = OnnxEngine::kOpenCvDnn);
  ~OnnxPredictor() override;

  const exporter::OnnxDetectorInfo& Info() const;
  int NumClasses() const override;
  // The file's `names` metadata; "class<i>" where not recorded.
  const std::vector<std::string>& Names() const override;
  std::string Arch() const override;                       // the file's `arch` metadata
  const eval::InferenceOptions& Options() const override;  // imgsz as in the file
  // "opencv-dnn 4.6.0" or "onnxruntime 1.23.2".
  std::string RuntimeName() const override;
  bool FixedInputSize() const override;  // Info().FixedSize()

  // As model::Predictor::Predict / PredictVal (eval::BatchInference), the
  // images as views: 8-bit RGB, any sizes. In PredictVal of a fixed-size
  // file the shapes must be the file's (shapes.rect false and shapes.imgsz
  // the file's side; else InvalidArgument naming "rect" or "imgsz").
  Result<std::vector<eval::ImagePrediction>> Predict(const std::vector<eval::ImageView>& images) override;
  Result<std::vector<eval::ImagePrediction>> PredictVal(
      const std::vector<eval::ImageSize>& sizes, const eval::ValShapeOptions& shapes,
      const std::function<Result<eval::ImageView>(size_t index)>& load) override;

  eval::StageTimes Timing() const override;
  void ResetTiming();

 private:
  struct Impl;
  explicit OnnxPredictor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kestrel::backend_onnx
