// The graph's building blocks (internal/onnx_graph.h); onnx_export.cc
// assembles the model from them.
#include "export/internal/onnx_graph.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace kestrel::exporter::internal {

namespace {

constexpr float kBnEps = 1e-3F;  // model::Conv's BatchNorm2d eps

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

float BfloatToFloat(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16U;
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

// [N, C, a, b] -> [N, C, b, a].
std::string Transpose(GraphBuilder& g, const std::string& x, const std::string& prefix) {
  std::string y = g.Fresh(prefix + ".transpose");
  GraphBuilder::IntsAttr(g.Node("Transpose", {x}, {y}), "perm", {0, 1, 3, 2});
  return y;
}

}  // namespace

std::string GraphBuilder::FloatInit(const std::string& name, const std::vector<int64_t>& shape,
                                    const std::vector<float>& values) {
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : shape) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
  parameters_ += static_cast<int64_t>(values.size());
  return name;
}

std::string GraphBuilder::Int64Init(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
  return name;
}

std::string GraphBuilder::Int64Tensor(const std::string& name, const std::vector<int64_t>& shape,
                                      const std::vector<int64_t>& values) {
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  for (int64_t d : shape) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(int64_t)));
  return name;
}

std::string GraphBuilder::Int64Scalar(const std::string& name, int64_t value) {
  onnx::TensorProto* t = graph_.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(&value), sizeof(value)));
  return name;
}

onnx::NodeProto* GraphBuilder::Node(const std::string& op, const std::vector<std::string>& inputs,
                                    const std::vector<std::string>& outputs) {
  onnx::NodeProto* n = graph_.add_node();
  n->set_op_type(op);
  n->set_name(outputs.at(0));
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return n;
}

void GraphBuilder::IntsAttr(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void GraphBuilder::IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void GraphBuilder::StringAttr(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

std::vector<float> GraphBuilder::Tensor(const std::string& name, const std::vector<int64_t>& shape,
                                        std::vector<int64_t>* actual) {
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

std::string GraphBuilder::ConvBnSilu(const std::string& x, int c_in, const std::string& prefix, int k, int s,
                                     int* c_out) {
  return ConvBn(x, c_in, prefix, k, s, -1, 1, true, c_out);
}

std::string GraphBuilder::ConvBn(const std::string& x, int c_in, const std::string& prefix, int k, int s,
                                 int pad, int groups, bool act, int* c_out) {
  std::vector<int64_t> wshape;
  std::vector<float> w = Tensor(prefix + ".conv.weight", {-1, c_in / groups, k, k}, &wshape);
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
  std::string y = ConvNode(x, prefix + ".conv", wshape, w, bias, k, s, pad, groups);
  if (!act) return y;
  const std::string sig = Fresh(prefix + ".sigmoid");
  Node("Sigmoid", {y}, {sig});
  std::string out = Fresh(prefix + ".silu");
  Node("Mul", {y, sig}, {out});
  return out;
}

std::string GraphBuilder::Conv1x1(const std::string& x, int c_in, const std::string& prefix, int c_out) {
  std::vector<int64_t> wshape;
  std::vector<float> w = Tensor(prefix + ".weight", {c_out, c_in, 1, 1}, &wshape);
  std::vector<float> b = Tensor(prefix + ".bias", {c_out});
  if (!status_.IsOk()) return x;
  return ConvNode(x, prefix, wshape, w, b, 1, 1);
}

std::string GraphBuilder::ConvNode(const std::string& x, const std::string& prefix,
                                   const std::vector<int64_t>& wshape, const std::vector<float>& w,
                                   const std::vector<float>& b, int k, int s, int pad, int groups) {
  const std::string wn = FloatInit(prefix + ".weight", wshape, w);
  const std::vector<std::string> inputs =
      b.empty() ? std::vector<std::string>{x, wn}
                : std::vector<std::string>{x, wn, FloatInit(prefix + ".bias", {wshape[0]}, b)};
  std::string y = Fresh(prefix);
  onnx::NodeProto* n = Node("Conv", inputs, {y});
  IntsAttr(n, "kernel_shape", {k, k});
  IntsAttr(n, "strides", {s, s});
  const int p = pad >= 0 ? pad : k / 2;
  IntsAttr(n, "pads", {p, p, p, p});
  IntsAttr(n, "dilations", {1, 1});
  IntAttr(n, "group", groups);
  return y;
}

std::string GraphBuilder::Concat(const std::vector<std::string>& xs, int axis, const std::string& prefix) {
  std::string y = Fresh(prefix + ".concat");
  IntAttr(Node("Concat", xs, {y}), "axis", axis);
  return y;
}

std::pair<std::string, std::string> GraphBuilder::SplitHalves(const std::string& x, int axis,
                                                              const std::string& prefix) {
  const std::string a = Fresh(prefix + ".split_a");
  const std::string b = Fresh(prefix + ".split_b");
  IntAttr(Node("Split", {x}, {a, b}), "axis", axis);
  return {a, b};
}

std::string GraphBuilder::Reshape(const std::string& x, const std::vector<int64_t>& shape,
                                  const std::string& prefix) {
  const std::string s = Int64Init(Fresh(prefix + ".shape"), shape);
  std::string y = Fresh(prefix + ".reshape");
  Node("Reshape", {x, s}, {y});
  return y;
}

std::vector<std::string> GraphBuilder::Split(const std::string& x, int axis,
                                             const std::vector<int64_t>& sizes, const std::string& prefix) {
  // One Slice per piece: OpenCV 4.6 runs Split only into equal parts.
  std::vector<std::string> outs;
  const std::string axes = Int64Init(Fresh(prefix + ".slice_axes"), {axis});
  int64_t offset = 0;
  for (int64_t size : sizes) {
    const std::string starts = Int64Init(Fresh(prefix + ".slice_starts"), {offset});
    const std::string ends = Int64Init(Fresh(prefix + ".slice_ends"), {offset + size});
    outs.push_back(Fresh(prefix + ".slice"));
    Node("Slice", {x, starts, ends, axes}, {outs.back()});
    offset += size;
  }
  return outs;
}

std::string GraphBuilder::Op(const std::string& op, const std::vector<std::string>& inputs,
                             const std::string& prefix) {
  std::string y = Fresh(prefix);
  Node(op, inputs, {y});
  return y;
}

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

}  // namespace kestrel::exporter::internal
