// simplify=true (`kestrel export`, docs/export.md "simplify"): small graph
// passes over a serialized ModelProto written by BuildOnnxModel (FP32, FP16,
// INT8 QDQ, nms=true, dynamic), in the spirit of Ultralytics' onnx-simplifier
// step but written here over Debian's ONNX 1.12 C++ library:
//
// - Constant nodes become initializers.
// - Constant folding: a node whose inputs are all initializers (for Shape:
//   whose input shape is fully static) and whose op is one of Shape,
//   Identity, Cast, Reshape, Unsqueeze, Squeeze, Concat, Add, Sub, Mul, Div,
//   ConstantOfShape on FLOAT / INT64 tensors is evaluated here and replaced
//   by an initializer — unless its result is larger than kMaxFoldBytes (a
//   ConstantOfShape of a whole score map would grow the file; it stays a
//   node, `kept_large`). QuantizeLinear / DequantizeLinear are never folded
//   (an INT8 file's int8 weights + DequantizeLinear are the QDQ format ONNX
//   Runtime fuses).
// - No-op removal: Identity, a Cast to the type its input already has, a
//   Reshape or Expand whose static output shape is its input's, a Transpose
//   with the identity permutation, a one-input Concat. Its consumers read its
//   input instead (a graph output keeps its name: the producer is renamed).
// - Dead nodes (no output read, none a graph output) and initializers no node
//   reads are removed.
// - Shape inference (onnx::shape_inference::InferShapes, strict, with data
//   propagation): the file carries value_info for every intermediate tensor
//   whose type it can infer (strict: a node it cannot infer is an error);
//   then onnx::checker::check_model.
//
// Every pass keeps the computed values bit-for-bit: folding evaluates in the
// tensor's own type (float arithmetic for FLOAT, int64 for INT64) exactly as
// a runtime's element-wise kernel does; no-op removal drops only operations
// that return their input unchanged. Torch-free, OpenCV-free.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace kestrel::exporter {

// A folded result larger than this stays a node (ConstantOfShape of a
// [batch, nc, anchors] map, for instance): folding is for shape arithmetic.
inline constexpr int64_t kMaxFoldBytes = 4096;

struct SimplifyReport {
  int64_t nodes_before = 0, nodes_after = 0;
  int64_t initializers_before = 0, initializers_after = 0;
  int64_t value_info_before = 0, value_info = 0;  // graph.value_info entries
  int64_t constants = 0;                          // Constant nodes turned into initializers
  int64_t folded = 0;                             // nodes evaluated into initializers
  int64_t kept_large = 0;                         // foldable nodes left as nodes (> kMaxFoldBytes)
  int64_t removed_noops = 0;                      // no-op nodes removed
  int64_t removed_dead = 0;                       // nodes whose outputs nothing read
  int64_t removed_initializers = 0;               // initializers nothing read
};

struct SimplifiedModel {
  std::string bytes;  // serialized ModelProto, passed strict shape inference and onnx::checker
  SimplifyReport report;
};

// The passes above on `model_bytes`. Internal when the bytes do not parse,
// shape inference or the checker rejects the result (a bug here or in the
// builder), or the graph has subgraphs (If/Loop: the exporter writes none).
Result<SimplifiedModel> SimplifyOnnxModel(const std::string& model_bytes);

// The counts of a serialized model as written (nodes, initializers,
// value_info), for reporting simplify=false. Internal when it does not parse.
Result<SimplifyReport> CountOnnxModel(const std::string& model_bytes);

}  // namespace kestrel::exporter
