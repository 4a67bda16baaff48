// ExportKeys: the key schema of `kestrel export` (docs/export.md), bound once
// for the command and for export jobs (`kestrel submit kind=export`,
// app/jobs.h), so the two cannot disagree on a name, range or message — the
// export counterpart of val_keys.h. Torch-free and OpenCV-free: the job
// system and the server validate export keys without LibTorch; the export
// itself is app/export.h's ExportModel, which validates its request with
// the same ValidateExportRequest first.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "core/options.h"
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
// The opsets the exporter writes (exporter::kMinOpset/kMaxOpset; export.cc
// static_asserts they agree).
inline constexpr int kExportMinOpset = 13;
inline constexpr int kExportMaxOpset = 17;
// max_det's upper bound with nms=true (exporter::kMaxNmsDetections).
inline constexpr int kExportMaxDet = 10000;

struct ExportRequest {
  std::string model;            // weights file (or a reference the resolver turns into one)
  std::string format = "onnx";  // the only format today
  // Input height and width, multiples of 32 (the nominal ones when dynamic);
  // 0,0: not given, the weights' training size (app/imgsz.h; ExportKeys' default).
  int imgsz_h = 640;
  int imgsz_w = 640;
  int batch = 1;   // batch dimension (the nominal one when dynamic)
  int opset = 17;  // ONNX default-domain opset, 13..17
  // Dynamic batch, height and width (exporter::OnnxExportOptions::dynamic);
  // verified at two batch sizes x two input sizes (VerifyShapes).
  bool dynamic = false;
  // FP16 weights and compute, float32 input/output (exporter::
  // OnnxExportOptions::half). OpenCV DNN 4.6 cannot load FLOAT16
  // initializers, so ONNX Runtime alone verifies it, at
  // max(tolerance, kExportHalfTolerance); without ONNX Runtime it fails.
  bool half = false;
  // simplify=true (default, as Ultralytics): exporter::SimplifyOnnxModel
  // over the graph as built (and quantized): constant folding, no-op and
  // dead-node removal, shape inference (value_info); false writes the graph
  // as built.
  bool simplify = true;
  // Where to write; "" = beside a weights file (<stem>.onnx), or
  // ./<reference with '@' as '_'>.onnx for a registry reference.
  std::string output;
  int verify_images = 4;  // synthetic letterbox-like images per verified shape, >= 1
  // Keep a file that failed verification, with metadata_props
  // kestrel_verification = "unverified: <why>" (ExportResult::verified false).
  bool force = false;
  double tolerance = kExportTolerance;  // the bound of kExportTolerance's comment; tests tighten it
  // INT8 (docs/export.md "INT8"): a QDQ graph (exporter::QuantizeOnnxModel)
  // whose activation ranges come from the FP32 graph run in ONNX Runtime on
  // `calib` images of `data`'s train split (its val split when it has no
  // train images), taken evenly from the first `fraction` of it, letterboxed
  // as validation does; `calib_method` minmax (default) or percentile (99.99).
  // Verified in ONNX Runtime at max(tolerance, kExportInt8Tolerance).
  bool int8 = false;
  int calib = 64;                       // calibration images, 1..1024
  double fraction = 1.0;                // (0, 1]: the share of the split calibration draws from
  std::string calib_method = "minmax";  // minmax | percentile (99.99)
  // nms=true: NonMaxSuppression in the graph, `output0` = final detections
  // [batch, max_det, 6] (exporter::OnnxExportOptions::nms, docs/export.md
  // "NMS in the graph"), conf/iou/max_det baked in (predict's defaults).
  // OpenCV DNN 4.6 cannot run NonMaxSuppression: the raw graph is checked in
  // both runtimes, the NMS file in ONNX Runtime against eval::PostprocessYolo
  // on LibTorch's output; without ONNX Runtime it fails.
  bool nms = false;
  double conf = 0.25;  // nms: keep scores > conf, [0, 1)
  double iou = 0.7;    // nms: suppress at IoU > iou, [0, 1]
  int max_det = 300;   // nms: rows of output0 per image, 1..kExportMaxDet
  // The dataset (NAME[@VERSION] or a data.yaml, as `val data=`): int8's
  // calibration images (and the mAP check's validation split).
  std::string data;
  // Not a key: the dataset version a registered model (model=NAME@vN) was
  // trained on, "NAME@<version id>", set once model= is resolved (the CLI,
  // an export job's child); "" for a weights file. The file's class names
  // when the weights record none, and int8's calibration set when data= is
  // empty (CheckExportCalibrationData).
  std::string model_data;
  // Not a key: metadata_props the file carries beside the exporter's own
  // (names, stride, imgsz, task, kestrel version...): for a registered model
  // `model` (NAME@vN), `model_id` and, when it was trained on a registered
  // dataset version, `dataset` and `dataset_version_id`; set once model= is
  // resolved, like model_data.
  std::map<std::string, std::string> provenance;
};

// "640", "320,256" or "[320, 256]" (Ultralytics' [h, w]) as {height,
// width}; InvalidArgument naming `imgsz` otherwise (the range check is
// ValidateExportRequest's).
Result<std::pair<int, int>> ParseExportImgsz(std::string_view text);

// Every check of a request that needs no weights: model= present, format,
// imgsz (multiples of 32 in [32, 8192], or 0,0: not given, ExportModel
// takes the weights' training size, app/imgsz.h), batch, opset,
// verify_images, tolerance. InvalidArgument located at ("command line", 0,
// KEY). ExportModel runs it first; `kestrel submit kind=export` runs it at
// submit.
Status ValidateExportRequest(const ExportRequest& request);

// int8=true calibrates on a dataset: data=, or by default a registered
// model's own dataset version (model_data). A weights file without data=:
// InvalidArgument naming `data`. Needs model= resolved, so it runs after
// ValidateExportRequest: in ExportModel, and at `submit kind=export` once
// the model is pinned.
Status CheckExportCalibrationData(const ExportRequest& request);

// The keys as typed: `imgsz` is kept as text until Request() parses it.
struct ExportKeys {
  ExportRequest r;
  std::string imgsz;  // parsed by ParseExportImgsz; "" = not given: the weights' training size

  void Bind(OptionSet& s);
  // The request the keys describe (imgsz parsed), validated by
  // ValidateExportRequest: the first error names its key.
  Result<ExportRequest> Request() const;
};

}  // namespace kestrel::app
