// Running a YOLO detector on images, minus the network: the letterbox into
// the network input (eval/val_shapes.h's one letterbox), batching, decode +
// NMS (postprocess.h), boxes mapped back to original pixels, stage times.
// model::Predictor (LibTorch) and app::OnnxPredictor (OpenCV DNN on an
// exported file) both run through this one implementation, so the two give
// the same boxes for the same network output (docs/evaluation.md).
//
// Torch-free and OpenCV-free header (OpenCV resizes inside the .cc).
// Thread-safety: a BatchInference is not thread-safe (one per thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/status.h"
#include "eval/detection.h"
#include "eval/plots.h"
#include "eval/postprocess.h"
#include "eval/val_shapes.h"

namespace kestrel::eval {

struct InferenceOptions {
  int imgsz = 640;         // square network input side (Predict), multiple of 32 in [32, 4096]
  int batch = 16;          // images per forward (Predict), >= 1
  NmsOptions nms;          // conf / iou / max_det / agnostic / multi_label
  int warmup_batches = 1;  // batches excluded from Timing()
  // Also return each image's embedding (ImagePrediction::embedding) when the
  // network adapter can compute one (LibTorch weights; not an ONNX file).
  bool embeddings = false;
  // InvalidArgument at "command line" naming the field (imgsz, batch,
  // warmup_batches, or the NMS key).
  Status Validate() const;
};

// Mean milliseconds per image of each stage over the images after the
// warm-up batches (all images when every batch was a warm-up one).
struct StageTimes {
  double preprocess_ms = 0;   // letterbox + to float input
  double inference_ms = 0;    // the network forward
  double postprocess_ms = 0;  // decode + NMS + scale back
  int64_t images = 0;         // images the means are over
  double TotalMs() const { return preprocess_ms + inference_ms + postprocess_ms; }
  double Fps() const { return TotalMs() > 0 ? 1000.0 / TotalMs() : 0.0; }
};

struct ImagePrediction {
  int width = 0;  // original image pixels
  int height = 0;
  Letterbox letterbox;                // how it was placed in the input
  std::vector<Detection> detections;  // xyxy, original pixels, descending score
  // InferenceOptions::embeddings and an adapter that computes one: a unit
  // vector describing the whole image as the network sees it (model::
  // Predictor: the detection head's input maps, average- and max-pooled);
  // empty otherwise.
  std::vector<float> embedding;
};

// The network's output for one forward: F32 [n, 4 + nc, anchors] row-major
// (cx, cy, w, h in input pixels, then the nc class scores), owned by the
// network adapter and valid until its next forward.
// A graph with NonMaxSuppression inside (`kestrel export nms=true`) outputs
// final detections instead: `final_rows` > 0 and `data` F32 [n, final_rows,
// 6] (x1 y1 x2 y2 score class in input pixels, zero rows after the last);
// Postprocess then keeps the rows with score >= conf, up to max_det.
struct DecodedOutput {
  const float* data = nullptr;
  int64_t anchors = 0;
  int64_t final_rows = 0;
  // Optional per-image embeddings, F32 [n, embedding_dim] row-major (null
  // when the adapter computes none), copied into ImagePrediction::embedding.
  const float* embedding = nullptr;
  int64_t embedding_dim = 0;
};
// One forward of the network: `input` F32 [n, 3, height, width] row-major,
// RGB in [0, 1], letterboxed with grey 114. Errors are returned as they are.
using DecodedForward = std::function<Result<DecodedOutput>(const float* input, int n, int height, int width)>;

class BatchInference {
 public:
  // REQUIRES: options.Validate() is OK, num_classes >= 1.
  BatchInference(int num_classes, const InferenceOptions& options);

  const InferenceOptions& Options() const { return opts_; }

  // Predicts `images` (8-bit, 3 channels, RGB; any sizes) in batches of
  // Options().batch, each letterboxed into Options().imgsz squared
  // (ComputeSquareGeometry). One ImagePrediction per image, same order.
  // InvalidArgument naming the image index for an empty or non-3-channel view.
  Result<std::vector<ImagePrediction>> Predict(const std::vector<ImageView>& images,
                                               const DecodedForward& forward);

  // Validation preprocessing (val_shapes.h): the images are grouped by
  // PlanValBatches(sizes, shapes) and each is placed into its batch's shape
  // by ComputeValGeometry with shapes.imgsz. `load(i)` returns image i (RGB
  // of sizes[i], valid until the next call) when its batch is filled, so one
  // image is held at a time. Options().imgsz and batch are not used.
  // Predictions are parallel to `sizes`, in original pixels.
  Result<std::vector<ImagePrediction>> PredictVal(const std::vector<ImageSize>& sizes,
                                                  const ValShapeOptions& shapes,
                                                  const std::function<Result<ImageView>(size_t index)>& load,
                                                  const DecodedForward& forward);

  // Decode + NMS of `n` images' output (DecodedOutput layout): detections in
  // input pixels, per image. Not timed.
  std::vector<std::vector<Detection>> Postprocess(const DecodedOutput& decoded, int n) const;

  StageTimes Timing() const;
  void ResetTiming();

 private:
  // Runs `forward` on a filled input batch, maps detections back with each
  // prediction's letterbox and accounts the stage times (preprocessing
  // began at t0_us).
  Status ForwardBatch(const std::vector<float>& input, int height, int width,
                      const std::vector<ImagePrediction*>& preds, int64_t t0_us,
                      const DecodedForward& forward);

  int num_classes_;
  InferenceOptions opts_;
  int batches_seen_ = 0;
  double pre_us_ = 0, inf_us_ = 0, post_us_ = 0;  // after the warm-up batches
  int64_t timed_images_ = 0;
  double all_pre_us_ = 0, all_inf_us_ = 0, all_post_us_ = 0;  // every batch
  int64_t all_images_ = 0;
};

}  // namespace kestrel::eval
