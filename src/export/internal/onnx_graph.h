// Private to src/export (onnx_export.cc): the building blocks of an exported
// graph. GraphBuilder appends nodes and initializers to one onnx::GraphProto
// from a model's safetensors (F32, F16 or BF16, read as float; each Conv's
// BatchNorm folded in as model::Conv::Fuse does); DynamicDetectLevel and
// AppendNms emit the dynamic Detect decode and the NMS tail with it.
// BuildOnnxModel walks the layer plan over these, then sets the graph's
// input/output shapes and metadata, checks and serializes the model.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/safetensors.h"
#include "core/status.h"
#include "export/onnx_export.h"

namespace kestrel::exporter::internal {

// Builds the node list and initializers of one graph. The first error
// (a missing or misshapen tensor) is kept in status_; later calls are no-ops
// that return placeholder names, so the layer walk stays linear.
// Borrows `graph` and `weights`, which must outlive it.
class GraphBuilder {
 public:
  GraphBuilder(onnx::GraphProto& graph, const SafeTensorFile& weights) : graph_(graph), weights_(weights) {}

  const Status& GetStatus() const { return status_; }
  int64_t Parameters() const { return parameters_; }

  std::string Fresh(const std::string& prefix) { return prefix + "_" + std::to_string(counter_++); }

  // A float initializer named `name` holding `values` with `shape`.
  std::string FloatInit(const std::string& name, const std::vector<int64_t>& shape,
                        const std::vector<float>& values);

  std::string Int64Init(const std::string& name, const std::vector<int64_t>& values);

  // An int64 initializer of any shape (`values` holds its product).
  std::string Int64Tensor(const std::string& name, const std::vector<int64_t>& shape,
                          const std::vector<int64_t>& values);

  // A 0-d int64 tensor (CumSum's axis).
  std::string Int64Scalar(const std::string& name, int64_t value);

  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs);

  static void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v);
  static void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v);
  static void StringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v);

  // The F32 tensor `name` as floats, checked against `rank` (and `shape`
  // where an entry is >= 0); empty on error (recorded in status_).
  std::vector<float> Tensor(const std::string& name, const std::vector<int64_t>& shape,
                            std::vector<int64_t>* actual = nullptr);

  // Conv2d (k x k, stride s, padding k/2) named `prefix`.conv with its
  // BatchNorm `prefix`.bn folded in, then SiLU as Sigmoid * Mul.
  // [N, c_in, H, W] -> [N, c_out, H/s, W/s]; *c_out is set from the weights.
  std::string ConvBnSilu(const std::string& x, int c_in, const std::string& prefix, int k, int s, int* c_out);
  // The general model::Conv: padding `pad` (-1: k/2), `groups` groups
  // (weights [c_out, c_in / groups, k, k]; groups = c_in is a DWConv), SiLU
  // only when `act`.
  std::string ConvBn(const std::string& x, int c_in, const std::string& prefix, int k, int s, int pad,
                     int groups, bool act, int* c_out);

  // A plain Conv2d with bias, `prefix`.weight / `prefix`.bias (1x1, the
  // Detect head's last stage). [N, c_in, H, W] -> [N, c_out, H, W].
  std::string Conv1x1(const std::string& x, int c_in, const std::string& prefix, int c_out);

  std::string ConvNode(const std::string& x, const std::string& prefix, const std::vector<int64_t>& wshape,
                       const std::vector<float>& w, const std::vector<float>& b, int k, int s, int pad = -1,
                       int groups = 1);

  std::string Concat(const std::vector<std::string>& xs, int axis, const std::string& prefix);

  // Equal halves along `axis` (no `split` input: the same in every opset).
  std::pair<std::string, std::string> SplitHalves(const std::string& x, int axis, const std::string& prefix);

  std::string Reshape(const std::string& x, const std::vector<int64_t>& shape, const std::string& prefix);

  // Pieces of `sizes` along `axis`, as one Slice each (OpenCV 4.6 splits
  // only into equal parts).
  std::vector<std::string> Split(const std::string& x, int axis, const std::vector<int64_t>& sizes,
                                 const std::string& prefix);

  // One node `op` of `inputs` with one fresh output named after `prefix`.
  std::string Op(const std::string& op, const std::vector<std::string>& inputs, const std::string& prefix);

 private:
  onnx::GraphProto& graph_;
  const SafeTensorFile& weights_;
  Status status_;
  int64_t parameters_ = 0;
  int counter_ = 0;
};

// One Detect level of a dynamic graph, decoded in place: box logits `b`
// [N, 64, h, w] and class logits `s` [N, nc, h, w] of the level whose input
// is `f` ([N, c, h, w]) -> [N, 4 + nc, h*w] (cx, cy, w, h in input pixels,
// then the class sigmoid), whatever N, h and w are at run time.
// - Anchors: a zero-weight 1x1 Conv with bias 1 on `f` makes ones
//   [N, 1, h, w]; CumSum along W gives x + 1 (for y: along W of the
//   transposed map, transposed back), exact in float, so minus 0.5 is
//   model::MakeAnchors' cell centre. OpenCV 4.6's CumSum is wrong along any
//   axis but the last, hence the transposes; and each CumSum gets its own
//   ones Conv, as OpenCV 4.6 reuses the buffer of a blob that feeds two
//   CumSums before the second has read it.
// - DFL per side on the 4-D map ([N, 16, h, w] each: Softmax over the bins,
//   the 1x1 Conv with weights 0..15), then dist2bbox in model::Dist2Bbox's
//   order and the level's stride as a constant factor.
// Everything stays [N, C, h, w] until the one Reshape at the end: OpenCV 4.6
// infers shapes at import with the dynamic axes as 0, and a Sub/Add of two
// computed [N, C, A] tensors it cannot match there becomes a broadcasting
// layer that fails for batch > 1; same-shape 4-D maps do not.
std::string DynamicDetectLevel(GraphBuilder& g, const std::string& b, const std::string& s,
                               const std::string& f, int c, int nc, int stride, const std::string& prefix);

// nms=true (OnnxExportOptions::nms): `raw` [N, 4 + nc, A] -> `out`
// [N, max_det, 6] (x1, y1, x2, y2, score, class; zero rows after the last
// detection), the decisions of eval::PostprocessYolo with predict's options:
// - boxes as eval::BoxFromCxCyWh: cx - w / 2, cx + w / 2 (w / 2 is exact, so
//   float arithmetic gives the same corners as its double one);
// - the best class per anchor: ArgMax over the classes (the first on ties, as
//   DecodeYoloOutput), every other class's score masked to 0, so one
//   candidate per anchor enters NonMaxSuppression, per class, with
//   score_threshold conf (kept when score > conf) and iou_threshold iou
//   (suppressed when IoU > iou) — per class without a coordinate offset;
// - the kept scores scattered back onto [N, nc, A] (0 elsewhere), their max
//   over the classes [N, 1, A], padded with max_det zeros so TopK(max_det)
//   is defined for any A; TopK orders by score and, on ties, by the lower
//   index (anchor order, as Nms' stable sort); boxes and class ids gathered
//   at those indices and zeroed where the score is 0 (no detection).
void AppendNms(GraphBuilder& g, const std::string& raw, int nc, const OnnxExportOptions& o,
               const std::string& out);

}  // namespace kestrel::exporter::internal
