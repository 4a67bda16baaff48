#include "export/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

namespace kestrel::exporter {

namespace {

constexpr float kBnEps = 1e-3F;  // model::Conv's BatchNorm2d eps

Status KeyError(const std::string& msg, const std::string& key) {
  return Status::InvalidArgument(msg, {"command line", 0, key});
}

std::string QuoteName(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

// IEEE binary16 -> float, exact (subnormals, inf and NaN included).
float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000U) << 16U;
  const uint32_t exp = (h >> 10U) & 0x1FU;
  const uint32_t man = h & 0x3FFU;
  float mag = 0;
  if (exp == 0) {
    mag = std::ldexp(static_cast<float>(man), -24);
  } else if (exp == 31) {
    mag = man == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
  } else {
    mag = std::ldexp(static_cast<float>(man | 0x400U), static_cast<int>(exp) - 25);
  }
  uint32_t bits = 0;
  std::memcpy(&bits, &mag, 4);
  bits |= sign;
  std::memcpy(&mag, &bits, 4);
  return mag;
}

// float -> IEEE binary16, round to nearest even; overflow to inf,
// underflow through the subnormals to (signed) zero, NaN kept NaN.
uint16_t FloatToHalf(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16U) & 0x8000U;
  const uint32_t man = x & 0x7FFFFFU;
  const int32_t exp = static_cast<int32_t>((x >> 23U) & 0xFFU);
  if (exp == 255) return static_cast<uint16_t>(sign | 0x7C00U | (man != 0 ? 0x200U : 0U));
  const int32_t e = exp - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00U);
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);
    const uint32_t m = man | 0x800000U;
    const auto shift = static_cast<uint32_t>(14 - e);
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1U << shift) - 1U), halfway = 1U << (shift - 1U);
    if (rem > halfway || (rem == halfway && (h & 1U) != 0)) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10U) | (man >> 13U);
  const uint32_t rem = man & 0x1FFFU;
  if (rem > 0x1000U || (rem == 0x1000U && (h & 1U) != 0)) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

float BfloatToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16U;
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Builds the node list and initializers of one graph. The first error
// (a missing or misshapen tensor) is kept in status_; later calls are no-ops
// that return placeholder names, so the layer walk stays linear.
class GraphBuilder {
 public:
  GraphBuilder(onnx::GraphProto& graph, const SafeTensorFile& weights) : graph_(graph), weights_(weights) {}

  const Status& GetStatus() const { return status_; }
  int64_t Parameters() const { return parameters_; }

  std::string Fresh(const std::string& prefix) { return prefix + "_" + std::to_string(counter_++); }

