// ONNX export of a Kestrel YOLOv8 detection model, written from the model's
// own description (spec.h's layer plan) and its safetensors weights — no
// LibTorch, no OpenCV. The graph layout and what is not supported yet:
// docs/export.md.
//
// Graph contract: input `images` float32 [batch, 3, imgsz_h, imgsz_w] (RGB,
// 0..1; every axis but the channels dynamic with OnnxExportOptions::dynamic);
// output `output0` float32 [batch, 4 + nc, A], A = sum over strides
// 8/16/32 of (imgsz_h/s)*(imgsz_w/s), anchors ordered P3, P4, P5, each
// row-major (y then x); rows cx, cy, w, h in input pixels, then the class
// sigmoid scores — the same as model::YoloOutput::decoded in eval mode.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/safetensors.h"
#include "core/status.h"
#include "model/spec.h"

namespace kestrel::exporter {

inline constexpr int kMinOpset = 13;  // Split/Softmax/Resize forms used here
inline constexpr int kMaxOpset = 17;  // newest opset the bundled ONNX checker knows
inline constexpr int kDefaultOpset = 17;
inline constexpr int kMaxNmsDetections = 10000;  // max_det's upper bound (nms=true)

struct OnnxExportOptions {
  int imgsz_h = 640;  // input height, a multiple of 32
  int imgsz_w = 640;  // input width, a multiple of 32
  int batch = 1;      // fixed batch dimension, >= 1 (the nominal one when dynamic)
  // Dynamic axes: `images` [batch, 3, height, width] and `output0`
  // [batch, 4 + nc, anchors] as dim_params; the anchor points and strides are
  // computed in the graph from each level's feature map (a zero-weight 1x1
  // Conv with bias 1, CumSum along H and W), not baked for imgsz. Any batch
  // and any H, W that are multiples of 32 then run; imgsz is the nominal size
  // written to the metadata.
  bool dynamic = false;
  // FP16 weights and compute: every float initializer but Resize's `scales`
  // as FLOAT16, a Cast to FLOAT16 after `images` and to FLOAT before
  // `output0`, so the file still takes and returns float32. With dynamic
  // too (the CumSum anchors are whole numbers and halves, exact in FP16 up
  // to 1024 cells). Metadata `half` = "true".
  bool half = false;
  // nms=true: ONNX NonMaxSuppression appended, so `output0` holds final
  // detections, float32 [batch, max_det, 6]: rows x1, y1, x2, y2 (input
  // pixels), score, class id, best score first; rows past the image's
  // detections are all zero (score 0). The same decisions as
  // eval::PostprocessYolo with predict's options: the best class per anchor
  // (first on ties) with score > conf, greedy NMS per class (suppressed when
  // IoU > iou), at most max_det per image. The raw [batch, 4 + nc, A] tensor
  // is the internal `raw0`. Metadata nms, conf, iou, max_det. No max_nms cap
  // (eval's 30000 candidates only matter past 30000 anchors).
  bool nms = false;
  double conf = 0.25;         // [0, 1), key "conf"
  double iou = 0.7;           // [0, 1], key "iou"
  int max_det = 300;          // [1, kMaxNmsDetections], key "max_det"
  int opset = kDefaultOpset;  // default-domain opset, [kMinOpset, kMaxOpset]
  // Class names for the `names` metadata; empty or exactly nc entries.
  std::vector<std::string> names;
  // More metadata_props (e.g. model id, dataset version); must not reuse the
  // exporter's keys (names, stride, imgsz, batch, dynamic, task, kestrel_version, arch, half, opencv_dnn,
  // and with nms: nms, conf, iou, max_det).
  std::map<std::string, std::string> extra_metadata;
};

// InvalidArgument naming the key ("imgsz", "batch", "opset", "names", and
// with nms "conf", "iou", "max_det") on the command line.
Status ValidateOnnxOptions(const model::ModelSpec& spec, const OnnxExportOptions& options);

struct OnnxModel {
  std::string bytes;                            // serialized ModelProto, passed onnx::checker
  int64_t nodes = 0;                            // graph nodes
  int64_t parameters = 0;                       // float values in initializers (BN folded)
  int64_t anchors = 0;                          // A of output0
  int output_channels = 0;                      // 4 + nc (of the raw tensor when nms)
  std::map<std::string, std::string> metadata;  // metadata_props as written
  // Non-empty: why OpenCV DNN 4.6 cannot import this graph (a dynamic YOLO11:
  // the Shape node of its attention), so it is verified and run in ONNX
  // Runtime only; also written as metadata `opencv_dnn` ("unsupported: ...").
  std::string opencv_dnn_unsupported;
};

// Builds the graph for `spec` from `weights` (Kestrel/Ultralytics state-dict
// names, model.<layer>..., F32, F16 or BF16 tensors (widened to float), BatchNorm unfused: conv + bn.weight,
// bn.bias, bn.running_mean, bn.running_var, eps 1e-3), folds every BN into
// its conv (float, the arithmetic of model::Yolo::Fuse), and runs the ONNX checker. InvalidArgument naming
// the tensor for a missing or misshapen one or another dtype; Internal when the checker rejects the
// graph (a bug here).
Result<OnnxModel> BuildOnnxModel(const model::ModelSpec& spec, const SafeTensorFile& weights,
                                 const OnnxExportOptions& options);

// Writes `model.bytes` crash-safely (Env::WriteFileAtomic) and runs the ONNX
// checker on the file as written; Corruption when the file does not check.
Status WriteOnnxFile(Env& env, const OnnxModel& model, const std::string& path);

}  // namespace kestrel::exporter
