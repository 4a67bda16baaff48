#include "export/onnx_quantize.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

namespace kestrel::exporter {

namespace {

Result<onnx::ModelProto> Parse(const std::string& bytes) {
  onnx::ModelProto proto;
  if (!proto.ParseFromString(bytes)) return Status::Internal("the FP32 model to quantize does not parse");
  return proto;
}

// A quantizable conv: a Conv with a 4-D float initializer weight (and
// optional 1-D bias initializer) whose output is read by exactly a Sigmoid
// and a Mul(output, sigmoid): the SiLU after every Conv+BN block.
struct ConvSite {
  int node = 0;
  std::string x, weight, bias, y;
};

std::vector<ConvSite> FindConvSites(const onnx::GraphProto& g) {
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const onnx::TensorProto& t : g.initializer()) inits[t.name()] = &t;
  std::map<std::string, std::vector<int>> consumers;
  for (int i = 0; i < g.node_size(); ++i) {
    for (const std::string& in : g.node(i).input()) consumers[in].push_back(i);
  }
  std::set<std::string> graph_outputs;
  for (const onnx::ValueInfoProto& o : g.output()) graph_outputs.insert(o.name());
  std::vector<ConvSite> sites;
  for (int i = 0; i < g.node_size(); ++i) {
    const onnx::NodeProto& n = g.node(i);
    if (n.op_type() != "Conv" || n.input_size() < 2 || n.output_size() != 1) continue;
    auto w = inits.find(n.input(1));
    if (w == inits.end() || w->second->data_type() != onnx::TensorProto::FLOAT || w->second->dims_size() != 4)
      continue;
    std::string bias;
    if (n.input_size() > 2 && !n.input(2).empty()) {
      auto b = inits.find(n.input(2));
      if (b == inits.end() || b->second->data_type() != onnx::TensorProto::FLOAT) continue;
      bias = n.input(2);
    }
    const std::string& y = n.output(0);
    if (graph_outputs.count(y) != 0) continue;
    const std::vector<int>& cons = consumers[y];
    if (cons.size() != 2) continue;
    const onnx::NodeProto* sig = nullptr;
    const onnx::NodeProto* mul = nullptr;
    for (int c : cons) {
      if (g.node(c).op_type() == "Sigmoid") sig = &g.node(c);
      if (g.node(c).op_type() == "Mul") mul = &g.node(c);
    }
    if (sig == nullptr || mul == nullptr || sig->output_size() != 1 || mul->input_size() != 2) continue;
    const bool silu = (mul->input(0) == y && mul->input(1) == sig->output(0)) ||
                      (mul->input(1) == y && mul->input(0) == sig->output(0));
    if (!silu) continue;
    sites.push_back({i, n.input(0), n.input(1), bias, y});
  }
  return sites;
}

std::vector<float> FloatData(const onnx::TensorProto& t) {
  std::vector<float> v;
  if (!t.raw_data().empty()) {
    v.resize(t.raw_data().size() / sizeof(float));
    std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(float));
  } else {
    v.assign(t.float_data().begin(), t.float_data().end());
  }
  return v;
}

template <class T>
void AddInit(onnx::GraphProto& g, const std::string& name, int type, const std::vector<int64_t>& dims,
             const std::vector<T>& values) {
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T)));
}

// uint8 asymmetric parameters of [lo, hi] (lo <= 0 <= hi).
std::pair<float, uint8_t> ActivationParams(const TensorRange& r) {
  const double span = r.hi - r.lo;
  if (!(span > 1e-12)) return {1.0F, 0};
  const auto scale = static_cast<float>(span / 255.0);
  const double zp = std::nearbyint(-r.lo / static_cast<double>(scale));
  return {scale, static_cast<uint8_t>(std::clamp(zp, 0.0, 255.0))};
}

onnx::NodeProto* AddNode(std::vector<onnx::NodeProto>& nodes, const std::string& op,
                         const std::vector<std::string>& inputs, const std::string& output) {
  nodes.emplace_back();
  onnx::NodeProto* n = &nodes.back();
  n->set_op_type(op);
  n->set_name(output);
  for (const std::string& i : inputs) n->add_input(i);
  n->add_output(output);
  return n;
}