  // A float initializer named `name` holding `values` with `shape`.
  std::string FloatInit(const std::string& name, const std::vector<int64_t>& shape,
                        const std::vector<float>& values) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : shape) t->add_dims(d);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    parameters_ += static_cast<int64_t>(values.size());
    return name;
  }

  std::string Int64Init(const std::string& name, const std::vector<int64_t>& values) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
    t->set_raw_data(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
    return name;
  }

  // An int64 initializer of any shape (`values` holds its product).
  std::string Int64Tensor(const std::string& name, const std::vector<int64_t>& shape,
                          const std::vector<int64_t>& values) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : shape) t->add_dims(d);
    t->set_raw_data(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
    return name;
  }

  // A 0-d int64 tensor (CumSum's axis).
  std::string Int64Scalar(const std::string& name, int64_t value) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->set_raw_data(std::string(reinterpret_cast<const char*>(&value), sizeof(value)));
    return name;
  }

  onnx::NodeProto* Node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs) {
    onnx::NodeProto* n = graph_.add_node();
    n->set_op_type(op);
    n->set_name(outputs.at(0));
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return n;
  }

  static void IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void StringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }

  // The F32 tensor `name` as floats, checked against `rank` (and `shape`
  // where an entry is >= 0); empty on error (recorded in status_).
  std::vector<float> Tensor(const std::string& name, const std::vector<int64_t>& shape,
                            std::vector<int64_t>* actual = nullptr) {
    if (!status_.IsOk()) return {};
    auto it = weights_.tensors.find(name);
    if (it == weights_.tensors.end()) {
      status_ = Status::InvalidArgument("tensor missing from the weights", {"", 0, name});
      return {};
    }
    const SafeTensor& t = it->second;
    const int item = t.dtype == "F32" ? 4 : (t.dtype == "F16" || t.dtype == "BF16") ? 2 : 0;
    if (item == 0) {
      status_ = Status::InvalidArgument("dtype " + t.dtype + ", expected F32, F16 or BF16", {"", 0, name});
      return {};
    }
    bool ok = t.shape.size() == shape.size();
    for (size_t i = 0; ok && i < shape.size(); ++i) ok = shape[i] < 0 || shape[i] == t.shape[i];
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    if (!ok || static_cast<int64_t>(t.data.size()) != numel * item) {
      std::string want, got;
      for (int64_t d : shape)
        want += (want.empty() ? "" : ", ") + (d < 0 ? std::string("?") : std::to_string(d));
      for (int64_t d : t.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      status_ = Status::InvalidArgument("shape [" + got + "], expected [" + want + "]", {"", 0, name});
      return {};
    }
    std::vector<float> v(static_cast<size_t>(numel));
    if (item == 4) {
      std::memcpy(v.data(), t.data.data(), t.data.size());
    } else {
      for (size_t i = 0; i < v.size(); ++i) {
        uint16_t h = 0;
        std::memcpy(&h, t.data.data() + 2 * i, 2);
        v[i] = t.dtype == "F16" ? HalfToFloat(h) : BfloatToFloat(h);
      }
    }
    if (actual != nullptr) *actual = t.shape;
    return v;
  }

  // Conv2d (k x k, stride s, padding k/2) named `prefix`.conv with its
  // BatchNorm `prefix`.bn folded in, then SiLU as Sigmoid * Mul.
  // [N, c_in, H, W] -> [N, c_out, H/s, W/s]; *c_out is set from the weights.
  std::string ConvBnSilu(const std::string& x, int c_in, const std::string& prefix, int k, int s,
                         int* c_out) {
    std::vector<int64_t> wshape;
    std::vector<float> w = Tensor(prefix + ".conv.weight", {-1, c_in, k, k}, &wshape);
    if (!status_.IsOk()) return x;
    const int64_t co = wshape[0];
    std::vector<float> gamma = Tensor(prefix + ".bn.weight", {co});
    std::vector<float> beta = Tensor(prefix + ".bn.bias", {co});
    std::vector<float> mean = Tensor(prefix + ".bn.running_mean", {co});
    std::vector<float> var = Tensor(prefix + ".bn.running_var", {co});
    if (!status_.IsOk()) return x;
    // The same float arithmetic as model::Conv::Fuse, so both fold alike.
    const size_t per_out = w.size() / static_cast<size_t>(co);
    std::vector<float> bias(static_cast<size_t>(co));
    for (size_t o = 0; o < static_cast<size_t>(co); ++o) {
      const float scale = gamma[o] / std::sqrt(var[o] + kBnEps);
      for (size_t j = 0; j < per_out; ++j) w[o * per_out + j] *= scale;
      bias[o] = beta[o] - mean[o] * scale;
    }
    *c_out = static_cast<int>(co);
    const std::string y = ConvNode(x, prefix + ".conv", wshape, w, bias, k, s);
    const std::string sig = Fresh(prefix + ".sigmoid");
    Node("Sigmoid", {y}, {sig});
    std::string out = Fresh(prefix + ".silu");
    Node("Mul", {y, sig}, {out});
    return out;
  }

  // A plain Conv2d with bias, `prefix`.weight / `prefix`.bias (1x1, the
  // Detect head's last stage). [N, c_in, H, W] -> [N, c_out, H, W].
  std::string Conv1x1(const std::string& x, int c_in, const std::string& prefix, int c_out) {
    std::vector<int64_t> wshape;
    std::vector<float> w = Tensor(prefix + ".weight", {c_out, c_in, 1, 1}, &wshape);
    std::vector<float> b = Tensor(prefix + ".bias", {c_out});
    if (!status_.IsOk()) return x;
    return ConvNode(x, prefix, wshape, w, b, 1, 1);
  }

  std::string ConvNode(const std::string& x, const std::string& prefix, const std::vector<int64_t>& wshape,
                       const std::vector<float>& w, const std::vector<float>& b, int k, int s) {
    const std::string wn = FloatInit(prefix + ".weight", wshape, w);
    const std::vector<std::string> inputs =
        b.empty() ? std::vector<std::string>{x, wn}
                  : std::vector<std::string>{x, wn, FloatInit(prefix + ".bias", {wshape[0]}, b)};
    std::string y = Fresh(prefix);
    onnx::NodeProto* n = Node("Conv", inputs, {y});
    IntsAttr(n, "kernel_shape", {k, k});
    IntsAttr(n, "strides", {s, s});
    IntsAttr(n, "pads", {k / 2, k / 2, k / 2, k / 2});
    IntsAttr(n, "dilations", {1, 1});
    IntAttr(n, "group", 1);
    return y;
  }

  std::string Concat(const std::vector<std::string>& xs, int axis, const std::string& prefix) {
    std::string y = Fresh(prefix + ".concat");
    IntAttr(Node("Concat", xs, {y}), "axis", axis);
    return y;
  }

  // Equal halves along `axis` (no `split` input: the same in every opset).
  std::pair<std::string, std::string> SplitHalves(const std::string& x, int axis, const std::string& prefix) {
    const std::string a = Fresh(prefix + ".split_a");
    const std::string b = Fresh(prefix + ".split_b");
    IntAttr(Node("Split", {x}, {a, b}), "axis", axis);
    return {a, b};
  }

  std::string Reshape(const std::string& x, const std::vector<int64_t>& shape, const std::string& prefix) {
    const std::string s = Int64Init(Fresh(prefix + ".shape"), shape);
    std::string y = Fresh(prefix + ".reshape");
    Node("Reshape", {x, s}, {y});
    return y;
  }

 private:
  onnx::GraphProto& graph_;
  const SafeTensorFile& weights_;
  Status status_;
  int64_t parameters_ = 0;
  int counter_ = 0;
};

