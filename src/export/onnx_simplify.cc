#include "export/onnx_simplify.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace kestrel::exporter {

namespace {

// A FLOAT or INT64 tensor's values (one of f / i used, by type).
struct Value {
  int32_t type = 0;
  std::vector<int64_t> dims;
  std::vector<float> f;
  std::vector<int64_t> i;

  int64_t Numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  bool IsFloat() const { return type == onnx::TensorProto::FLOAT; }
};

std::optional<Value> ReadTensor(const onnx::TensorProto& t) {
  Value v;
  v.type = t.data_type();
  v.dims.assign(t.dims().begin(), t.dims().end());
  const int64_t n = v.Numel();
  if (n < 0 || t.data_location() == onnx::TensorProto::EXTERNAL) return std::nullopt;
  if (v.type == onnx::TensorProto::FLOAT) {
    if (!t.raw_data().empty()) {
      if (static_cast<int64_t>(t.raw_data().size()) != n * 4) return std::nullopt;
      v.f.resize(static_cast<size_t>(n));
      std::memcpy(v.f.data(), t.raw_data().data(), t.raw_data().size());
    } else {
      v.f.assign(t.float_data().begin(), t.float_data().end());
    }
    if (static_cast<int64_t>(v.f.size()) != n) return std::nullopt;
  } else if (v.type == onnx::TensorProto::INT64) {
    if (!t.raw_data().empty()) {
      if (static_cast<int64_t>(t.raw_data().size()) != n * 8) return std::nullopt;
      v.i.resize(static_cast<size_t>(n));
      std::memcpy(v.i.data(), t.raw_data().data(), t.raw_data().size());
    } else {
      v.i.assign(t.int64_data().begin(), t.int64_data().end());
    }
    if (static_cast<int64_t>(v.i.size()) != n) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return v;
}

void WriteTensor(const Value& v, const std::string& name, onnx::TensorProto* t) {
  t->Clear();
  t->set_name(name);
  t->set_data_type(v.type);
  for (int64_t d : v.dims) t->add_dims(d);
  if (v.IsFloat()) {
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.f.data()), v.f.size() * sizeof(float)));
  } else {
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.i.data()), v.i.size() * sizeof(int64_t)));
  }
}

int64_t Bytes(const Value& v) { return v.Numel() * (v.IsFloat() ? 4 : 8); }