void AxisAttr(onnx::NodeProto* n, int64_t axis) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(axis);
}

}  // namespace

Result<CalibMethod> ParseCalibMethod(const std::string& text) {
  if (text == "minmax") return CalibMethod::kMinMax;
  if (text == "percentile") return CalibMethod::kPercentile;
  return Status::InvalidArgument("calib_method '" + text + "' is not minmax or percentile",
                                 {"command line", 0, "calib_method"});
}

const char* CalibMethodName(CalibMethod method) {
  return method == CalibMethod::kMinMax ? "minmax" : "percentile";
}

Result<TensorRange> RangeFromStats(const TensorStats& s, CalibMethod method, double percentile,
                                   const std::string& tensor) {
  if (s.count <= 0) return Status::InvalidArgument("calibration saw no values", {"", 0, tensor});
  if (!std::isfinite(s.min) || !std::isfinite(s.max) || s.min > s.max) {
    return Status::InvalidArgument("calibration range is not finite (NaN or inf in the FP32 graph)",
                                   {"", 0, tensor});
  }
  TensorRange r{s.min, s.max};
  if (method == CalibMethod::kPercentile) {
    if (!(percentile > 50 && percentile <= 100)) {
      return Status::InvalidArgument("percentile must be in (50, 100]", {"", 0, tensor});
    }
    if (s.hist.empty())
      return Status::InvalidArgument("no histogram for percentile calibration", {"", 0, tensor});
    double total = 0;
    for (double h : s.hist) total += h;
    const double tail = total * (100.0 - percentile) / 100.0;
    const double width = (s.max - s.min) / static_cast<double>(s.hist.size());
    if (total > 0 && width > 0) {
      // From the bottom: the point where the cumulative count reaches `tail`.
      double cum = 0;
      for (size_t i = 0; i < s.hist.size(); ++i) {
        if (cum + s.hist[i] >= tail && s.hist[i] > 0) {
          r.lo = s.min + width * (static_cast<double>(i) + (tail - cum) / s.hist[i]);
          break;
        }
        cum += s.hist[i];
      }
      cum = 0;
      for (size_t k = s.hist.size(); k-- > 0;) {
        if (cum + s.hist[k] >= tail && s.hist[k] > 0) {
          r.hi = s.min + width * (static_cast<double>(k + 1) - (tail - cum) / s.hist[k]);
          break;
        }
        cum += s.hist[k];
      }
      if (r.lo > r.hi) r.lo = r.hi = (r.lo + r.hi) / 2;
    }
  }
  r.lo = std::min(r.lo, 0.0);
  r.hi = std::max(r.hi, 0.0);
  return r;
}

Result<std::vector<std::string>> CalibrationTensors(const std::string& model_bytes) {
  KESTREL_ASSIGN_OR_RETURN(onnx::ModelProto proto, Parse(model_bytes));
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const ConvSite& s : FindConvSites(proto.graph())) {
    for (const std::string& t : {s.x, s.y}) {
      if (seen.insert(t).second) out.push_back(t);
    }
  }
  if (out.empty()) return Status::Internal("the graph has no Conv+SiLU block to quantize");
  return out;
}

Result<std::string> WithTensorOutputs(const std::string& model_bytes,
                                      const std::vector<std::string>& tensors) {
  KESTREL_ASSIGN_OR_RETURN(onnx::ModelProto proto, Parse(model_bytes));
  std::set<std::string> outputs;
  for (const onnx::ValueInfoProto& o : proto.graph().output()) outputs.insert(o.name());
  for (const std::string& t : tensors) {
    if (!outputs.insert(t).second) continue;
    onnx::ValueInfoProto* v = proto.mutable_graph()->add_output();
    v->set_name(t);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) return Status::Internal("serializing the calibration model failed");
  return bytes;
}

