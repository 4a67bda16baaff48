// `predict` as a use case: a model run over an image file or a folder, the
// run folder it writes (annotated JPEGs, YOLO txt, one JSON per image) and
// the one JSON view of the result that `kestrel predict --json` prints and
// a server returns. Torch-free and OpenCV-free header (the predictor and
// the drawing live in predict.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "eval/detection.h"
#include "eval/plots.h"

namespace kestrel::app {

struct PredictRequest {
  std::string model;   // weights file (or a reference the resolver turns into one)
  std::string source;  // an image file or a folder of images (not recursive)
  double conf = 0.25, iou = 0.7;
  int imgsz = 640, batch = 1, max_det = 300;
  std::string device = "cpu";                           // cpu, cuda, cuda:N or N (core/device_spec.h)
  bool save = true, save_txt = true, save_json = true;  // <stem>.jpg, labels/<stem>.txt, <stem>.json
  std::string project = "runs/predict", name;           // name "" = predict, predict2, ...
  bool exist_ok = false;
};

// Mean milliseconds per image after the predictor's warm-up batch.
struct PredictSpeed {
  double preprocess_ms = 0, inference_ms = 0, postprocess_ms = 0;
  int64_t images = 0;
  double fps = 0;
  int imgsz = 0;  // the square network input side
};

struct PredictedImage {
  std::string source;                       // the path as found (folder + file name)
  int width = 0, height = 0;                // original pixels (after EXIF orientation)
  std::vector<eval::Detection> detections;  // xyxy in original pixels, descending score
};

struct PredictResult {
  std::string dir;                     // the run folder, complete (written beside it, then moved in)
  std::vector<std::string> names;      // the model's class names
  std::vector<PredictedImage> images;  // in source order (a folder: sorted file names)
  PredictSpeed speed;
};

// Turns `model=` into a weights path (the CLI resolves registry references
// such as NAME@vN here). Called once, after the source was checked.
using WeightsResolver = std::function<Status(std::string* weights)>;

// Checks the source (kNotFound naming it: missing, or a folder without
// images), resolves and loads the model, predicts every image `batch` at a
// time, then writes the run folder. Nothing is written for a bad source or
// model; a failure while writing leaves no run folder. `model` and
// `source` must be non-empty (kInvalidArgument naming the field otherwise).
Result<PredictResult> Predict(Env& env, const PredictRequest& request, const WeightsResolver& resolve = {});

// The JSON views (`kestrel predict --json` prints PredictResultJson).
// Detection: {"class_id", "name" ("" when out of range), "confidence", "box_xyxy"}.
nlohmann::json DetectionsJson(const std::vector<eval::Detection>& detections,
                              const std::vector<std::string>& names);
// {"source", "width", "height", "detections"}: also the content of <stem>.json.
nlohmann::json PredictedImageJson(const PredictedImage& image, const std::vector<std::string>& names);
// {"preprocess_ms", "inference_ms", "postprocess_ms", "images", "fps"}.
nlohmann::json PredictSpeedJson(const PredictSpeed& speed);
// {"ok": true, "dir", "speed", "images": [PredictedImageJson...]}.
nlohmann::json PredictResultJson(const PredictResult& result);
// The human summary: one line per image with counts per class, the speed
// line and "results saved to DIR".
std::string PredictResultText(const PredictResult& result);
// "speed: ...ms preprocess, ... per image at WxH (N FPS, M images after warm-up)\n".
std::string PredictSpeedText(const PredictSpeed& speed);

// YOLO txt of one image: "class cx cy w h conf" normalized, 6 decimals.
std::string YoloTxt(const PredictedImage& image);

// JPEG bytes of `image` (8-bit, 3 channels, RGB) with every detection drawn:
// a class-coloured box and a "name 0.87" caption in the shared text renderer
// (data/text_render.h). OpenCV failures become kInternal.
Result<std::string> RenderDetectionsJpeg(const eval::ImageView& rgb,
                                         const std::vector<eval::Detection>& detections,
                                         const std::vector<std::string>& names);

}  // namespace kestrel::app
