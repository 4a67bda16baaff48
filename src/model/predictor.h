// Predictor: the one adapter that runs a YOLO model on images and returns
// boxes (val model=, predict, compare all use it). This header is torch-free
// so the CLI compiles without LibTorch headers; predictor.cc is the torch
// layer. Pipeline per image (docs/evaluation.md):
//   decoded RGB (data::DecodeImage) -> letterbox to imgsz x imgsz (scale =
//   min(imgsz/w, imgsz/h), bilinear resize, pad value 114, geometry of
//   eval::ComputeLetterbox) -> float CHW in [0, 1] -> batched forward in eval
//   mode (optionally BN-fused) -> eval::PostprocessYolo (decode + NMS) ->
//   boxes mapped back to original-image pixels (eval::ScaleToOriginal).
// Everything but the forward is eval::BatchInference (eval/inference.h),
// which the ONNX backend's OnnxPredictor (backend_onnx/onnx_predict.h) shares.
//
// Thread-safety: not thread-safe (one Predictor per thread). Torch's intra-op
// thread count is process-wide and set by main() / test setup, not here.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <opencv2/core/mat.hpp>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/status.h"
#include "eval/detection.h"
#include "eval/inference.h"
#include "eval/postprocess.h"
#include "eval/val_shapes.h"
#include "model/spec.h"

namespace kestrel::model {

// The network-independent options and records are eval/inference.h's (the
// ONNX runner shares them); `fuse` is LibTorch's own.
struct PredictorOptions : eval::InferenceOptions {
  bool fuse = true;            // fold BatchNorm into convs (same boxes to ~1e-5)
  std::string device = "cpu";  // cpu, cuda, cuda:N or N (core/device_spec.h); outputs come back to the CPU
};
using StageTimes = eval::StageTimes;
using ImagePrediction = eval::ImagePrediction;

class Predictor {
 public:
  // Reads the weights' spec and names (ReadWeightsInfo), builds the model,
  // loads the weights strictly, switches to eval mode and fuses when asked.
  // Errors: NotFound for a missing file, InvalidArgument for bad options or
  // weights that do not match their spec; LibTorch exceptions are converted.
  static Result<std::unique_ptr<Predictor>> Load(const std::string& weights_path,
                                                 const PredictorOptions& opts);
  ~Predictor();
  Predictor(const Predictor&) = delete;
  Predictor& operator=(const Predictor&) = delete;

  const ModelSpec& Spec() const;
  int NumClasses() const;
  // Class names from the weights' metadata; "class<i>" where not recorded.
  const std::vector<std::string>& Names() const;
  const PredictorOptions& Options() const;

  // Predicts `images` (CV_8UC3, RGB as DecodeImage returns; any sizes) in
  // batches of Options().batch. One ImagePrediction per image, same order.
  Result<std::vector<ImagePrediction>> Predict(const std::vector<cv::Mat>& images);

  // Validation preprocessing (eval/val_shapes.h, what `val model=` uses):
  // the images are grouped by eval::PlanValBatches(sizes, shapes) and each is
  // placed into its batch's shape by eval::ComputeValGeometry with
  // shapes.imgsz. `load(i)` returns image i (CV_8UC3 RGB of sizes[i]) when its
  // batch runs, so one batch is held at a time. Options().imgsz and batch are
  // not used. Predictions are parallel to `sizes`, in original pixels;
  // ImagePrediction::letterbox is the mapping used. Errors of `load` are
  // returned as they are. Timed like Predict.
  Result<std::vector<ImagePrediction>> PredictVal(const std::vector<eval::ImageSize>& sizes,
                                                  const eval::ValShapeOptions& shapes,
                                                  const std::function<Result<cv::Mat>(size_t index)>& load);

  // Forward + decode + NMS on an already letterboxed input: `input` F32
  // [B, 3, H, W] in [0, 1] (H, W multiples of 32). Detections per image in
  // input pixels (no scaling back). Not timed.
  Result<std::vector<std::vector<eval::Detection>>> PredictInput(const SafeTensor& input);
  // Forward + decode only, no NMS (what `kestrel export` checks an exported
  // file against): `input` as for PredictInput; returns YoloOutput::decoded,
  // F32 [B, 4+nc, A] (cx, cy, w, h in input pixels, then class scores). Not timed.
  Result<SafeTensor> ForwardDecoded(const SafeTensor& input);

  StageTimes Timing() const;
  void ResetTiming();

 private:
  struct Impl;
  explicit Predictor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kestrel::model