Result<QuantizedModel> QuantizeOnnxModel(const std::string& model_bytes,
                                         const std::map<std::string, TensorRange>& ranges,
                                         const QuantizeOptions& options) {
  KESTREL_ASSIGN_OR_RETURN(onnx::ModelProto proto, Parse(model_bytes));
  onnx::GraphProto& g = *proto.mutable_graph();
  const std::vector<ConvSite> sites = FindConvSites(g);
  if (sites.empty()) return Status::Internal("the graph has no Conv+SiLU block to quantize");
  for (const ConvSite& s : sites) {
    for (const std::string& t : {s.x, s.y}) {
      if (ranges.count(t) == 0) return Status::InvalidArgument("no calibration range for tensor", {"", 0, t});
    }
  }
  std::map<std::string, int> init_index;
  for (int i = 0; i < g.initializer_size(); ++i) init_index[g.initializer(i).name()] = i;

  // Activation tensors that get a Q -> DQ pair where they are made (conv
  // inputs), and conv outputs (their pair is emitted after the conv).
  std::map<std::string, std::pair<float, uint8_t>> act;  // tensor -> (scale, zero point)
  std::set<std::string> conv_outputs;
  std::map<int, const ConvSite*> site_at;
  for (const ConvSite& s : sites) {
    act[s.x] = ActivationParams(ranges.at(s.x));
    act[s.y] = ActivationParams(ranges.at(s.y));
    conv_outputs.insert(s.y);
    site_at[s.node] = &s;
  }
  std::set<std::string> emitted;  // tensors whose Q -> DQ pair exists; its DQ output is t + "_dq"
  std::set<std::string> drop_inits;
  std::vector<onnx::NodeProto> nodes;
  nodes.reserve(static_cast<size_t>(g.node_size()) * 3);

  // The Q -> DQ pair of activation `t` reading `src`, writing `dst`.
  auto qdq = [&](const std::string& t, const std::string& src, const std::string& dst) {
    const auto [scale, zp] = act.at(t);
    const std::string sn = t + "_qscale", zn = t + "_qzero";
    AddInit<float>(g, sn, onnx::TensorProto::FLOAT, {}, {scale});
    AddInit<uint8_t>(g, zn, onnx::TensorProto::UINT8, {}, {zp});
    AddNode(nodes, "QuantizeLinear", {src, sn, zn}, t + "_q");
    AddNode(nodes, "DequantizeLinear", {t + "_q", sn, zn}, dst);
  };
  auto pairs_after = [&](const google::protobuf::RepeatedPtrField<std::string>& outs) {
    for (const std::string& t : outs) {
      if (act.count(t) != 0 && conv_outputs.count(t) == 0 && emitted.insert(t).second) qdq(t, t, t + "_dq");
    }
  };
  google::protobuf::RepeatedPtrField<std::string> graph_inputs;
  for (const onnx::ValueInfoProto& in : g.input()) *graph_inputs.Add() = in.name();
  pairs_after(graph_inputs);

  QuantizedModel result;
  for (int i = 0; i < g.node_size(); ++i) {
    onnx::NodeProto n = g.node(i);
    auto site = site_at.find(i);
    if (site == site_at.end()) {
      if (n.op_type() == "Conv") ++result.float_convs;
      nodes.push_back(n);
      pairs_after(n.output());
      continue;
    }
    const ConvSite& s = *site->second;
    // The conv input: its pair (a conv output's own pair is the tensor itself).
    const std::string x_dq = conv_outputs.count(s.x) != 0 ? s.x : s.x + "_dq";
    const float sx = act.at(s.x).first;
    // Weights: int8, symmetric per output channel.
    const onnx::TensorProto& wt = g.initializer(init_index.at(s.weight));
    std::vector<int64_t> wdims(wt.dims().begin(), wt.dims().end());
    const std::vector<float> w = FloatData(wt);
    const int64_t co = wdims[0];
    const size_t per = w.size() / static_cast<size_t>(co);
    std::vector<float> wscale(static_cast<size_t>(co));
    std::vector<int8_t> wq(w.size());
    for (size_t o = 0; o < static_cast<size_t>(co); ++o) {
      float amax = 0;
      for (size_t j = 0; j < per; ++j) amax = std::max(amax, std::fabs(w[o * per + j]));
      const float sc = amax > 0 ? amax / 127.0F : 1.0F;
      wscale[o] = sc;
      for (size_t j = 0; j < per; ++j) {
        const float q = std::nearbyint(w[o * per + j] / sc);
        wq[o * per + j] = static_cast<int8_t>(std::clamp(q, -127.0F, 127.0F));
      }
    }
    AddInit<int8_t>(g, s.weight + "_int8", onnx::TensorProto::INT8, wdims, wq);
    AddInit<float>(g, s.weight + "_scale", onnx::TensorProto::FLOAT, {co}, wscale);
    AddInit<int8_t>(g, s.weight + "_zero", onnx::TensorProto::INT8, {co},
                    std::vector<int8_t>(wscale.size(), 0));
    AxisAttr(AddNode(nodes, "DequantizeLinear", {s.weight + "_int8", s.weight + "_scale", s.weight + "_zero"},
                     s.weight + "_dq"),
             0);
    drop_inits.insert(s.weight);
    n.set_input(0, x_dq);
    n.set_input(1, s.weight + "_dq");
    if (!s.bias.empty()) {
      // Bias: int32 at scale x_scale * w_scale[c], as QLinearConv takes it.
      const std::vector<float> b = FloatData(g.initializer(init_index.at(s.bias)));
      std::vector<float> bscale(b.size());
      std::vector<int32_t> bq(b.size());
      for (size_t o = 0; o < b.size(); ++o) {
        bscale[o] = sx * wscale[o];
        const double q = std::nearbyint(static_cast<double>(b[o]) / static_cast<double>(bscale[o]));
        bq[o] = static_cast<int32_t>(std::clamp(q, -2147483647.0, 2147483647.0));
      }
      AddInit<int32_t>(g, s.bias + "_int32", onnx::TensorProto::INT32, {co}, bq);
      AddInit<float>(g, s.bias + "_scale", onnx::TensorProto::FLOAT, {co}, bscale);
      AxisAttr(AddNode(nodes, "DequantizeLinear", {s.bias + "_int32", s.bias + "_scale"}, s.bias + "_dq"), 0);
      drop_inits.insert(s.bias);
      n.set_input(2, s.bias + "_dq");
    }
    // The conv writes y_f; its Q -> DQ pair gives y back to the SiLU.
    n.set_output(0, s.y + "_f");
    n.set_name(s.y + "_f");
    nodes.push_back(n);
    emitted.insert(s.y);
    qdq(s.y, s.y + "_f", s.y);
    ++result.quantized_convs;
  }

  g.clear_node();
  for (onnx::NodeProto& n : nodes) *g.add_node() = std::move(n);
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
  for (onnx::TensorProto& t : *g.mutable_initializer()) {
    if (drop_inits.count(t.name()) == 0) *kept.Add() = std::move(t);
  }
  g.mutable_initializer()->Swap(&kept);

  std::ostringstream calib;
  calib << CalibMethodName(options.method);
  if (options.method == CalibMethod::kPercentile) calib << " " << options.percentile;
  std::map<std::string, std::string> meta;
  for (const onnx::StringStringEntryProto& e : proto.metadata_props()) meta[e.key()] = e.value();
  meta["int8"] = "true";
  meta["int8_calibration"] = calib.str();
  meta["int8_calib_images"] = std::to_string(options.calib_images);
  proto.clear_metadata_props();
  for (const auto& [k, v] : meta) {
    onnx::StringStringEntryProto* e = proto.add_metadata_props();
    e->set_key(k);
    e->set_value(v);
  }
  try {
    onnx::checker::check_model(proto);
  } catch (const std::exception& e) {
    return Status::Internal(std::string("ONNX checker rejected the quantized graph: ") + e.what());
  }
  result.nodes = g.node_size();
  result.metadata = std::move(meta);
  if (!proto.SerializeToString(&result.bytes)) return Status::Internal("serializing the INT8 model failed");
  return result;
}

}  // namespace kestrel::exporter
