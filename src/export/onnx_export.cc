#include "export/onnx_export.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <set>
#include <sstream>
#include <utility>

#include "export/internal/onnx_graph.h"

namespace kestrel::exporter {

namespace {

using internal::AppendNms;
using internal::DynamicDetectLevel;
using internal::GraphBuilder;

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
  OnnxModel result;
  for (const model::LayerPlan& l : plan) {
    // The attention's [N, C, H*W] -> [N, C, H, W] reshape needs H and W; in a
    // dynamic graph only an ONNX Shape node has them, and OpenCV DNN 4.6's
    // ONNX importer refuses Shape of a tensor with a dynamic axis (its
    // parseShape: "dynamic 'zero' shapes are not supported"), so the file is
    // verified in ONNX Runtime only.
    if (o.dynamic && l.kind == model::LayerKind::kC2psa && result.opencv_dnn_unsupported.empty()) {
      result.opencv_dnn_unsupported = "the dynamic C2PSA attention (layer " + std::to_string(l.index) +
                                      ") restores [N, C, H, W] with an ONNX Shape node, which OpenCV DNN 4.6 "
                                      "cannot import on a dynamic input";
    }
  }
  std::vector<std::string> out(plan.size());
  std::vector<int> ch(plan.size());
  // Spatial size of each layer's output at imgsz (the attention's static
  // reshapes; a dynamic graph takes them from the tensor's Shape instead).
  std::vector<std::pair<int64_t, int64_t>> hw(plan.size());
  const int64_t n = o.batch;
  // model::Bottleneck: cv1 (k1), cv2 (k2), plus the input when `add`.
  auto bottleneck = [&g](const std::string& x, int c, const std::string& m, int k1, int k2, bool add) {
    int t = 0;
    std::string y = g.ConvBnSilu(x, c, m + ".cv1", k1, 1, &t);
    y = g.ConvBnSilu(y, t, m + ".cv2", k2, 1, &t);
    return add ? g.Op("Add", {x, y}, m + ".add") : y;
  };
  // model::C3: cv1 -> n Bottlenecks (k1, 3) -> cat with cv2 -> cv3.
  auto c3 = [&](const std::string& x, int c_in, const std::string& m, int repeats, int k1, bool shortcut,
                int* c_out) {
    int h = 0, t = 0;
    std::string a = g.ConvBnSilu(x, c_in, m + ".cv1", 1, 1, &h);
    const std::string b = g.ConvBnSilu(x, c_in, m + ".cv2", 1, 1, &t);
    for (int j = 0; j < repeats; ++j) a = bottleneck(a, h, m + ".m." + std::to_string(j), k1, 3, shortcut);
    return g.ConvBnSilu(g.Concat({a, b}, 1, m), 2 * h, m + ".cv3", 1, 1, c_out);
  };
  for (const model::LayerPlan& l : plan) {
    const std::string p = "model." + std::to_string(l.index);
    auto in = [&](int k) { return l.from.at(k) < 0 ? l.index - 1 : l.from.at(k); };
    const std::string x = l.index == 0 ? "images" : out[in(0)];
    const int cx = l.index == 0 ? 3 : ch[in(0)];
    auto [h_in, w_in] = l.index == 0 ? std::pair<int64_t, int64_t>{o.imgsz_h, o.imgsz_w} : hw[in(0)];
    hw[l.index] = {h_in, w_in};
    int c = 0;
    switch (l.kind) {
      case model::LayerKind::kConv: {
        const int pad = l.padding >= 0 ? l.padding : l.kernel / 2;
        hw[l.index] = {(h_in + 2 * int64_t{pad} - l.kernel) / l.stride + 1,
                       (w_in + 2 * int64_t{pad} - l.kernel) / l.stride + 1};
        out[l.index] = g.ConvBn(x, cx, p, l.kernel, l.stride, l.padding, 1, true, &c);
        break;
      }
      case model::LayerKind::kC3:
        out[l.index] = c3(x, cx, p, l.repeats, 1, l.shortcut, &c);
        break;
      case model::LayerKind::kC3k2: {
        int c1 = 0;
        const std::string y = g.ConvBnSilu(x, cx, p + ".cv1", 1, 1, &c1);
        auto [a, b] = g.SplitHalves(y, 1, p);
        std::vector<std::string> ys{a, b};
        const int half = c1 / 2;
        for (int j = 0; j < l.repeats; ++j) {
          const std::string m = p + ".m." + std::to_string(j);
          int tmp = 0;
          ys.push_back(l.c3k ? c3(ys.back(), half, m, 2, 3, l.shortcut, &tmp)
                             : bottleneck(ys.back(), half, m, 3, 3, l.shortcut));
        }
        out[l.index] = g.ConvBnSilu(g.Concat(ys, 1, p), half * (2 + l.repeats), p + ".cv2", 1, 1, &c);
        break;
      }
      case model::LayerKind::kC2psa: {
        int c1 = 0;
        const std::string y = g.ConvBnSilu(x, cx, p + ".cv1", 1, 1, &c1);
        auto [a, b] = g.SplitHalves(y, 1, p);
        const int hc = c1 / 2;
        const int heads = model::AttentionHeads(hc);
        const int64_t head_dim = hc / heads, key_dim = head_dim / 2;
        std::string v_in = b;
        for (int j = 0; j < l.repeats; ++j) {
          const std::string m = p + ".m." + std::to_string(j);
          // model::Attention on [N, hc, H, W]: per head q, k (key_dim) and v
          // (head_dim) over the H*W positions.
          int t = 0;
          const std::string qkv = g.ConvBn(v_in, hc, m + ".attn.qkv", 1, 1, -1, 1, false, &t);
          const std::string r = g.Reshape(qkv, {0, heads, 2 * key_dim + head_dim, -1}, m + ".attn");
          std::vector<std::string> qkv3 = g.Split(r, 2, {key_dim, key_dim, head_dim}, m + ".attn");
          const std::string qt = g.Fresh(m + ".attn.qt");
          GraphBuilder::IntsAttr(g.Node("Transpose", {qkv3[0]}, {qt}), "perm", {0, 1, 3, 2});
          const std::string scale =
              g.FloatInit(g.Fresh(m + ".attn.scale"), {1}, {static_cast<float>(std::pow(key_dim, -0.5))});
          // q is scaled before the MatMul, not the logits after it: OpenCV
          // DNN 4.6 loses a constant Mul that follows a two-input MatMul
          // (its output is the unscaled q.k unless the MatMul's own output is
          // requested), which made its softmax 7% off on trained weights
          // (docs/export.md). The scale is a power of two's square root, so
          // this is one rounding away from LibTorch's (q.k) * scale.
          const std::string logits =
              g.Op("MatMul", {g.Op("Mul", {qt, scale}, m + ".attn.qscaled"), qkv3[1]}, m + ".attn.qk");
          const std::string attn = g.Fresh(m + ".attn.softmax");
          GraphBuilder::IntAttr(g.Node("Softmax", {logits}, {attn}), "axis", -1);
          const std::string at = g.Fresh(m + ".attn.at");
          GraphBuilder::IntsAttr(g.Node("Transpose", {attn}, {at}), "perm", {0, 1, 3, 2});
          const std::string av = g.Op("MatMul", {qkv3[2], at}, m + ".attn.av");
          // Back to [N, hc, H, W]: the shape of the block's input, baked in a
          // static graph, read from the tensor in a dynamic one.
          const std::string shape = o.dynamic ? g.Op("Shape", {v_in}, m + ".attn.shape")
                                              : g.Int64Init(g.Fresh(m + ".attn.shape"), {n, hc, h_in, w_in});
          const std::string y4 = g.Op("Reshape", {av, shape}, m + ".attn.y");
          const std::string v4 = g.Op("Reshape", {qkv3[2], shape}, m + ".attn.v");
          const std::string pe = g.ConvBn(v4, hc, m + ".attn.pe", 3, 1, -1, hc, false, &t);
          const std::string proj =
              g.ConvBn(g.Op("Add", {y4, pe}, m + ".attn.sum"), hc, m + ".attn.proj", 1, 1, -1, 1, false, &t);
          const std::string x1 = g.Op("Add", {v_in, proj}, m + ".add1");
          std::string f = g.ConvBnSilu(x1, hc, m + ".ffn.0", 1, 1, &t);
          f = g.ConvBn(f, t, m + ".ffn.1", 1, 1, -1, 1, false, &t);
          v_in = g.Op("Add", {x1, f}, m + ".add2");
        }
        out[l.index] = g.ConvBnSilu(g.Concat({a, v_in}, 1, p), 2 * hc, p + ".cv2", 1, 1, &c);
        break;
      }
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
        hw[l.index] = {2 * h_in, 2 * w_in};
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
          const int stride = l.detect_strides[static_cast<size_t>(lv)];
          const int64_t h = o.imgsz_h / stride, w = o.imgsz_w / stride;
          const std::string lvs = std::to_string(lv);
          int t = 0;
          std::string b = g.ConvBnSilu(out[src], ch[src], p + ".cv2." + lvs + ".0", 3, 1, &t);
          b = g.ConvBnSilu(b, t, p + ".cv2." + lvs + ".1", 3, 1, &t);
          b = g.Conv1x1(b, t, p + ".cv2." + lvs + ".2", 4 * model::kRegMax);
          std::string s;
          if (l.detect_dw_cls) {  // YOLO11: (DWConv 3x3, Conv 1x1) twice
            s = g.ConvBn(out[src], ch[src], p + ".cv3." + lvs + ".0.0", 3, 1, -1, ch[src], true, &t);
            s = g.ConvBnSilu(s, t, p + ".cv3." + lvs + ".0.1", 1, 1, &t);
            s = g.ConvBn(s, t, p + ".cv3." + lvs + ".1.0", 3, 1, -1, t, true, &t);
            s = g.ConvBnSilu(s, t, p + ".cv3." + lvs + ".1.1", 1, 1, &t);
          } else {
            s = g.ConvBnSilu(out[src], ch[src], p + ".cv3." + lvs + ".0", 3, 1, &t);
            s = g.ConvBnSilu(s, t, p + ".cv3." + lvs + ".1", 3, 1, &t);
          }
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
  if (!result.opencv_dnn_unsupported.empty())
    result.metadata["opencv_dnn"] = "unsupported: " + result.opencv_dnn_unsupported;
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