// `dims` entries < 0 are dynamic, named by the same entry of `params`.
void SetShape(onnx::ValueInfoProto* v, const std::string& name, const std::vector<int64_t>& dims,
              const std::vector<std::string>& params = {}) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  for (size_t i = 0; i < dims.size(); ++i) {
    onnx::TensorShapeProto_Dimension* d = t->mutable_shape()->add_dim();
    if (dims[i] < 0) {
      d->set_dim_param(params.at(i));
    } else {
      d->set_dim_value(dims[i]);
    }
  }
}

// half=true (OnnxExportOptions::half): float initializers to FLOAT16 (but
// Resize's scales, which the operator takes as float), and the graph wrapped
// in a Cast at each end so `images` and `output0` stay float32.
void ConvertToHalf(onnx::GraphProto& graph) {
  std::set<std::string> keep;
  for (const onnx::NodeProto& n : graph.node()) {
    if (n.op_type() == "Resize" && n.input_size() > 2) keep.insert(n.input(2));
  }
  for (onnx::TensorProto& t : *graph.mutable_initializer()) {
    if (t.data_type() != onnx::TensorProto::FLOAT || keep.count(t.name()) != 0) continue;
    const std::string& raw = t.raw_data();
    std::string half(raw.size() / 2, '\0');
    for (size_t i = 0; i < raw.size() / 4; ++i) {
      float v = 0;
      std::memcpy(&v, raw.data() + 4 * i, 4);
      const uint16_t h = FloatToHalf(v);
      std::memcpy(half.data() + 2 * i, &h, 2);
    }
    t.set_raw_data(half);
    t.set_data_type(onnx::TensorProto::FLOAT16);
  }
  for (onnx::NodeProto& n : *graph.mutable_node()) {
    for (std::string& in : *n.mutable_input()) {
      if (in == "images") in = "images.fp16";
    }
    for (std::string& out : *n.mutable_output()) {
      if (out == "output0") out = "output0.fp16";
    }
  }
  auto cast = [&graph](const std::string& in, const std::string& out, int to) {
    onnx::NodeProto* n = graph.add_node();
    n->set_op_type("Cast");
    n->set_name(out + ".cast");
    n->add_input(in);
    n->add_output(out);
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("to");
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(to);
  };
  cast("output0.fp16", "output0", onnx::TensorProto::FLOAT);
  cast("images", "images.fp16", onnx::TensorProto::FLOAT16);
  // Nodes in topological order: the input Cast goes first.
  auto* nodes = graph.mutable_node();
  for (int i = nodes->size() - 1; i > 0; --i) nodes->SwapElements(i, i - 1);
}

