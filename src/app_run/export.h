// `export` as a use case: a Kestrel YOLOv8 model written as ONNX by
// src/export and verified before it is reported — the written file run in
// OpenCV DNN (in process) against the LibTorch model on the same inputs —
// plus the one JSON view that `kestrel export --json` prints. Torch-free and
// OpenCV-free header (both run in export.cc). Layout and limits:
// docs/export.md.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
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

struct ExportRequest {
  std::string model;            // weights file (or a reference the resolver turns into one)
  std::string format = "onnx";  // the only format today
  int imgsz = 640;              // square input side, a multiple of 32
  int batch = 1;                // fixed batch dimension
  int opset = 17;               // ONNX default-domain opset, 13..17
  bool dynamic = false;         // dynamic axes: not supported yet (InvalidArgument)
  // Where to write; "" = beside a weights file (<stem>.onnx), or
  // ./<reference with '@' as '_'>.onnx for a registry reference.
  std::string output;
  int verify_images = 4;  // synthetic letterbox-like images run through both runtimes, >= 1
  // Keep a file that failed verification, with metadata_props
  // kestrel_verification = "unverified: <why>" (ExportResult::verified false).
  bool force = false;
  double tolerance = kExportTolerance;  // the bound of kExportTolerance's comment; tests tighten it
};

struct ExportResult {
  std::string path;     // the written .onnx file
  std::string weights;  // the resolved weights file
  std::string format;   // "onnx"
  std::string arch;     // "yolov8n"
  int nc = 0;
  std::vector<std::string> names;
  int imgsz = 0, batch = 0, opset = 0;
  std::vector<int64_t> input_shape;   // [batch, 3, imgsz, imgsz]
  std::vector<int64_t> output_shape;  // [batch, 4 + nc, A]
  int64_t bytes = 0, nodes = 0, parameters = 0;
  // Verification: OpenCV DNN on the written file vs the LibTorch model (eval
  // mode, BN unfused) on `verify_images` images.
  bool verified = false;
  int verify_images = 0;
  double max_abs_diff = 0;         // over every value of output0
  double max_abs_diff_boxes = 0;   // rows cx, cy, w, h (input pixels)
  double max_abs_diff_scores = 0;  // class score rows; <= tolerance when verified
  double max_rel_diff_boxes = 0;   // max |diff| / max(1, |value|) on boxes; <= tolerance when verified
  double tolerance = kExportTolerance;
  std::string verification_error;  // why verification failed ("" when verified); only with force
};

// Turns `model=` into a weights path (the CLI resolves registry references).
using ExportWeightsResolver = std::function<Status(std::string* weights)>;

// Validates the request (InvalidArgument naming the key: format, imgsz,
// batch, opset, dynamic, verify_images), resolves and loads the weights,
// writes the ONNX file (checker passed, crash-safe: a temp file beside the
// target, verified there, then renamed in), and verifies it. A failed
// verification (a difference over kExportTolerance, or OpenCV cannot run the file) removes
// the temp file, leaves any earlier file at `path` alone and returns
// FailedPrecondition with the measured difference — unless `force`, which
// writes the file marked unverified and returns it with verified false.
Result<ExportResult> ExportModel(Env& env, const ExportRequest& request,
                                 const ExportWeightsResolver& resolve = {});

// {"path", "weights", "format", "arch", "nc", "names", "imgsz", "batch",
//  "opset", "input": {"name", "shape"}, "output": {"name", "shape"}, "bytes",
//  "nodes", "parameters", "verification": {"runtime", "reference",
//  "images", "max_abs_diff", "max_abs_diff_boxes", "max_abs_diff_scores",
//  "max_rel_diff_boxes", "tolerance", "verified", "error" (only when
//  unverified)}}
nlohmann::json ExportResultJson(const ExportResult& result);
// A few human-readable lines.
std::string ExportResultText(const ExportResult& result);

}  // namespace kestrel::app