const onnx::AttributeProto* Attr(const onnx::NodeProto& n, const std::string& name) {
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

// Multidirectional (numpy) broadcasting of a binary element-wise op.
std::optional<Value> Binary(const std::string& op, const Value& a, const Value& b) {
  if (a.type != b.type) return std::nullopt;
  const size_t rank = std::max(a.dims.size(), b.dims.size());
  std::vector<int64_t> da(rank, 1), db(rank, 1), dout(rank, 1);
  std::copy(a.dims.begin(), a.dims.end(), da.begin() + static_cast<std::ptrdiff_t>(rank - a.dims.size()));
  std::copy(b.dims.begin(), b.dims.end(), db.begin() + static_cast<std::ptrdiff_t>(rank - b.dims.size()));
  for (size_t k = 0; k < rank; ++k) {
    if (da[k] != db[k] && da[k] != 1 && db[k] != 1) return std::nullopt;
    dout[k] = da[k] == 1 ? db[k] : da[k];
  }
  Value out;
  out.type = a.type;
  out.dims = dout;
  const int64_t n = out.Numel();
  // Strides of a and b over the output index (0 on a broadcast axis).
  std::vector<int64_t> sa(rank, 0), sb(rank, 0);
  int64_t ma = 1, mb = 1;
  for (size_t k = rank; k-- > 0;) {
    sa[k] = da[k] == 1 ? 0 : ma;
    sb[k] = db[k] == 1 ? 0 : mb;
    ma *= da[k];
    mb *= db[k];
  }
  std::vector<int64_t> idx(rank, 0);
  if (out.IsFloat())
    out.f.resize(static_cast<size_t>(n));
  else
    out.i.resize(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    int64_t ia = 0, ib = 0;
    for (size_t k = 0; k < rank; ++k) {
      ia += idx[k] * sa[k];
      ib += idx[k] * sb[k];
    }
    const auto ua = static_cast<size_t>(ia), ub = static_cast<size_t>(ib), ue = static_cast<size_t>(e);
    if (out.IsFloat()) {
      const float x = a.f[ua], y = b.f[ub];
      out.f[ue] = op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y;
    } else {
      const int64_t x = a.i[ua], y = b.i[ub];
      if (op == "Div" && (y == 0 || (x == INT64_MIN && y == -1))) return std::nullopt;
      // Wrapping, as a runtime's int64 kernel (no signed overflow UB here).
      const auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
      out.i[ue] = op == "Add"   ? static_cast<int64_t>(ux + uy)
                  : op == "Sub" ? static_cast<int64_t>(ux - uy)
                  : op == "Mul" ? static_cast<int64_t>(ux * uy)
                                : x / y;
    }
    for (size_t k = rank; k-- > 0;) {
      if (++idx[k] < dout[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

// Normalizes `axes` (negative counted from the end of `rank`); false when out
// of range or repeated.
bool NormalizeAxes(std::vector<int64_t>& axes, int64_t rank) {
  std::set<int64_t> seen;
  for (int64_t& a : axes) {
    if (a < 0) a += rank;
    if (a < 0 || a >= rank || !seen.insert(a).second) return false;
  }
  return true;
}

// The static shape of a tensor per shape inference, when every dim is known.
using TypeMap = std::map<std::string, const onnx::TypeProto*>;
std::optional<std::vector<int64_t>> StaticShape(const TypeMap& types, const std::string& name) {
  auto it = types.find(name);
  if (it == types.end() || !it->second->has_tensor_type() || !it->second->tensor_type().has_shape())
    return std::nullopt;
  std::vector<int64_t> dims;
  for (const auto& d : it->second->tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

int32_t ElemType(const TypeMap& types, const std::string& name) {
  auto it = types.find(name);
  if (it == types.end() || !it->second->has_tensor_type()) return 0;
  return it->second->tensor_type().elem_type();
}

// Evaluates `n` on constant inputs `in` (nullptr where an input is not
// constant). nullopt: not foldable (an op, type or form this pass leaves),
// or ConstantOfShape's result over kMaxFoldBytes (*too_large set, not built).
std::optional<Value> Evaluate(const onnx::NodeProto& n, const std::vector<const Value*>& in,
                              const TypeMap& types, bool* too_large) {
  const std::string& op = n.op_type();
  if (op == "Shape") {
    auto shape = StaticShape(types, n.input(0));
    if (!shape) return std::nullopt;
    const auto rank = static_cast<int64_t>(shape->size());
    int64_t start = 0, end = rank;
    if (const auto* a = Attr(n, "start")) start = a->i();
    if (const auto* a = Attr(n, "end")) end = a->i();
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
    Value v;
    v.type = onnx::TensorProto::INT64;
    if (end > start) v.i.assign(shape->begin() + start, shape->begin() + end);
    v.dims = {static_cast<int64_t>(v.i.size())};
    return v;
  }
  for (const Value* v : in) {
    if (v == nullptr) return std::nullopt;
  }
  if (in.empty()) return std::nullopt;
  const Value& x = *in[0];
  if (op == "Identity") return x;
  if (op == "Cast") {
    const auto* to = Attr(n, "to");
    if (to == nullptr) return std::nullopt;
    Value v;
    v.type = static_cast<int32_t>(to->i());
    v.dims = x.dims;
    if (v.type == x.type) return x;
    if (v.type == onnx::TensorProto::FLOAT && !x.IsFloat()) {
      for (int64_t k : x.i) v.f.push_back(static_cast<float>(k));
    } else if (v.type == onnx::TensorProto::INT64 && x.IsFloat()) {
      for (float f : x.f) {
        // Only exactly representable values: truncation of out-of-range or
        // NaN floats is implementation-defined in runtimes.
        if (!(f > -9.2e18F && f < 9.2e18F)) return std::nullopt;
        v.i.push_back(static_cast<int64_t>(f));
      }
    } else {
      return std::nullopt;
    }
    return v;
  }
  if (op == "Reshape") {
    if (in.size() != 2 || in[1]->IsFloat()) return std::nullopt;
    const auto* allowzero = Attr(n, "allowzero");
    std::vector<int64_t> dims = in[1]->i;
    int64_t known = 1, infer = -1;
    for (size_t k = 0; k < dims.size(); ++k) {
      if (dims[k] == 0 && (allowzero == nullptr || allowzero->i() == 0)) {
        if (k >= x.dims.size()) return std::nullopt;
        dims[k] = x.dims[k];
      }
      if (dims[k] == -1) {
        if (infer >= 0) return std::nullopt;
        infer = static_cast<int64_t>(k);
      } else if (dims[k] < 0) {
        return std::nullopt;
      } else {
        known *= dims[k];
      }
    }
    if (infer >= 0) {
      if (known == 0 || x.Numel() % known != 0) return std::nullopt;
      dims[static_cast<size_t>(infer)] = x.Numel() / known;
    }
    Value v = x;
    v.dims = dims;
    if (v.Numel() != x.Numel()) return std::nullopt;
    return v;
  }
  if (op == "Unsqueeze" || op == "Squeeze") {
    std::vector<int64_t> axes;
    if (in.size() > 1) {
      if (in[1]->IsFloat()) return std::nullopt;
      axes = in[1]->i;
    } else if (const auto* a = Attr(n, "axes")) {
      axes.assign(a->ints().begin(), a->ints().end());
    }
    Value v = x;
    if (op == "Unsqueeze") {
      const auto rank = static_cast<int64_t>(x.dims.size() + axes.size());
      if (axes.empty() || !NormalizeAxes(axes, rank)) return std::nullopt;
      std::sort(axes.begin(), axes.end());
      for (int64_t a : axes) v.dims.insert(v.dims.begin() + a, 1);
    } else {
      if (axes.empty()) {
        v.dims.clear();
        for (int64_t d : x.dims) {
          if (d != 1) v.dims.push_back(d);
        }
      } else {
        if (!NormalizeAxes(axes, static_cast<int64_t>(x.dims.size()))) return std::nullopt;
        v.dims.clear();
        for (size_t k = 0; k < x.dims.size(); ++k) {
          const bool drop = std::find(axes.begin(), axes.end(), static_cast<int64_t>(k)) != axes.end();
          if (drop && x.dims[k] != 1) return std::nullopt;
          if (!drop) v.dims.push_back(x.dims[k]);
        }
      }
    }
    return v;
  }
  if (op == "Concat") {
    const auto* a = Attr(n, "axis");
    if (a == nullptr) return std::nullopt;
    const auto rank = static_cast<int64_t>(x.dims.size());
    int64_t axis = a->i() < 0 ? a->i() + rank : a->i();
    if (axis < 0 || axis >= rank) return std::nullopt;
    Value v;
    v.type = x.type;
    v.dims = x.dims;
    v.dims[static_cast<size_t>(axis)] = 0;
    for (const Value* p : in) {
      if (p->type != x.type || p->dims.size() != x.dims.size()) return std::nullopt;
      for (size_t k = 0; k < x.dims.size(); ++k) {
        if (static_cast<int64_t>(k) != axis && p->dims[k] != x.dims[k]) return std::nullopt;
      }
      v.dims[static_cast<size_t>(axis)] += p->dims[static_cast<size_t>(axis)];
    }
    int64_t outer = 1;
    for (int64_t k = 0; k < axis; ++k) outer *= x.dims[static_cast<size_t>(k)];
    for (int64_t o = 0; o < outer; ++o) {
      for (const Value* p : in) {
        const int64_t chunk = outer == 0 ? 0 : p->Numel() / outer;
        if (x.IsFloat()) {
          v.f.insert(v.f.end(), p->f.begin() + o * chunk, p->f.begin() + (o + 1) * chunk);
        } else {
          v.i.insert(v.i.end(), p->i.begin() + o * chunk, p->i.begin() + (o + 1) * chunk);
        }
      }
    }
    return v;
  }
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    if (in.size() != 2) return std::nullopt;
    return Binary(op, x, *in[1]);
  }
  if (op == "ConstantOfShape") {
    if (x.IsFloat()) return std::nullopt;
    Value v;
    v.type = onnx::TensorProto::FLOAT;
    v.dims = x.i;
    float fill_f = 0;
    int64_t fill_i = 0;
    if (const auto* a = Attr(n, "value")) {
      auto fill = ReadTensor(a->t());
      if (!fill || fill->Numel() != 1) return std::nullopt;
      v.type = fill->type;
      if (fill->IsFloat())
        fill_f = fill->f[0];
      else
        fill_i = fill->i[0];
    }
    for (int64_t d : v.dims) {
      if (d < 0) return std::nullopt;
    }
    // Checked before filling: a large map is not built just to be refused.
    if (Bytes(v) > kMaxFoldBytes) {
      *too_large = true;
      return std::nullopt;
    }
    if (v.IsFloat())
      v.f.assign(static_cast<size_t>(v.Numel()), fill_f);
    else
      v.i.assign(static_cast<size_t>(v.Numel()), fill_i);
    return v;
  }
  return std::nullopt;
}

bool HasSubgraphs(const onnx::GraphProto& g) {
  for (const onnx::NodeProto& n : g.node()) {
    for (const onnx::AttributeProto& a : n.attribute()) {
      if (a.type() == onnx::AttributeProto::GRAPH || a.type() == onnx::AttributeProto::GRAPHS) return true;
    }
  }
  return false;
}

void Infer(onnx::ModelProto& proto) {
  proto.mutable_graph()->clear_value_info();
  onnx::ShapeInferenceOptions opts(/*check_type_val=*/true, /*strict_mode_val=*/1, /*data_prop_val=*/true);
  onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), opts);
}

TypeMap Types(const onnx::GraphProto& g) {
  TypeMap types;
  for (const auto& v : g.input()) types[v.name()] = &v.type();
  for (const auto& v : g.value_info()) types[v.name()] = &v.type();
  for (const auto& v : g.output()) types[v.name()] = &v.type();
  return types;
}

// Constant folding, one sweep in graph order; true when a node was folded.
// `large`: outputs of foldable nodes left as nodes (over kMaxFoldBytes).
bool FoldConstants(onnx::GraphProto& g, SimplifyReport* rep, std::set<std::string>* large) {
  std::map<std::string, Value> consts;
  for (const onnx::TensorProto& t : g.initializer()) {
    if (auto v = ReadTensor(t)) consts[t.name()] = std::move(*v);
  }
  std::set<std::string> outputs;
  for (const auto& o : g.output()) outputs.insert(o.name());
  const TypeMap types = Types(g);
  static const std::set<std::string> kFoldable = {"Shape",     "Identity", "Cast",   "Reshape",
                                                  "Unsqueeze", "Squeeze",  "Concat", "Add",
                                                  "Sub",       "Mul",      "Div",    "ConstantOfShape"};
  bool changed = false;
  std::vector<onnx::NodeProto> kept;
  for (const onnx::NodeProto& n : g.node()) {
    // A graph output stays computed by a node: a runtime reads outputs from nodes.
    const bool foldable = kFoldable.count(n.op_type()) != 0 && n.domain().empty() && n.output_size() == 1 &&
                          outputs.count(n.output(0)) == 0;
    if (foldable) {
      std::vector<const Value*> in;
      for (const std::string& name : n.input()) {
        auto it = consts.find(name);
        in.push_back(it == consts.end() ? nullptr : &it->second);
      }
      bool too_large = false;
      std::optional<Value> v = Evaluate(n, in, types, &too_large);
      if (v && Bytes(*v) > kMaxFoldBytes) {
        too_large = true;
        v.reset();
      }
      if (too_large) large->insert(n.output(0));
      if (v) {
        WriteTensor(*v, n.output(0), g.add_initializer());
        consts[n.output(0)] = std::move(*v);
        ++rep->folded;
        changed = true;
        continue;
      }
    }
    kept.push_back(n);
  }
  if (changed) {
    g.clear_node();
    for (auto& n : kept) *g.add_node() = std::move(n);
  }
  return changed;
}

// The no-op forms of the header's list, given inferred types.
bool IsNoOp(const onnx::NodeProto& n, const TypeMap& types) {
  if (!n.domain().empty() || n.output_size() != 1 || n.input_size() < 1 || n.input(0).empty()) return false;
  const std::string& op = n.op_type();
  if (op == "Identity") return true;
  if (op == "Concat") return n.input_size() == 1;
  if (op == "Cast") {
    const auto* to = Attr(n, "to");
    const int32_t t = ElemType(types, n.input(0));
    return to != nullptr && t != 0 && to->i() == t;
  }
  if (op == "Transpose") {
    const auto* perm = Attr(n, "perm");
    if (perm == nullptr) return false;  // the default reverses the axes
    for (int k = 0; k < perm->ints_size(); ++k) {
      if (perm->ints(k) != k) return false;
    }
    return true;
  }
  if (op == "Reshape" || op == "Expand") {
    auto a = StaticShape(types, n.input(0)), b = StaticShape(types, n.output(0));
    return a && b && *a == *b;
  }
  return false;
}

// Removes the no-op nodes; true when one was removed. A removed node's
// output has its input's type and shape, so `types` stays right for the
// renamed tensors within the sweep.
bool RemoveNoOps(onnx::GraphProto& g, SimplifyReport* rep) {
  const TypeMap types = Types(g);
  std::set<std::string> outputs, inputs, inits;
  for (const auto& o : g.output()) outputs.insert(o.name());
  for (const auto& i : g.input()) inputs.insert(i.name());
  for (const auto& t : g.initializer()) inits.insert(t.name());
  bool changed = false;
  for (int k = 0; k < g.node_size();) {
    const onnx::NodeProto& n = g.node(k);
    if (!IsNoOp(n, types)) {
      ++k;
      continue;
    }
    const std::string x = n.input(0), y = n.output(0);
    std::string from = y, to = x;  // rename every use of `from` to `to`
    if (outputs.count(y) != 0) {
      // The graph output keeps its name: x's producer writes y instead.
      if (inputs.count(x) != 0 || inits.count(x) != 0 || outputs.count(x) != 0) {
        ++k;
        continue;
      }
      from = x;
      to = y;
    }
    g.mutable_node()->DeleteSubrange(k, 1);
    for (onnx::NodeProto& m : *g.mutable_node()) {
      for (std::string& i : *m.mutable_input()) {
        if (i == from) i = to;
      }
      for (std::string& o : *m.mutable_output()) {
        if (o == from) o = to;
      }
    }
    ++rep->removed_noops;
    changed = true;
  }
  return changed;
}

// Removes nodes whose outputs nothing reads and initializers no node reads.
bool RemoveDead(onnx::GraphProto& g, SimplifyReport* rep) {
  bool changed = false;
  std::set<std::string> live;
  for (const auto& o : g.output()) live.insert(o.name());
  std::vector<bool> keep(static_cast<size_t>(g.node_size()), false);
  for (int k = g.node_size(); k-- > 0;) {
    const onnx::NodeProto& n = g.node(k);
    bool used = false;
    for (const std::string& o : n.output()) used = used || live.count(o) != 0;
    if (!used) continue;
    keep[static_cast<size_t>(k)] = true;
    for (const std::string& i : n.input()) live.insert(i);
  }
  for (int k = g.node_size(); k-- > 0;) {
    if (keep[static_cast<size_t>(k)]) continue;
    g.mutable_node()->DeleteSubrange(k, 1);
    ++rep->removed_dead;
    changed = true;
  }
  for (int k = g.initializer_size(); k-- > 0;) {
    if (live.count(g.initializer(k).name()) != 0) continue;
    g.mutable_initializer()->DeleteSubrange(k, 1);
    ++rep->removed_initializers;
    changed = true;
  }
  return changed;
}

}  // namespace

Result<SimplifyReport> CountOnnxModel(const std::string& model_bytes) {
  onnx::ModelProto proto;
  if (!proto.ParseFromString(model_bytes)) return Status::Internal("the ONNX model to count does not parse");
  SimplifyReport r;
  r.nodes_before = r.nodes_after = proto.graph().node_size();
  r.initializers_before = r.initializers_after = proto.graph().initializer_size();
  r.value_info_before = r.value_info = proto.graph().value_info_size();
  return r;
}

Result<SimplifiedModel> SimplifyOnnxModel(const std::string& model_bytes) {
  onnx::ModelProto proto;
  if (!proto.ParseFromString(model_bytes))
    return Status::Internal("the ONNX model to simplify does not parse");
  onnx::GraphProto& g = *proto.mutable_graph();
  if (HasSubgraphs(g)) return Status::Internal("simplify: graphs with subgraphs (If/Loop) are not handled");
  SimplifiedModel out;
  SimplifyReport& rep = out.report;
  rep.nodes_before = g.node_size();
  rep.initializers_before = g.initializer_size();
  rep.value_info_before = g.value_info_size();
  std::set<std::string> large;
  try {
    // Constant nodes -> initializers (a `value` tensor only; the other forms are left).
    for (int k = g.node_size(); k-- > 0;) {
      const onnx::NodeProto& n = g.node(k);
      if (n.op_type() != "Constant" || !n.domain().empty() || n.output_size() != 1) continue;
      const auto* a = Attr(n, "value");
      if (a == nullptr || n.attribute_size() != 1) continue;
      onnx::TensorProto* t = g.add_initializer();
      *t = a->t();
      t->set_name(n.output(0));
      g.mutable_node()->DeleteSubrange(k, 1);
      ++rep.constants;
    }
    // Each pass changes names or values the next one reads: re-infer between them.
    for (int round = 0; round < 16; ++round) {
      Infer(proto);
      bool changed = FoldConstants(g, &rep, &large);
      if (!changed) {
        Infer(proto);
        changed = RemoveNoOps(g, &rep);
      }
      changed = RemoveDead(g, &rep) || changed;
      if (!changed) break;
    }
    Infer(proto);
    onnx::checker::check_model(proto);  // after the strict shape inference above
  } catch (const std::exception& e) {
    return Status::Internal(std::string("simplify: ONNX shape inference or checker failed: ") + e.what());
  }
  rep.kept_large = static_cast<int64_t>(large.size());
  rep.nodes_after = g.node_size();
  rep.initializers_after = g.initializer_size();
  rep.value_info = g.value_info_size();
  if (!proto.SerializeToString(&out.bytes))
    return Status::Internal("serializing the simplified model failed");
  return out;
}

}  // namespace kestrel::exporter
