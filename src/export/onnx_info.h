// What a program that runs an exported detector needs to know about the
// file: the input and output tensors and the metadata_props `kestrel
// export` writes (names, stride, imgsz, batch, arch). Read from the
// ModelProto with the ONNX protobuf classes (OpenCV DNN does not expose
// metadata); torch-free and OpenCV-free. The layout: docs/export.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::exporter {

struct OnnxTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // -1 for a dimension without a fixed size
};

// A YOLOv8 detection graph as `kestrel export` writes it: input float32
// [batch, 3, height, width], output float32 [batch, 4 + nc, anchors]; batch,
// height and width (and so anchors) may be dynamic (`dynamic=true`). An
// `nms=true` export instead outputs final detections, float32
// [batch, max_det, 6] (x1 y1 x2 y2 score class in input pixels, zero rows
// after the last): `nms` is then true, `max_det` its second dimension,
// `anchors` 0, and nc the count of its `names` metadata.
struct OnnxDetectorInfo {
  OnnxTensorInfo input;
  OnnxTensorInfo output;
  int batch = 0;  // input dimensions; -1 where dynamic
  int height = 0;
  int width = 0;
  int nc = 0;           // output channels - 4 (always fixed)
  int64_t anchors = 0;  // last output dimension; -1 where dynamic
  bool nms = false;     // NonMaxSuppression in the graph: output0 [batch, max_det, 6]
  int64_t max_det = 0;  // nms files: rows of output0 per image
  bool FixedSize() const { return height > 0 && width > 0; }
  std::vector<std::string> names;               // metadata `names`, else "class<i>"
  std::string arch;                             // metadata `arch` ("yolov8n"), else "onnx"
  std::string producer;                         // producer_name
  std::map<std::string, std::string> metadata;  // every metadata_props entry
};

// Parses `bytes` (a serialized ModelProto read from `path`, which errors
// name) and checks it is such a graph. InvalidArgument naming field "model"
// for bytes that are not an ONNX model, another input/output layout (one
// input and one output; only batch, height + width together, and anchors
// may be dynamic), an nms=true export (metadata nms or a NonMaxSuppression
// node) whose output is not [batch, max_det, 6] or that has no `names`
// (its class count), or a `names` entry that does not parse or whose count
// is not nc.
Result<OnnxDetectorInfo> ReadOnnxDetectorInfo(const std::string& bytes, const std::string& path);

// The `names` metadata value as the exporter writes it (a Python dict
// literal, `{0: 'cat', 1: 'dog'}`, either quote, backslash escapes) in key
// order. InvalidArgument when it does not parse or the keys are not 0..n-1.
Result<std::vector<std::string>> ParseNamesMetadata(const std::string& text);

}  // namespace kestrel::exporter
