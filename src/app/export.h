// `export` as a use case: a Kestrel YOLOv8 model written as ONNX by
// src/export and verified before it is reported — the written file run in
// OpenCV DNN (in process) and in ONNX Runtime (the Node helper, when
// installed) against the LibTorch model on the same inputs — plus the one
// JSON view that `kestrel export --json` prints. The runtimes and the
// LibTorch reference are the program's backends (app/backends.h,
// app/onnx_runtime.h): kestrel-torch has both; in a program without them
// an export fails with kFailedPrecondition saying so. Torch-free and
// OpenCV-free, header and .cc. Layout and limits: docs/export.md.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "app/calibration.h"
#include "app/export_keys.h"
#include "app/export_map.h"
#include "core/env.h"
#include "core/status.h"
#include "export/onnx_simplify.h"

namespace kestrel::app {

// ExportRequest, the tolerances and ParseExportImgsz: app/export_keys.h (the
// torch-free key schema shared with export jobs).

// One runtime's check of a written file against LibTorch.
struct RuntimeCheck {
  std::string runtime;  // "opencv-dnn 4.6.0", "onnxruntime 1.23.2" ("onnxruntime" when not found)
  bool ran = false;     // false: the check did not run (`error` says why); it verified nothing
  bool passed = false;  // ran, and scores and relative box diffs within the tolerance
  std::string error;    // why it did not run, or what failed ("" when passed)
  double max_abs_diff = 0, max_abs_diff_boxes = 0, max_abs_diff_scores = 0, max_rel_diff_boxes = 0;
};

// nms=true: the NMS file run in ONNX Runtime against Kestrel's own
// post-processing (eval::PostprocessYolo, predict's options with the
// export's conf/iou/max_det) of the reference raw output on the same inputs:
// LibTorch's, or for half=true the raw FP16 graph's in ONNX Runtime (FP16
// moves scores by ~3e-4, more than the score bound). Per image the same
// number of detections; each reference detection matched (in score order) to
// the unmatched file detection of its class with the highest IoU, which must
// be >= kExportNmsMinIou with |score diff| <= kExportNmsScoreTolerance.
inline constexpr double kExportNmsMinIou = 0.99;
inline constexpr double kExportNmsScoreTolerance = 1e-4;
struct NmsCheck {
  bool ran = false;       // false: ONNX Runtime is not there (error says why)
  bool passed = false;    // ran, and every image's detections matched
  std::string runtime;    // "onnxruntime 1.23.2"
  std::string reference;  // "libtorch" or "onnxruntime raw0 (FP16)"
  std::string error;      // why it did not run or what did not match ("" when passed)
  int images = 0;
  int64_t reference_boxes = 0, file_boxes = 0, matched = 0;
  double min_iou = 1, max_score_diff = 0;  // over the matched pairs
};

struct ExportResult {
  std::string path;     // the written .onnx file
  std::string weights;  // the resolved weights file
  std::string format;   // "onnx"
  std::string arch;     // "yolov8n"
  int nc = 0;
  std::vector<std::string> names;  // the file's `names` metadata, in class order
  // Where `names` came from (ExportModel): "weights" (the weights' own),
  // "model_dataset" (the registered model's dataset version), "data"
  // (data='s dataset) or "default" (class0, class1, ...: none of those had
  // them). names_dataset: the version they came from ("square@v1"), else "".
  std::string names_source, names_dataset;
  int imgsz_h = 0, imgsz_w = 0, batch = 0, opset = 0;
  // Why that imgsz (app/imgsz.h ImgszChoice::why): "(given)", "(from the
  // weights' training args; imgsz= overrides)", ...
  std::string imgsz_why;
  bool dynamic = false;
  bool half = false;  // FP16 graph (ExportRequest::half)
  bool int8 = false;  // INT8 QDQ graph (ExportRequest::int8)
  // simplify=true (ExportRequest::simplify): what exporter::SimplifyOnnxModel
  // did to the written graph; false: the counts of the graph as built
  // (before == after, nothing folded or removed, no value_info).
  bool simplify = false;
  exporter::SimplifyReport simplified;
  // nms=true: output0 is [batch, max_det, 6] detections; `checks` are then
  // of the same graph without the NMS tail, `nms_check` of the file.
  bool nms = false;
  double conf = 0, iou = 0;
  int max_det = 0;
  NmsCheck nms_check;
  // int8: how the activation ranges were found (Int8CalibrationJson).
  struct Int8Calibration {
    std::string dataset, version_id, split;  // "shapes@v1", 64 hex, "train"
    int64_t split_images = 0, candidates = 0;
    int images = 0;         // calibration images run
    std::string method;     // "minmax" | "percentile"
    double percentile = 0;  // when method is percentile
    int64_t quantized_convs = 0, float_convs = 0;
    int64_t tensors = 0;  // activation tensors with a calibrated range
  } calibration;
  std::vector<int64_t> input_shape;   // [batch, 3, imgsz_h, imgsz_w]; -1 on dynamic axes
  std::vector<int64_t> output_shape;  // [batch, 4 + nc, A]; -1 on dynamic axes
  int64_t bytes = 0, nodes = 0, parameters = 0;
  // Verification: the written file in each runtime vs the LibTorch model
  // (eval mode, BN unfused) on `verify_images` images per shape in
  // `verify_shapes`. verified: every runtime that ran passed and OpenCV DNN
  // ran; ONNX Runtime may not have run (checks[1].ran false, with why).
  bool verified = false;
  int verify_images = 0;                            // images over all shapes
  std::vector<std::vector<int64_t>> verify_shapes;  // input shapes run, [B, 3, H, W] each
  std::vector<RuntimeCheck> checks;                 // OpenCV DNN, then ONNX Runtime
  // OpenCV DNN's numbers (checks[0]), the fields of the first slice.
  double max_abs_diff = 0;         // over every value of output0
  double max_abs_diff_boxes = 0;   // rows cx, cy, w, h (input pixels)
  double max_abs_diff_scores = 0;  // class score rows; <= tolerance when verified
  double max_rel_diff_boxes = 0;   // max |diff| / max(1, |value|) on boxes; <= tolerance when verified
  double tolerance = kExportTolerance;
  std::string verification_error;  // why verification failed ("" when verified); only with force
  // The mAP check on request.data's validation split (export_map.h): ran
  // false (and JSON null) when no dataset was given.
  MapCheck map;
};

// The input shapes an export is verified at: [batch, 3, h, w] for a fixed
// graph; for a dynamic one batch and batch + 1 at (h, w) and at a second,
// non-proportional size (h - 32, w + 32), or (64, w + 32) when h is 32.
std::vector<std::vector<int64_t>> VerifyShapes(const ExportRequest& request);

// Runs the ONNX file at `onnx_path` in OpenCV DNN and in ONNX Runtime (when
// LocateOnnxRuntime finds it; otherwise that check has ran false) and the
// LibTorch model of `weights` (the program's reference_forward) on `images_per_shape` synthetic images
// (rounded up to the shape's batch) per shape in `shapes`, and compares every output0 value: one RuntimeCheck
// per runtime, OpenCV DNN first. A runtime that cannot load or run the file gives ran true, passed false and
// the error. Errors: the weights cannot be loaded; kFailedPrecondition naming `model` in a program without a
// reference_forward backend. `half`: an FP16 file, whose OpenCV DNN check does not run (ran false: OpenCV 4.6
// cannot load FLOAT16). `int8`: a QDQ file; when OpenCV DNN cannot load or run it, its check has ran false
// with OpenCV's reason (ONNX Runtime is the one that must pass), and box values count only at anchors
// LibTorch scores >= kExportInt8BoxMinScore. `opencv_unsupported` non-empty (exporter::OnnxModel's reason,
// e.g. a dynamic YOLO11's Shape node): the OpenCV DNN check does not run and its error says why.
Result<std::vector<RuntimeCheck>> VerifyOnnxFile(const std::string& onnx_path, const std::string& weights,
                                                 const std::vector<std::vector<int64_t>>& shapes,
                                                 int images_per_shape, double tolerance, bool half = false,
                                                 bool int8 = false,
                                                 const std::string& opencv_unsupported = "");

// Runs the nms=true file at `nms_path` in ONNX Runtime on `images_per_shape`
// synthetic images per shape and compares its detections with
// eval::PostprocessYolo (best class per anchor, per-class NMS: predict's) of
// the reference raw output (NmsCheck): LibTorch's model of `weights`, or with
// `half` the raw graph at `raw_path` in ONNX Runtime. ONNX Runtime missing:
// ran false with why. Errors: the weights cannot be loaded.
Result<NmsCheck> VerifyOnnxNms(const std::string& nms_path, const std::string& weights,
                               const std::string& raw_path, const std::vector<std::vector<int64_t>>& shapes,
                               int images_per_shape, double conf, double iou, int max_det, bool half);

// Turns `model=` into a weights path (ExportAndRecord resolves registry references).
using ExportWeightsResolver = std::function<Status(std::string* weights)>;

// INT8 calibration images (app/calibration.h's LoadCalibrationImages over
// the home's stores, in ExportAndRecord): up to `count` images of `data`
// from the first `fraction` of its train split, letterboxed into h x w.
using ExportCalibrationLoader =
    std::function<Result<CalibrationSet>(const std::string& data, int count, double fraction, int h, int w)>;

// A dataset version's class names (ExportMapSource::names).
struct DatasetClassNames {
  std::string dataset;  // "square@v1"
  std::vector<std::string> names;
};

// What the mAP check of `data=` (export_map.h) and the registered model's
// dataset version (ExportRequest::model_data) read: the home's stores
// (ExportAndRecord).
struct ExportMapSource {
  // request.data's validation split (app::LoadSplit: NAME[@VERSION]; the CLI
  // imports a data.yaml first). Empty: data= cannot be checked
  // (InvalidArgument naming `data`).
  std::function<Result<LoadedSplit>(const std::string& data)> load;
  store::ArtifactStore* blobs = nullptr;  // the split's images
  // A dataset version's class names (NAME@<version id>, as model_data
  // holds it): the file's names when the weights record none. Empty: a
  // request with model_data cannot name its classes from it (InvalidArgument
  // naming `model`).
  std::function<Result<DatasetClassNames>(const std::string& data)> names;
  // |mAP diff| allowed; < 0: by precision (kExportMapTolerance FP32,
  // kExportHalfMapTolerance FP16; INT8 reports its drop). Tests set 0.
  double tolerance = -1;
};

// The raw-output bound an int8=true export is verified at in ONNX Runtime:
// class scores absolute over every anchor, box values relative (as
// kExportTolerance) but only at anchors whose LibTorch max class score is
// at least kExportInt8BoxMinScore — an anchor nothing is detected at has a
// box INT8 moves by up to half its size (docs/export.md "INT8": measured on
// the reference detector).
inline constexpr double kExportInt8Tolerance = 0.15;
inline constexpr double kExportInt8BoxMinScore = 0.1;

// Validates the request (ValidateExportRequest: InvalidArgument naming the
// key: model, format, imgsz, batch, opset, half, verify_images), resolves and loads the weights,
// writes the ONNX file (checker passed, crash-safe: a temp file beside the
// target, verified there, then renamed in), and verifies it. A failed
// verification (a difference over kExportTolerance in a runtime that ran, or OpenCV cannot run the file)
// removes the temp file, leaves any earlier file at `path` alone and returns FailedPrecondition with the
// measured difference — unless `force`, which writes the file marked unverified and returns it with verified
// false.
// int8=true: the FP32 graph is calibrated first (needs ONNX Runtime, and
// `calibrate` for the images of request.data, or of request.model_data
// when data= is empty: InvalidArgument naming `data` without either,
// CheckExportCalibrationData), then quantized (exporter::QuantizeOnnxModel)
// and verified in ONNX Runtime; OpenCV DNN is tried and reported as not run
// when it cannot load the QDQ file. With dynamic=true the calibration runs
// one image at a time and the QDQ file is verified at VerifyShapes' four
// shapes like any dynamic export.
// Class names (ExportResult::names_source): the weights' own when they
// record nc of them; else request.model_data's (map.names; a class count
// other than the model's: InvalidArgument naming `model`); else data='s
// (its class count is checked with the split: `data`); else class<i>.
// data= (request.data non-empty): the split is loaded first (`map.load`;
// its class count must be the model's and a fixed imgsz square, else
// InvalidArgument naming `data` / `imgsz`), and after the raw check the
// written file's mAP50 and mAP50-95 in every runtime that ran it must be
// LibTorch's within the tolerance (RunExportMapCheck); a failed mAP check
// fails the export as a raw difference does (--force: kept, unverified).
Result<ExportResult> ExportModel(Env& env, const ExportRequest& request,
                                 const ExportWeightsResolver& resolve = {},
                                 const ExportCalibrationLoader& calibrate = {},
                                 const ExportMapSource& map = {});

// {"path", "weights", "format", "arch", "nc", "names", "names_source",
//  "names_dataset" (null unless from a dataset), "imgsz": [h, w],
//  "batch", "dynamic", "opset", "input": {"name", "shape"}, "output":
//  {"name", "shape"} (-1 on dynamic axes), "bytes", "nodes", "parameters",
//  "verification": {"runtime", "reference", "images", "shapes",
//  "max_abs_diff", "max_abs_diff_boxes", "max_abs_diff_scores",
//  "max_rel_diff_boxes" (OpenCV DNN's), "tolerance", "verified", "runtimes":
//  [{"runtime", "ran", "passed", "max_abs_diff", "max_abs_diff_boxes",
//  "max_abs_diff_scores", "max_rel_diff_boxes", "error" (when not passed)}],
//  "map": MapCheckJson or null (no data=), "error" (only when unverified)}}
nlohmann::json ExportResultJson(const ExportResult& result);
// ExportResultJson's "verification" object alone (what the model registry
// keeps with an export's record).
nlohmann::json ExportVerificationJson(const ExportResult& result);
// The options an export was written with, as the registry records them:
// {"imgsz": [h, w], "batch", "opset", "dynamic", "half", "int8", "nms",
// "simplify"} (simplify: true|false).
nlohmann::json ExportOptionsJson(const ExportResult& result);
// A few human-readable lines.
std::string ExportResultText(const ExportResult& result);

}  // namespace kestrel::app
