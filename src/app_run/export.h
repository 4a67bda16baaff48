// `export` as a use case: a Kestrel YOLOv8 model written as ONNX by
// src/export and verified before it is reported — the written file run in
// OpenCV DNN (in process) and in ONNX Runtime (the Node helper, when
// installed: export_runtimes.h) against the LibTorch model on the same
// inputs — plus the one JSON view that `kestrel export --json` prints.
// Torch-free and OpenCV-free header (LibTorch runs in export.cc, the ONNX
// runtimes in export_runtimes.cc). Layout and limits: docs/export.md.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace kestrel::app {

// What still verifies an FP32 export, comparing the raw output0 values of
// the ONNX file (OpenCV DNN) and LibTorch: |diff| <= 1e-4 on class scores
// (0..1) and |diff| <= 1e-4 * max(1, |value|) on box values (input pixels).
// Boxes are held to a relative bound because at imgsz 640 one float ulp of a
// coordinate is 3e-5..6e-5 px, so two conv implementations differ by ~1e-4 px
// in the last bits alone (docs/export.md, "Verification").
inline constexpr double kExportTolerance = 1e-4;
// The same bound for a half=true (FP16) export, which ONNX Runtime checks
// alone: FP16 keeps 11 significant bits (measured on the reference detector
// at 320 on the synthetic images: 3.0e-4 on scores, 8.3e-3 relative on boxes).
inline constexpr double kExportHalfTolerance = 2e-2;

struct ExportRequest {
  std::string model;            // weights file (or a reference the resolver turns into one)
  std::string format = "onnx";  // the only format today
  int imgsz_h = 640;            // input height, a multiple of 32 (the nominal one when dynamic)
  int imgsz_w = 640;            // input width, a multiple of 32
  int batch = 1;                // batch dimension (the nominal one when dynamic)
  int opset = 17;               // ONNX default-domain opset, 13..17
  // Dynamic batch, height and width (exporter::OnnxExportOptions::dynamic);
  // verified at two batch sizes x two input sizes (VerifyShapes).
  bool dynamic = false;
  // FP16 weights and compute, float32 input/output (exporter::
  // OnnxExportOptions::half). OpenCV DNN 4.6 cannot load FLOAT16
  // initializers, so ONNX Runtime alone verifies it, at
  // max(tolerance, kExportHalfTolerance); without ONNX Runtime it fails.
  bool half = false;
  // Where to write; "" = beside a weights file (<stem>.onnx), or
  // ./<reference with '@' as '_'>.onnx for a registry reference.
  std::string output;
  int verify_images = 4;  // synthetic letterbox-like images per verified shape, >= 1
  // Keep a file that failed verification, with metadata_props
  // kestrel_verification = "unverified: <why>" (ExportResult::verified false).
  bool force = false;
  double tolerance = kExportTolerance;  // the bound of kExportTolerance's comment; tests tighten it
};

// One runtime's check of a written file against LibTorch.
struct RuntimeCheck {
  std::string runtime;  // "opencv-dnn 4.6.0", "onnxruntime 1.23.2" ("onnxruntime" when not found)
  bool ran = false;     // false: the check did not run (`error` says why); it verified nothing
  bool passed = false;  // ran, and scores and relative box diffs within the tolerance
  std::string error;    // why it did not run, or what failed ("" when passed)
  double max_abs_diff = 0, max_abs_diff_boxes = 0, max_abs_diff_scores = 0, max_rel_diff_boxes = 0;
};

struct ExportResult {
  std::string path;     // the written .onnx file
  std::string weights;  // the resolved weights file
  std::string format;   // "onnx"
  std::string arch;     // "yolov8n"
  int nc = 0;
  std::vector<std::string> names;
  int imgsz_h = 0, imgsz_w = 0, batch = 0, opset = 0;
  bool dynamic = false;
  bool half = false;                  // FP16 graph (ExportRequest::half)
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
};

// "640", "320,256" or "[320, 256]" (Ultralytics' [h, w]) as {height,
// width}; InvalidArgument naming `imgsz` otherwise (the range check is
// ExportModel's).
Result<std::pair<int, int>> ParseExportImgsz(std::string_view text);

// The input shapes an export is verified at: [batch, 3, h, w] for a fixed
// graph; for a dynamic one batch and batch + 1 at (h, w) and at a second,
// non-proportional size (h - 32, w + 32), or (64, w + 32) when h is 32.
std::vector<std::vector<int64_t>> VerifyShapes(const ExportRequest& request);

// Runs the ONNX file at `onnx_path` in OpenCV DNN and in ONNX Runtime (when
// LocateOnnxRuntime finds it; otherwise that check has ran false) and the
// LibTorch model of `weights` on `images_per_shape` synthetic images (rounded
// up to the shape's batch) per shape in `shapes`, and compares every output0
// value: one RuntimeCheck per runtime, OpenCV DNN first. A runtime that
// cannot load or run the file gives ran true, passed false and the error.
// Errors: the weights cannot be loaded. `half`: an FP16 file, whose OpenCV
// DNN check does not run (ran false: OpenCV 4.6 cannot load FLOAT16).
Result<std::vector<RuntimeCheck>> VerifyOnnxFile(const std::string& onnx_path, const std::string& weights,
                                                 const std::vector<std::vector<int64_t>>& shapes,
                                                 int images_per_shape, double tolerance, bool half = false);

// Turns `model=` into a weights path (the CLI resolves registry references).
using ExportWeightsResolver = std::function<Status(std::string* weights)>;

// Validates the request (InvalidArgument naming the key: format, imgsz,
// batch, opset, verify_images), resolves and loads the weights,
// writes the ONNX file (checker passed, crash-safe: a temp file beside the
// target, verified there, then renamed in), and verifies it. A failed
// verification (a difference over kExportTolerance in a runtime that ran, or OpenCV cannot run the file)
// removes the temp file, leaves any earlier file at `path` alone and returns FailedPrecondition with the
// measured difference — unless `force`, which writes the file marked unverified and returns it with verified
// false.
Result<ExportResult> ExportModel(Env& env, const ExportRequest& request,
                                 const ExportWeightsResolver& resolve = {});

// {"path", "weights", "format", "arch", "nc", "names", "imgsz": [h, w],
//  "batch", "dynamic", "opset", "input": {"name", "shape"}, "output":
//  {"name", "shape"} (-1 on dynamic axes), "bytes", "nodes", "parameters",
//  "verification": {"runtime", "reference", "images", "shapes",
//  "max_abs_diff", "max_abs_diff_boxes", "max_abs_diff_scores",
//  "max_rel_diff_boxes" (OpenCV DNN's), "tolerance", "verified", "runtimes":
//  [{"runtime", "ran", "passed", "max_abs_diff", "max_abs_diff_boxes",
//  "max_abs_diff_scores", "max_rel_diff_boxes", "error" (when not passed)}],
//  "error" (only when unverified)}}
nlohmann::json ExportResultJson(const ExportResult& result);
// A few human-readable lines.
std::string ExportResultText(const ExportResult& result);

}  // namespace kestrel::app