// [N, C, a, b] -> [N, C, b, a].
std::string Transpose(GraphBuilder& g, const std::string& x, const std::string& prefix) {
  std::string y = g.Fresh(prefix + ".transpose");
  GraphBuilder::IntsAttr(g.Node("Transpose", {x}, {y}), "perm", {0, 1, 3, 2});
  return y;
}

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
                               const std::string& f, int c, int nc, int stride, const std::string& prefix) {
  const std::vector<float> zeros(static_cast<size_t>(c), 0.0F);
  const std::string half = g.FloatInit(prefix + ".half", {1}, {0.5F});
  std::string centre[2];  // x, y
  for (int k = 0; k < 2; ++k) {
    const std::string tag = k == 0 ? ".x" : ".y";
    std::string ones = g.ConvNode(f, prefix + tag + "_ones", {1, c, 1, 1}, zeros, {1.0F}, 1, 1);
    if (k == 1) ones = Transpose(g, ones, prefix + ".y_hw");
    std::string count = g.Fresh(prefix + tag + "_cumsum");
    g.Node("CumSum", {ones, g.Int64Scalar(prefix + tag + "_axis", 3)}, {count});
    if (k == 1) count = Transpose(g, count, prefix + ".y_wh");
    centre[k] = g.Fresh(prefix + tag + "_centre");
    g.Node("Sub", {count, half}, {centre[k]});
  }
  std::vector<std::string> side(4);  // l, t, r, b in cells, [N, 1, h, w] each
  for (int k = 0; k < 4; ++k) side[static_cast<size_t>(k)] = g.Fresh(prefix + ".dfl.split");
  GraphBuilder::IntAttr(g.Node("Split", {b}, side), "axis", 1);
  std::vector<float> bins(model::kRegMax);
  for (int k = 0; k < model::kRegMax; ++k) bins[static_cast<size_t>(k)] = static_cast<float>(k);
  for (int k = 0; k < 4; ++k) {
    const std::string sm = g.Fresh(prefix + ".dfl.softmax");
    GraphBuilder::IntAttr(g.Node("Softmax", {side[static_cast<size_t>(k)]}, {sm}), "axis", 1);
    side[static_cast<size_t>(k)] = g.ConvNode(sm, prefix + ".dfl" + std::to_string(k) + ".conv",
                                              {1, model::kRegMax, 1, 1}, bins, {}, 1, 1);
  }
  const std::string two = g.FloatInit(prefix + ".two", {1}, {2.0F});
  const std::string st = g.FloatInit(prefix + ".stride", {1}, {static_cast<float>(stride)});
  std::vector<std::string> rows;  // cx, cy, w, h in pixels
  std::string wh[2];
  for (int k = 0; k < 2; ++k) {
    const std::string axis = k == 0 ? "x" : "y";
    const std::string lo = g.Fresh(prefix + "." + axis + "1"), hi = g.Fresh(prefix + "." + axis + "2");
    g.Node("Sub", {centre[k], side[static_cast<size_t>(k)]}, {lo});
    g.Node("Add", {centre[k], side[static_cast<size_t>(k) + 2]}, {hi});
    const std::string sum = g.Fresh(prefix + ".c" + axis + "_sum"), mid = g.Fresh(prefix + ".c" + axis);
    g.Node("Add", {lo, hi}, {sum});
    g.Node("Div", {sum, two}, {mid});
    wh[k] = g.Fresh(prefix + (k == 0 ? ".w" : ".h"));
    g.Node("Sub", {hi, lo}, {wh[k]});
    rows.push_back(mid);
  }
  rows.push_back(wh[0]);
  rows.push_back(wh[1]);
  for (std::string& r : rows) {
    const std::string px = g.Fresh(r + "_px");
    g.Node("Mul", {r, st}, {px});
    r = px;
  }
  const std::string prob = g.Fresh(prefix + ".cls_sigmoid");
  g.Node("Sigmoid", {s}, {prob});
  rows.push_back(prob);
  return g.Reshape(g.Concat(rows, 1, prefix + ".out"), {0, 4 + nc, -1}, prefix + ".out");
}

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
               const std::string& out) {
  const std::string p = "nms";
  auto slice = [&g, &p](const std::string& x, int64_t begin, int64_t end, const std::string& tag) {
    std::string y = g.Fresh(p + "." + tag);
    g.Node("Slice",
           {x, g.Int64Init(g.Fresh(p + "." + tag + "_begin"), {begin}),
            g.Int64Init(g.Fresh(p + "." + tag + "_end"), {end}),
            g.Int64Init(g.Fresh(p + "." + tag + "_axis"), {1})},
           {y});
    return y;
  };
  auto node = [&g, &p](const std::string& op, const std::vector<std::string>& in, const std::string& tag) {
    const std::string y = g.Fresh(p + "." + tag);
    return std::pair<onnx::NodeProto*, std::string>{g.Node(op, in, {y}), y};
  };
  auto cast_float = [&node](const std::string& x, const std::string& tag) {
    auto [n, y] = node("Cast", {x}, tag);
    GraphBuilder::IntAttr(n, "to", onnx::TensorProto::FLOAT);
    return y;
  };
  const std::string cxy = slice(raw, 0, 2, "cxy"), wh = slice(raw, 2, 4, "wh");
  const std::string scores = slice(raw, 4, 4 + nc, "scores");  // [N, nc, A]
  const std::string half_wh = node("Div", {wh, g.FloatInit(p + ".two", {1}, {2.0F})}, "half_wh").second;
  const std::string x1y1 = node("Sub", {cxy, half_wh}, "x1y1").second;
  const std::string x2y2 = node("Add", {cxy, half_wh}, "x2y2").second;
  const std::string xyxy = g.Concat({x1y1, x2y2}, 1, p + ".xyxy");  // [N, 4, A]
  auto [argmax, best] = node("ArgMax", {scores}, "best_class");     // [N, 1, A] int64
  GraphBuilder::IntAttr(argmax, "axis", 1);
  GraphBuilder::IntAttr(argmax, "keepdims", 1);
  GraphBuilder::IntAttr(argmax, "select_last_index", 0);
  std::vector<int64_t> ids(static_cast<size_t>(nc));
  for (int c = 0; c < nc; ++c) ids[static_cast<size_t>(c)] = c;
  const std::string class_ids = g.Int64Tensor(p + ".class_ids", {1, nc, 1}, ids);
  const std::string is_best = node("Equal", {best, class_ids}, "is_best").second;  // [N, nc, A]
  const std::string masked = node("Mul", {scores, cast_float(is_best, "is_best_f")}, "masked").second;
  auto [tr, boxes] = node("Transpose", {xyxy}, "boxes");  // [N, A, 4]
  GraphBuilder::IntsAttr(tr, "perm", {0, 2, 1});
  auto [nms, selected] = node("NonMaxSuppression",
                              {boxes, masked, g.Int64Init(p + ".max_output_boxes_per_class", {o.max_det}),
                               g.FloatInit(p + ".iou_threshold", {1}, {static_cast<float>(o.iou)}),
                               g.FloatInit(p + ".score_threshold", {1}, {static_cast<float>(o.conf)})},
                              "selected");  // [K, 3]: batch, class, anchor
  GraphBuilder::IntAttr(nms, "center_point_box", 0);
  const std::string kept_scores = node("GatherND", {masked, selected}, "kept_scores").second;  // [K]
  const std::string shape = node("Shape", {masked}, "shape").second;
  const std::string zeros = node("ConstantOfShape", {shape}, "zeros").second;  // float 0
  const std::string kept = node("ScatterND", {zeros, selected, kept_scores}, "kept").second;
  auto [rmax, score] = node("ReduceMax", {kept}, "score");  // [N, 1, A]
  GraphBuilder::IntsAttr(rmax, "axes", {1});
  GraphBuilder::IntAttr(rmax, "keepdims", 1);
  const std::string pads = g.Int64Init(p + ".pads", {0, 0, 0, 0, 0, o.max_det});
  auto pad = [&node, &pads](const std::string& x, const std::string& tag) {
    return node("Pad", {x, pads}, tag).second;
  };
  const std::string top_score = g.Fresh(p + ".top_score"), top_index = g.Fresh(p + ".top_index");
  onnx::NodeProto* topk = g.Node("TopK", {pad(score, "score_padded"), g.Int64Init(p + ".k", {o.max_det})},
                                 {top_score, top_index});
  GraphBuilder::IntAttr(topk, "axis", 2);
  GraphBuilder::IntAttr(topk, "largest", 1);
  GraphBuilder::IntAttr(topk, "sorted", 1);
  const std::string index4 =
      node("Expand", {top_index, g.Int64Init(p + ".expand4", {1, 4, 1})}, "index4").second;  // [N, 4, m]
  auto [gb, top_boxes] = node("GatherElements", {pad(xyxy, "boxes_padded"), index4}, "top_boxes");
  GraphBuilder::IntAttr(gb, "axis", 2);
  auto [gc, top_class] =
      node("GatherElements", {pad(cast_float(best, "best_class_f"), "class_padded"), top_index}, "top_class");
  GraphBuilder::IntAttr(gc, "axis", 2);
  const std::string found = cast_float(
      node("Greater", {top_score, g.FloatInit(p + ".zero", {1}, {0.0F})}, "found").second, "found_f");
  const std::string rows = g.Concat({node("Mul", {top_boxes, found}, "out_boxes").second, top_score,
                                     node("Mul", {top_class, found}, "out_class").second},
                                    1, p + ".rows");  // [N, 6, m]
  GraphBuilder::IntsAttr(g.Node("Transpose", {rows}, {out}), "perm", {0, 2, 1});
}

