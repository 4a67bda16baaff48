// The mAP check of `kestrel export data=` (docs/export.md, "The mAP check"):
// a dataset version's validation split run through the LibTorch model and
// through the written ONNX file in OpenCV DNN and in ONNX Runtime, every
// runtime with the one letterbox and the one NMS (eval::BatchInference,
// multi-label at the validator's conf 0.001 / iou 0.7), scored alike
// (mAP50, mAP50-95), and each runtime's mAP held to LibTorch's within a
// tolerance (0.001 FP32, 0.003 FP16; an INT8 file's drop is reported, not
// held). Torch-free and OpenCV-free header.
#pragma once

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/evaluate.h"
#include "core/status.h"
#include "store/artifact_store.h"

namespace kestrel::app {

// |mAP(runtime) - mAP(LibTorch)| allowed, on mAP50 and on mAP50-95: an FP32
// export (the issue's bound) and an FP16 one (half=true).
inline constexpr double kExportMapTolerance = 1e-3;
inline constexpr double kExportHalfMapTolerance = 3e-3;

// The runtimes an ONNX file's mAP is computed in, in RuntimeCheck order.
inline constexpr int kMapRuntimes = 2;  // OpenCV DNN, ONNX Runtime

struct MapCheckRequest {
  int imgsz = 640;  // square input side: the file's (fixed) or the nominal one (dynamic)
  int batch = 1;    // images per forward: the file's batch (fixed) or the nominal one (dynamic)
  // Rect batches (eval/val_shapes.h) as `kestrel val` runs weights: only a
  // dynamic file can; a fixed one letterboxes every image into imgsz x imgsz.
  bool rect = false;
  double conf = 0.001, iou = 0.7;  // the validator's NMS (multi-label)
  int max_det = 300;
  double tolerance = kExportMapTolerance;
  // INT8: the drop is reported and never fails the check.
  bool report_only = false;
  // Per runtime (OpenCV DNN, ONNX Runtime): "" runs it, else why it does
  // not run (the raw check's reason: FP16 in OpenCV DNN, ONNX Runtime not
  // installed); such a runtime has ran false and fails nothing.
  std::array<std::string, kMapRuntimes> skip;
};

// One runtime's mAP on the split.
struct MapRuntime {
  std::string runtime;  // "libtorch", "opencv-dnn 4.6.0", "onnxruntime 1.23.2" ("onnxruntime" when absent)
  bool ran = false;     // false: not run (`error` says why)
  bool passed = false;  // ran, and both diffs within the tolerance (or report_only)
  bool scored = false;  // the mAP below was computed (false: not run, or the runtime failed)
  double map50 = 0, map50_95 = 0;
  double diff_map50 = 0, diff_map50_95 = 0;  // this runtime's minus LibTorch's (0 for LibTorch)
  double ms_per_image = 0;                   // wall time of the whole run (decode, letterbox, NMS included)
  std::string error;                         // why not run, what failed, or "" when passed
};

struct MapCheck {
  bool ran = false;        // false: not run; `error` says why ("" when no dataset was named or known)
  std::string data;        // the dataset reference as resolved ("shapes@<version id>")
  std::string dataset;     // "shapes@v2"
  std::string version_id;  // 64 hex
  std::string split;       // "val"
  int images = 0;
  int imgsz = 0, batch = 0;
  bool rect = false;
  double conf = 0, iou = 0;
  double tolerance = 0;
  bool report_only = false;
  MapRuntime libtorch;               // the reference
  std::vector<MapRuntime> runtimes;  // OpenCV DNN, ONNX Runtime
  bool passed = false;               // every runtime that ran passed (and one ran at all)
  std::string error;                 // why it failed or did not run ("" when passed)
};

// Runs `weights` (LibTorch) and `onnx_path` (each runtime not skipped) on
// `loaded`'s split and compares mAP50 and mAP50-95. The split must have the
// model's class count (InvalidArgument naming `nc` otherwise, from the
// caller's check). A runtime that cannot load or run the file gives ran
// true, passed false and the error. Errors: the weights cannot be loaded,
// an image cannot be read, or LibTorch fails.
Result<MapCheck> RunExportMapCheck(store::ArtifactStore& blobs, const LoadedSplit& loaded,
                                   const std::string& onnx_path, const std::string& weights,
                                   const MapCheckRequest& request);

// {"ran": false, "error"} when not run, else {"data", "dataset",
// "version_id", "split", "images", "imgsz", "batch", "rect", "conf", "iou",
// "tolerance", "report_only", "passed", "libtorch": {"runtime", "map50",
// "map50_95", "ms_per_image"}, "runtimes": [{"runtime", "ran", "passed",
// "map50", "map50_95", "diff_map50", "diff_map50_95", "ms_per_image",
// "error" (unless passed)}], "error" (unless passed)}.
nlohmann::json MapCheckJson(const MapCheck& check);
// "mAP on shapes@v2 val (24 images, imgsz 320): LibTorch mAP50 ... / mAP50-95
// ...", then one line per runtime; "" when not run without a reason.
std::string MapCheckText(const MapCheck& check);

}  // namespace kestrel::app