std::string FormatThreshold(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

Status ValidateOnnxOptions(const model::ModelSpec& spec, const OnnxExportOptions& o) {
  for (auto [key, v] : {std::pair<const char*, int>{"imgsz", o.imgsz_h}, {"imgsz", o.imgsz_w}}) {
    if (v < model::kMaxStride || v % model::kMaxStride != 0 || v > 8192) {
      return KeyError("imgsz " + std::to_string(v) + " must be a multiple of the max stride " +
                          std::to_string(model::kMaxStride) + " in [32, 8192]",
                      key);
    }
  }
  if (o.batch < 1 || o.batch > 1024) return KeyError("batch must be in [1, 1024]", "batch");
  if (o.opset < kMinOpset || o.opset > kMaxOpset) {
    return KeyError("opset " + std::to_string(o.opset) + " is not supported; use " +
                        std::to_string(kMinOpset) + ".." + std::to_string(kMaxOpset),
                    "opset");
  }
  // Negated comparisons so NaN fails too.
  if (!(o.conf >= 0 && o.conf < 1))
    return KeyError("conf must be in [0, 1), got " + FormatThreshold(o.conf), "conf");
  if (!(o.iou >= 0 && o.iou <= 1))
    return KeyError("iou must be in [0, 1], got " + FormatThreshold(o.iou), "iou");
  if (o.max_det < 1 || o.max_det > kMaxNmsDetections) {
    return KeyError(
        "max_det must be in [1, " + std::to_string(kMaxNmsDetections) + "], got " + std::to_string(o.max_det),
        "max_det");
  }
  if (!o.names.empty() && static_cast<int>(o.names.size()) != spec.nc) {
    return KeyError("the model has " + std::to_string(spec.nc) + " classes but " +
                        std::to_string(o.names.size()) + " names were given",
                    "names");
  }
  return Status();
}

Result<OnnxModel> BuildOnnxModel(const model::ModelSpec& spec, const SafeTensorFile& weights,
                                 const OnnxExportOptions& o) {
  if (Status s = ValidateOnnxOptions(spec, o); !s.IsOk()) return s;
  onnx::ModelProto proto;
  proto.set_ir_version(onnx::IR_VERSION);
  proto.set_producer_name("kestrel");
  proto.set_producer_version(KESTREL_EXPORT_VERSION);
  proto.set_model_version(1);
  proto.set_doc_string("Kestrel " + spec.Name() + " detection model (docs/export.md)");
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(o.opset);
  onnx::GraphProto& graph = *proto.mutable_graph();
  graph.set_name(spec.Name());
  if (o.dynamic) {
    SetShape(graph.add_input(), "images", {-1, 3, -1, -1}, {"batch", "", "height", "width"});
  } else {
    SetShape(graph.add_input(), "images", {o.batch, 3, o.imgsz_h, o.imgsz_w});
  }

  GraphBuilder g(graph, weights);
  const std::vector<model::LayerPlan> plan = model::BuildLayerPlan(spec);
  std::vector<std::string> out(plan.size());
  std::vector<int> ch(plan.size());
  const int64_t n = o.batch;
  OnnxModel result;
  for (const model::LayerPlan& l : plan) {
    const std::string p = "model." + std::to_string(l.index);
    auto in = [&](int k) { return l.from.at(k) < 0 ? l.index - 1 : l.from.at(k); };
    const std::string x = l.index == 0 ? "images" : out[in(0)];
    const int cx = l.index == 0 ? 3 : ch[in(0)];
    int c = 0;
    switch (l.kind) {
      case model::LayerKind::kConv:
        out[l.index] = g.ConvBnSilu(x, cx, p, l.kernel, l.stride, &c);
        break;
      case model::LayerKind::kC2f: {
        int c1 = 0;
        const std::string y = g.ConvBnSilu(x, cx, p + ".cv1", 1, 1, &c1);
        auto [a, b] = g.SplitHalves(y, 1, p);
        std::vector<std::string> ys{a, b};
        const int half = c1 / 2;
        for (int j = 0; j < l.repeats; ++j) {
          const std::string m = p + ".m." + std::to_string(j);
          int tmp = 0;
          std::string t = g.ConvBnSilu(ys.back(), half, m + ".cv1", 3, 1, &tmp);
          t = g.ConvBnSilu(t, tmp, m + ".cv2", 3, 1, &tmp);
          if (l.shortcut) {
            const std::string sum = g.Fresh(m + ".add");
            g.Node("Add", {ys.back(), t}, {sum});
            t = sum;
          }
          ys.push_back(t);
        }
        out[l.index] = g.ConvBnSilu(g.Concat(ys, 1, p), half * (2 + l.repeats), p + ".cv2", 1, 1, &c);
        break;
      }
      case model::LayerKind::kSppf: {
        int c1 = 0;
        std::vector<std::string> ys{g.ConvBnSilu(x, cx, p + ".cv1", 1, 1, &c1)};
        for (int j = 0; j < 3; ++j) {
          const std::string y = g.Fresh(p + ".m");
          onnx::NodeProto* mp = g.Node("MaxPool", {ys.back()}, {y});
          GraphBuilder::IntsAttr(mp, "kernel_shape", {l.kernel, l.kernel});
          GraphBuilder::IntsAttr(mp, "strides", {1, 1});
          GraphBuilder::IntsAttr(mp, "pads", {l.kernel / 2, l.kernel / 2, l.kernel / 2, l.kernel / 2});
          ys.push_back(y);
        }
        out[l.index] = g.ConvBnSilu(g.Concat(ys, 1, p), 4 * c1, p + ".cv2", 1, 1, &c);
        break;
      }
      case model::LayerKind::kUpsample: {
        const std::string scales = g.FloatInit(g.Fresh(p + ".scales"), {4}, {1.0F, 1.0F, 2.0F, 2.0F});
        const std::string y = g.Fresh(p + ".resize");
        onnx::NodeProto* r = g.Node("Resize", {x, "", scales}, {y});
        // PyTorch's nearest: src = floor(dst / 2).
        GraphBuilder::StringAttr(r, "mode", "nearest");
        GraphBuilder::StringAttr(r, "coordinate_transformation_mode", "asymmetric");
        GraphBuilder::StringAttr(r, "nearest_mode", "floor");
        out[l.index] = y;
        c = cx;
        break;
      }
      case model::LayerKind::kConcat: {
        std::vector<std::string> xs;
        for (size_t k = 0; k < l.from.size(); ++k) {
          xs.push_back(out[in(static_cast<int>(k))]);
          c += ch[in(static_cast<int>(k))];
        }
        out[l.index] = g.Concat(xs, 1, p);
        break;
      }
      case model::LayerKind::kDetect: {
        const int nc = l.nc;
        std::vector<std::string> boxes, scores;
        std::vector<float> anchor_x, anchor_y, stride_row;
        std::vector<std::string> levels;  // dynamic: [N, 4 + nc, h*w] per level
        for (int lv = 0; lv < static_cast<int>(l.from.size()); ++lv) {
          const int src = in(lv);
          const int stride = model::kDetectStrides[lv];
          const int64_t h = o.imgsz_h / stride, w = o.imgsz_w / stride;
          const std::string lvs = std::to_string(lv);
          int t = 0;
          std::string b = g.ConvBnSilu(out[src], ch[src], p + ".cv2." + lvs + ".0", 3, 1, &t);
          b = g.ConvBnSilu(b, t, p + ".cv2." + lvs + ".1", 3, 1, &t);
          b = g.Conv1x1(b, t, p + ".cv2." + lvs + ".2", 4 * model::kRegMax);
          std::string s = g.ConvBnSilu(out[src], ch[src], p + ".cv3." + lvs + ".0", 3, 1, &t);
          s = g.ConvBnSilu(s, t, p + ".cv3." + lvs + ".1", 3, 1, &t);
          s = g.Conv1x1(s, t, p + ".cv3." + lvs + ".2", nc);
          if (o.dynamic) {
            levels.push_back(DynamicDetectLevel(g, b, s, out[src], ch[src], nc, stride, p + ".level" + lvs));
          } else {
            boxes.push_back(g.Reshape(b, {n, int64_t{4} * model::kRegMax, h * w}, p + ".box" + lvs));
            scores.push_back(g.Reshape(s, {n, nc, h * w}, p + ".cls" + lvs));
          }
          // Anchor points at cell centres (offset 0.5), as model::MakeAnchors.
          for (int64_t yy = 0; yy < h; ++yy) {
            for (int64_t xx = 0; xx < w; ++xx) {
              anchor_x.push_back(static_cast<float>(xx) + 0.5F);
              anchor_y.push_back(static_cast<float>(yy) + 0.5F);
              stride_row.push_back(static_cast<float>(stride));
            }
          }
        }

        const auto a = static_cast<int64_t>(anchor_x.size());
        result.anchors = a;  // at imgsz when dynamic
        result.output_channels = 4 + nc;
        out[l.index] = "output0";
        if (o.dynamic) {
          GraphBuilder::IntAttr(g.Node("Concat", levels, {"output0"}), "axis", 2);
          break;
        }
        const std::string box = g.Concat(boxes, 2, p + ".box");   // [N, 64, A]
        const std::string cls = g.Concat(scores, 2, p + ".cls");  // [N, nc, A]
        // DFL: [N, 4, 16, A] -> [N, 16, 4, A], softmax over the bins, then the
        // expectation as a 1x1 conv with weights 0..15 (as model::Dfl).
        const std::string d4 = g.Reshape(box, {n, 4, model::kRegMax, a}, p + ".dfl");
        const std::string dt = g.Fresh(p + ".dfl.transpose");
        GraphBuilder::IntsAttr(g.Node("Transpose", {d4}, {dt}), "perm", {0, 2, 1, 3});
        const std::string sm = g.Fresh(p + ".dfl.softmax");
        GraphBuilder::IntAttr(g.Node("Softmax", {dt}, {sm}), "axis", 1);
        std::vector<float> bins(model::kRegMax);
        for (int k = 0; k < model::kRegMax; ++k) bins[static_cast<size_t>(k)] = static_cast<float>(k);
        const std::string ev = g.ConvNode(sm, p + ".dfl.conv", {1, model::kRegMax, 1, 1}, bins, {}, 1, 1);
        const std::string dist = g.Reshape(ev, {n, 4, a}, p + ".dist");  // l, t, r, b in cells
        // dist2bbox: x1y1 = anchor - lt, x2y2 = anchor + rb, then centre and
        // size, times the stride — the order of model::Dist2Bbox.
        auto [lt, rb] = g.SplitHalves(dist, 1, p + ".dist");
        std::vector<float> anchors = anchor_x;
        anchors.insert(anchors.end(), anchor_y.begin(), anchor_y.end());
        const std::string anc = g.FloatInit(p + ".anchors", {2, a}, anchors);
        std::vector<float> strides;
        for (int k = 0; k < 4; ++k) strides.insert(strides.end(), stride_row.begin(), stride_row.end());
        const std::string str = g.FloatInit(p + ".strides", {4, a}, strides);
        const std::string two = g.FloatInit(p + ".two", {1}, {2.0F});
        const std::string x1y1 = g.Fresh(p + ".x1y1"), x2y2 = g.Fresh(p + ".x2y2");
        g.Node("Sub", {anc, lt}, {x1y1});
        g.Node("Add", {anc, rb}, {x2y2});
        const std::string sum = g.Fresh(p + ".xy_sum"), cxy = g.Fresh(p + ".cxy"), wh = g.Fresh(p + ".wh");
        g.Node("Add", {x1y1, x2y2}, {sum});
        g.Node("Div", {sum, two}, {cxy});
        g.Node("Sub", {x2y2, x1y1}, {wh});
        const std::string cells = g.Concat({cxy, wh}, 1, p + ".xywh");
        const std::string pixels = g.Fresh(p + ".xywh_pixels");
        g.Node("Mul", {cells, str}, {pixels});
        const std::string prob = g.Fresh(p + ".cls_sigmoid");
        g.Node("Sigmoid", {cls}, {prob});
        onnx::NodeProto* fin = g.Node("Concat", {pixels, prob}, {"output0"});
        GraphBuilder::IntAttr(fin, "axis", 1);
        break;
      }
    }
    ch[l.index] = c;
    if (!g.GetStatus().IsOk()) return g.GetStatus();
  }
  if (result.anchors == 0)
    return Status::Internal("the layer plan of " + spec.Name() + " has no Detect layer");
  if (o.nms) {
    SetShape(graph.add_output(), "output0", {o.dynamic ? -1 : n, o.max_det, 6}, {"batch", "", ""});
  } else if (o.dynamic) {
    SetShape(graph.add_output(), "output0", {-1, result.output_channels, -1}, {"batch", "", "anchors"});
  } else {
    SetShape(graph.add_output(), "output0", {n, result.output_channels, result.anchors});
  }

  std::string names = "{";
  for (int k = 0; k < spec.nc; ++k) {
    const std::string name = o.names.empty() ? "class" + std::to_string(k) : o.names[static_cast<size_t>(k)];
    names += (k ? ", " : "") + std::to_string(k) + ": " + QuoteName(name);
  }
  names += "}";
  result.metadata = {{"names", names},
                     {"stride", std::to_string(model::kMaxStride)},
                     {"imgsz", "[" + std::to_string(o.imgsz_h) + ", " + std::to_string(o.imgsz_w) + "]"},
                     {"batch", std::to_string(o.batch)},
                     {"task", "detect"},
                     {"arch", spec.Name()},
                     {"kestrel_version", KESTREL_EXPORT_VERSION}};
  if (o.dynamic) result.metadata["dynamic"] = "true";
  if (o.half) {
    ConvertToHalf(graph);
    result.metadata["half"] = "true";
  }
  if (o.nms) {
    // The raw output (float32 also in an FP16 graph, after its Cast) becomes
    // `raw0`; the NMS tail, in float32, writes `output0`.
    for (onnx::NodeProto& node : *graph.mutable_node()) {
      if (node.name() == "output0") node.set_name("raw0");
      for (std::string& y : *node.mutable_output()) {
        if (y == "output0") y = "raw0";
      }
    }
    AppendNms(g, "raw0", result.output_channels - 4, o, "output0");
    result.metadata["nms"] = "true";
    result.metadata["conf"] = FormatThreshold(o.conf);
    result.metadata["iou"] = FormatThreshold(o.iou);
    result.metadata["max_det"] = std::to_string(o.max_det);
  }
  for (const auto& [k, v] : o.extra_metadata) {
    if (result.metadata.count(k) != 0) {
      return Status::InvalidArgument("metadata key '" + k + "' is written by the exporter", {"", 0, k});
    }
    result.metadata[k] = v;
  }
  for (const auto& [k, v] : result.metadata) {
    onnx::StringStringEntryProto* e = proto.add_metadata_props();
    e->set_key(k);
    e->set_value(v);
  }
  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("ONNX checker rejected the exported graph: ") + e.what());
  }
  result.nodes = graph.node_size();
  result.parameters = g.Parameters();
  if (!proto.SerializeToString(&result.bytes)) return Status::Internal("serializing the ONNX model failed");
  return result;
}

Status WriteOnnxFile(Env& env, const OnnxModel& model, const std::string& path) {
  if (Status s = env.WriteFileAtomic(path, model.bytes); !s.IsOk()) return s;
  try {
    onnx::checker::check_model(path);
  } catch (const std::exception& e) {
    return Status::Corruption(std::string("ONNX checker rejected the written file: ") + e.what(),
                              {path, 0, ""});
  }
  return Status();
}

}  // namespace kestrel::exporter
