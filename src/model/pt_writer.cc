#include "model/pt_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <deque>
#include <functional>
#include <map>
#include <numeric>
#include <set>

#include "core/utf8.h"
#include "model/internal/pt_zip.h"

// The checkpoint is emitted in two steps: the module tree of the reference's
// DetectionModel is built from the layer plan (spec.h), taking each parameter
// and buffer from the state dict by name and checking its shape; then the
// tree and the checkpoint dict around it are written as pickle opcodes. The
// class names, attribute names and their order mirror what the reference
// 8.3 pickles (seen in ../shared/reference's genuine checkpoints), so that
// unpickling in the reference gives objects its code can run.

namespace kestrel::model {

namespace {

// --------------------------------------------------------------- pickle ----

// Protocol-2 opcodes, as Python's pickle module writes them for torch.save.
class Pickler {
 public:
  Pickler() { out_ = "\x80\x02"; }
  std::string Finish() {
    Op('.');
    return std::move(out_);
  }

  void None() { Op('N'); }
  void Bool(bool b) { Op(b ? '\x88' : '\x89'); }
  void Int(int64_t v) {
    if (v >= 0 && v < 256) {
      Op('K');
      Le(static_cast<uint64_t>(v), 1);
    } else if (v >= 0 && v < 65536) {
      Op('M');
      Le(static_cast<uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      Op('J');
      Le(static_cast<uint64_t>(static_cast<uint32_t>(static_cast<int32_t>(v))), 4);
    } else {
      Op('\x8a');  // LONG1: 8 bytes, two's complement little-endian
      out_.push_back('\x08');
      Le(static_cast<uint64_t>(v), 8);
    }
  }
  void Float(double d) {
    Op('G');  // BINFLOAT: big-endian IEEE 754 double
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    for (int k = 7; k >= 0; --k) out_.push_back(static_cast<char>((bits >> (8 * k)) & 0xFF));
  }
  void Str(const std::string& s) {
    if (Memoized("s" + s)) return;
    Op('X');
    Le(s.size(), 4);
    out_ += s;
    Put("s" + s);
  }
  void Global(const std::string& module, const std::string& name) {
    const std::string key = "g" + module + "\n" + name;
    if (Memoized(key)) return;
    Op('c');
    out_ += module + "\n" + name + "\n";
    Put(key);
  }
  void Mark() { Op('('); }
  void TupleFromMark() { Op('t'); }
  void EmptyTuple() { Op(')'); }
  void Tuple(int n) { Op(n == 1 ? '\x85' : n == 2 ? '\x86' : '\x87'); }  // n in 1..3
  void EmptyDict() { Op('}'); }
  void SetItems() { Op('u'); }
  void EmptyList() { Op(']'); }
  void Appends() { Op('e'); }
  void Reduce() { Op('R'); }
  void NewObj() { Op('\x81'); }
  void Build() { Op('b'); }
  void PersId() { Op('Q'); }

  // collections.OrderedDict(), to be filled by SETITEMS when it has items.
  void OrderedDict() {
    Global("collections", "OrderedDict");
    EmptyTuple();
    Reduce();
  }
  void IntTuple(const std::vector<int64_t>& v) {
    if (v.empty()) return EmptyTuple();
    if (v.size() > 3) Mark();
    for (int64_t x : v) Int(x);
    if (v.size() > 3) {
      TupleFromMark();
    } else {
      Tuple(static_cast<int>(v.size()));
    }
  }
  // A JSON value as the Python value yaml/json loading gives: None, bool,
  // int, float, str, list, dict. Objects and arrays nest.
  template <typename J>
  Status Json(const J& j, const std::string& field) {
    if (j.is_null()) {
      None();
    } else if (j.is_boolean()) {
      Bool(j.template get<bool>());
    } else if (j.is_number_unsigned()) {
      const auto v = j.template get<uint64_t>();
      if (v > static_cast<uint64_t>(INT64_MAX))
        return Status::InvalidArgument("integer " + std::to_string(v) + " is too large", {"", 0, field});
      Int(static_cast<int64_t>(v));
    } else if (j.is_number_integer()) {
      Int(j.template get<int64_t>());
    } else if (j.is_number_float()) {
      Float(j.template get<double>());
    } else if (j.is_string()) {
      Str(j.template get<std::string>());
    } else if (j.is_array()) {
      EmptyList();
      if (!j.empty()) {
        Mark();
        for (const auto& v : j) KESTREL_RETURN_IF_ERROR(Json(v, field));
        Appends();
      }
    } else if (j.is_object()) {
      EmptyDict();
      if (!j.empty()) {
        Mark();
        for (auto it = j.begin(); it != j.end(); ++it) {
          Str(it.key());
          KESTREL_RETURN_IF_ERROR(Json(it.value(), field + "." + it.key()));
        }
        SetItems();
      }
    } else {
      return Status::InvalidArgument("a value that is not plain data", {"", 0, field});
    }
    return Status();
  }

 private:
  void Op(char c) { out_.push_back(c); }
  void Le(uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out_.push_back(static_cast<char>((v >> (8 * k)) & 0xFF));
  }
  bool Memoized(const std::string& key) {
    auto it = memo_.find(key);
    if (it == memo_.end()) return false;
    if (it->second < 256) {
      Op('h');
      Le(it->second, 1);
    } else {
      Op('j');
      Le(it->second, 4);
    }
    return true;
  }
  void Put(const std::string& key) {
    const uint32_t id = next_++;
    memo_.emplace(key, id);
    if (id < 256) {
      Op('q');
      Le(id, 1);
    } else {
      Op('r');
      Le(id, 4);
    }
  }

  std::string out_;
  std::map<std::string, uint32_t> memo_;
  uint32_t next_ = 0;
};

// ---------------------------------------------------------- module tree ----

struct TensorSlot {
  std::string name;               // local name ("weight")
  const SafeTensor* t = nullptr;  // nullptr: None (a conv without bias)
};

// One nn.Module as the reference pickles it.
struct Mod {
  std::string module, cls;  // "ultralytics.nn.modules.conv", "Conv"
  std::vector<TensorSlot> params, buffers;
  std::vector<std::pair<std::string, Mod>> children;
  std::vector<std::pair<std::string, std::function<Status(Pickler&)>>> attrs;

  Mod(std::string m, std::string c) : module(std::move(m)), cls(std::move(c)) {}
  // The reference stays valid until the next Child() on this module.
  Mod& Child(const std::string& name, Mod m) {
    children.emplace_back(name, std::move(m));
    return children.back().second;
  }
  void Attr(const std::string& name, std::function<Status(Pickler&)> write) {
    attrs.emplace_back(name, std::move(write));
  }
  void Int(const std::string& name, int64_t v) {
    Attr(name, [v](Pickler& p) {
      p.Int(v);
      return Status();
    });
  }
  void Float(const std::string& name, double v) {
    Attr(name, [v](Pickler& p) {
      p.Float(v);
      return Status();
    });
  }
  void Bool(const std::string& name, bool v) {
    Attr(name, [v](Pickler& p) {
      p.Bool(v);
      return Status();
    });
  }
  void Str(const std::string& name, const std::string& v) {
    Attr(name, [v](Pickler& p) {
      p.Str(v);
      return Status();
    });
  }
  void None(const std::string& name) {
    Attr(name, [](Pickler& p) {
      p.None();
      return Status();
    });
  }
  void Pair(const std::string& name, int64_t v, int n = 2) {
    Attr(name, [v, n](Pickler& p) {
      p.IntTuple(std::vector<int64_t>(static_cast<size_t>(n), v));
      return Status();
    });
  }
};

const char* StorageClass(const std::string& dtype) {
  static const std::map<std::string, const char*> kClasses = {
      {"F32", "FloatStorage"}, {"F16", "HalfStorage"}, {"BF16", "BFloat16Storage"}, {"F64", "DoubleStorage"},
      {"I64", "LongStorage"},  {"I32", "IntStorage"},  {"I16", "ShortStorage"},     {"I8", "CharStorage"},
      {"U8", "ByteStorage"},   {"BOOL", "BoolStorage"}};
  auto it = kClasses.find(dtype);
  return it == kClasses.end() ? nullptr : it->second;
}

int ItemSize(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16") return 2;
  return 1;
}

class CheckpointWriter {
 public:
  CheckpointWriter(const SafeTensorFile& weights, const PtWriteOptions& o) : w_(weights), o_(o) {}

  Result<std::string> Run();

 private:
  // ---- tree building; the first error is kept in err_ ----
  const SafeTensor* Take(const std::string& name, const std::vector<int64_t>& shape) {
    auto it = w_.tensors.find(name);
    if (it == w_.tensors.end()) {
      Fail("the weights have no tensor '" + name + "', which a " + o_.spec.Name() + " model has");
      return nullptr;
    }
    if (it->second.shape != shape) {
      std::string want, got;
      for (int64_t d : shape) want += (want.empty() ? "" : ", ") + std::to_string(d);
      for (int64_t d : it->second.shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
      Fail("tensor '" + name + "' has shape [" + got + "]; a " + o_.spec.Name() +
           " model with nc=" + std::to_string(o_.spec.nc) + " has [" + want + "]");
    }
    used_.insert(name);
    return &it->second;
  }
  void Fail(const std::string& why) {
    if (err_.IsOk()) err_ = Status::InvalidArgument(why, {"", 0, "model"});
  }
  void Param(Mod& m, const std::string& prefix, const std::string& local, const std::vector<int64_t>& shape) {
    const SafeTensor* t = Take(prefix + local, shape);
    if (t) layer_params_ += std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
    m.params.push_back({local, t});
  }

  Mod Conv2d(const std::string& prefix, int c1, int c2, int k, int s, int p, int g, bool bias) {
    Mod m("torch.nn.modules.conv", "Conv2d");
    Param(m, prefix, "weight", {c2, c1 / g, k, k});
    if (bias) {
      Param(m, prefix, "bias", {c2});
    } else {
      m.params.push_back({"bias", nullptr});
    }
    m.Int("in_channels", c1);
    m.Int("out_channels", c2);
    m.Pair("kernel_size", k);
    m.Pair("stride", s);
    m.Pair("padding", p);
    m.Pair("dilation", 1);
    m.Bool("transposed", false);
    m.Pair("output_padding", 0);
    m.Int("groups", g);
    m.Str("padding_mode", "zeros");
    m.Pair("_reversed_padding_repeated_twice", p, 4);
    return m;
  }
  Mod BatchNorm(const std::string& prefix, int c) {
    Mod m("torch.nn.modules.batchnorm", "BatchNorm2d");
    Param(m, prefix, "weight", {c});
    Param(m, prefix, "bias", {c});
    m.buffers.push_back({"running_mean", Take(prefix + "running_mean", {c})});
    m.buffers.push_back({"running_var", Take(prefix + "running_var", {c})});
    m.buffers.push_back({"num_batches_tracked", Take(prefix + "num_batches_tracked", {})});
    m.Int("num_features", c);
    m.Float("eps", 0.001);
    m.Float("momentum", 0.03);
    m.Bool("affine", true);
    m.Bool("track_running_stats", true);
    return m;
  }
  // ultralytics Conv (or DWConv): Conv2d(bias=False) + BatchNorm2d + SiLU / Identity.
  Mod Conv(const std::string& prefix, int c1, int c2, int k, int s = 1, int p = -1, int g = 1,
           bool act = true, const char* cls = "Conv") {
    Mod m("ultralytics.nn.modules.conv", cls);
    const int pad = p >= 0 ? p : k / 2;
    m.Child("conv", Conv2d(prefix + "conv.", c1, c2, k, s, pad, g, false));
    m.Child("bn", BatchNorm(prefix + "bn.", c2));
    if (act) {
      Mod silu("torch.nn.modules.activation", "SiLU");
      silu.Bool("inplace", true);
      m.Child("act", std::move(silu));
    } else {
      m.Child("act", Mod("torch.nn.modules.linear", "Identity"));
    }
    return m;
  }
  static Mod Container(const char* cls) { return Mod("torch.nn.modules.container", cls); }

  Mod Bottleneck(const std::string& prefix, int c1, int c2, bool shortcut, int k1, int k2, double e) {
    Mod m("ultralytics.nn.modules.block", "Bottleneck");
    const int c = static_cast<int>(c2 * e);
    m.Child("cv1", Conv(prefix + "cv1.", c1, c, k1));
    m.Child("cv2", Conv(prefix + "cv2.", c, c2, k2));
    m.Bool("add", shortcut && c1 == c2);
    return m;
  }
  // C3 and C3k: cv1, cv2 1x1 -> c_; n Bottlenecks (k1, 3) at e=1; cv3 over the concat.
  Mod C3(const std::string& prefix, const char* cls, int c1, int c2, int n, bool shortcut, int k1) {
    Mod m("ultralytics.nn.modules.block", cls);
    const int c = static_cast<int>(c2 * 0.5);
    m.Child("cv1", Conv(prefix + "cv1.", c1, c, 1));
    m.Child("cv2", Conv(prefix + "cv2.", c1, c, 1));
    m.Child("cv3", Conv(prefix + "cv3.", 2 * c, c2, 1));
    Mod& seq = m.Child("m", Container("Sequential"));
    for (int i = 0; i < n; ++i) {
      const std::string k = std::to_string(i);
      seq.Child(k, Bottleneck(prefix + "m." + k + ".", c, c, shortcut, k1, 3, 1.0));
    }
    return m;
  }
  // C2f and C3k2 (a C2f whose blocks are half-width Bottlenecks or C3k).
  Mod C2f(const std::string& prefix, const LayerPlan& l) {
    const bool k2 = l.kind == LayerKind::kC3k2;
    Mod m("ultralytics.nn.modules.block", k2 ? "C3k2" : "C2f");
    const int c = l.hidden;
    m.Child("cv1", Conv(prefix + "cv1.", l.c_in, 2 * c, 1));
    m.Child("cv2", Conv(prefix + "cv2.", (2 + l.repeats) * c, l.c_out, 1));
    Mod& list = m.Child("m", Container("ModuleList"));
    for (int i = 0; i < l.repeats; ++i) {
      const std::string k = std::to_string(i), p = prefix + "m." + k + ".";
      if (!k2) {
        list.Child(k, Bottleneck(p, c, c, l.shortcut, 3, 3, 1.0));
      } else if (l.c3k) {
        list.Child(k, C3(p, "C3k", c, c, 2, l.shortcut, 3));
      } else {
        list.Child(k, Bottleneck(p, c, c, l.shortcut, 3, 3, 0.5));
      }
    }
    m.Int("c", c);
    return m;
  }
  Mod Sppf(const std::string& prefix, const LayerPlan& l) {
    Mod m("ultralytics.nn.modules.block", "SPPF");
    const int c = l.c_in / 2;
    m.Child("cv1", Conv(prefix + "cv1.", l.c_in, c, 1));
    m.Child("cv2", Conv(prefix + "cv2.", 4 * c, l.c_out, 1));
    Mod pool("torch.nn.modules.pooling", "MaxPool2d");
    pool.Int("kernel_size", l.kernel);
    pool.Int("stride", 1);
    pool.Int("padding", l.kernel / 2);
    pool.Int("dilation", 1);
    pool.Bool("return_indices", false);
    pool.Bool("ceil_mode", false);
    m.Child("m", std::move(pool));
    return m;
  }
  Mod C2psa(const std::string& prefix, const LayerPlan& l) {
    Mod m("ultralytics.nn.modules.block", "C2PSA");
    const int c = l.hidden;
    m.Child("cv1", Conv(prefix + "cv1.", l.c_in, 2 * c, 1));
    m.Child("cv2", Conv(prefix + "cv2.", 2 * c, l.c_out, 1));
    Mod& seq = m.Child("m", Container("Sequential"));
    const int heads = AttentionHeads(c);
    for (int i = 0; i < l.repeats; ++i) {
      const std::string k = std::to_string(i), p = prefix + "m." + k + ".";
      Mod block("ultralytics.nn.modules.block", "PSABlock");
      Mod attn("ultralytics.nn.modules.block", "Attention");
      const int head_dim = c / heads, key_dim = static_cast<int>(head_dim * 0.5);
      attn.Child("qkv", Conv(p + "attn.qkv.", c, c + 2 * key_dim * heads, 1, 1, -1, 1, false));
      attn.Child("proj", Conv(p + "attn.proj.", c, c, 1, 1, -1, 1, false));
      attn.Child("pe", Conv(p + "attn.pe.", c, c, 3, 1, -1, c, false));
      attn.Int("num_heads", heads);
      attn.Int("head_dim", head_dim);
      attn.Int("key_dim", key_dim);
      attn.Float("scale", std::pow(static_cast<double>(key_dim), -0.5));
      block.Child("attn", std::move(attn));
      Mod& ffn = block.Child("ffn", Container("Sequential"));
      ffn.Child("0", Conv(p + "ffn.0.", c, 2 * c, 1));
      ffn.Child("1", Conv(p + "ffn.1.", 2 * c, c, 1, 1, -1, 1, false));
      block.Bool("add", true);
      seq.Child(k, std::move(block));
    }
    m.Int("c", c);
    return m;
  }
  Mod Detect(const std::string& prefix, const LayerPlan& l) {
    Mod m("ultralytics.nn.modules.head", "Detect");
    const int c2 = DetectBoxChannels(l.detect_channels), c3 = DetectClsChannels(l.detect_channels, l.nc);
    Mod cv2 = Container("ModuleList"), cv3 = Container("ModuleList");
    for (size_t i = 0; i < l.detect_channels.size(); ++i) {
      const int x = l.detect_channels[i];
      const std::string k = std::to_string(i), p2 = prefix + "cv2." + k + ".", p3 = prefix + "cv3." + k + ".";
      Mod box = Container("Sequential");
      box.Child("0", Conv(p2 + "0.", x, c2, 3));
      box.Child("1", Conv(p2 + "1.", c2, c2, 3));
      box.Child("2", Conv2d(p2 + "2.", c2, 4 * kRegMax, 1, 1, 0, 1, true));
      cv2.Child(k, std::move(box));
      Mod cls = Container("Sequential");
      if (l.detect_dw_cls) {
        Mod s0 = Container("Sequential");
        s0.Child("0", Conv(p3 + "0.0.", x, x, 3, 1, -1, std::gcd(x, x), true, "DWConv"));
        s0.Child("1", Conv(p3 + "0.1.", x, c3, 1));
        cls.Child("0", std::move(s0));
        Mod s1 = Container("Sequential");
        s1.Child("0", Conv(p3 + "1.0.", c3, c3, 3, 1, -1, std::gcd(c3, c3), true, "DWConv"));
        s1.Child("1", Conv(p3 + "1.1.", c3, c3, 1));
        cls.Child("1", std::move(s1));
      } else {
        cls.Child("0", Conv(p3 + "0.", x, c3, 3));
        cls.Child("1", Conv(p3 + "1.", c3, c3, 3));
      }
      cls.Child("2", Conv2d(p3 + "2.", c3, l.nc, 1, 1, 0, 1, true));
      cv3.Child(k, std::move(cls));
    }
    m.Child("cv2", std::move(cv2));
    m.Child("cv3", std::move(cv3));
    Mod dfl("ultralytics.nn.modules.block", "DFL");
    dfl.Child("conv", Conv2d(prefix + "dfl.conv.", kRegMax, 1, 1, 1, 0, 1, false));
    dfl.Int("c1", kRegMax);
    m.Child("dfl", std::move(dfl));
    m.Int("nc", l.nc);
    m.Int("nl", static_cast<int64_t>(l.detect_channels.size()));
    m.Int("reg_max", kRegMax);
    m.Int("no", l.nc + 4 * kRegMax);
    const std::vector<int> strides = l.detect_strides;
    m.Attr("stride", [this, strides](Pickler& p) { return StrideTensor(p, strides); });
    return m;
  }
  Mod Layer(const LayerPlan& l) {
    const std::string prefix = "model." + std::to_string(l.index) + ".";
    layer_params_ = 0;
    Mod m("", "");
    std::string type;
    switch (l.kind) {
      case LayerKind::kConv:
        m = Conv(prefix, l.c_in, l.c_out, l.kernel, l.stride, l.padding);
        break;
      case LayerKind::kC2f:
      case LayerKind::kC3k2:
        m = C2f(prefix, l);
        break;
      case LayerKind::kC3:
        m = C3(prefix, "C3", l.c_in, l.c_out, l.repeats, l.shortcut, 1);
        break;
      case LayerKind::kSppf:
        m = Sppf(prefix, l);
        break;
      case LayerKind::kC2psa:
        m = C2psa(prefix, l);
        break;
      case LayerKind::kUpsample:
        m = Mod("torch.nn.modules.upsampling", "Upsample");
        m.Str("name", "Upsample");
        m.None("size");
        m.Float("scale_factor", static_cast<double>(l.stride));
        m.Str("mode", "nearest");
        m.None("align_corners");
        m.None("recompute_scale_factor");
        break;
      case LayerKind::kConcat:
        m = Mod("ultralytics.nn.modules.conv", "Concat");
        m.Int("d", 1);
        break;
      case LayerKind::kDetect:
        m = Detect(prefix, l);
        break;
    }
    // What the reference's parse_model sets on every layer.
    m.Int("np", layer_params_);
    m.Int("i", l.index);
    const std::vector<int> from = l.from;
    m.Attr("f", [from](Pickler& p) {
      if (from.size() == 1) {
        p.Int(from[0]);
        return Status();
      }
      return p.Json(nlohmann::json(from), "f");
    });
    m.Str("type", m.module + "." + m.cls);
    if (l.kind == LayerKind::kDetect) m.Bool("inplace", true);
    return m;
  }

  // ---- emission ----
  Status StrideTensor(Pickler& p, const std::vector<int>& strides) {
    SafeTensor t;
    t.dtype = "F32";
    t.shape = {static_cast<int64_t>(strides.size())};
    for (int s : strides) {
      const float f = static_cast<float>(s);
      t.data.append(reinterpret_cast<const char*>(&f), 4);
    }
    owned_.push_back(std::move(t));
    return Tensor(p, owned_.back(), false, "stride");
  }
  Status Tensor(Pickler& p, const SafeTensor& t, bool param, const std::string& name) {
    const char* storage = StorageClass(t.dtype);
    if (!storage)
      return Status::InvalidArgument("tensor '" + name + "' has dtype " + t.dtype, {"", 0, "model"});
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    if (static_cast<uint64_t>(numel) * static_cast<uint64_t>(ItemSize(t.dtype)) != t.data.size()) {
      return Status::InvalidArgument(
          "tensor '" + name + "' holds " + std::to_string(t.data.size()) + " bytes, not its shape's",
          {"", 0, "model"});
    }
    std::vector<int64_t> stride(t.shape.size(), 1);
    for (size_t d = t.shape.size(); d-- > 1;) stride[d - 1] = stride[d] * t.shape[d];
    const std::string key = std::to_string(storages_.size());
    storages_.emplace_back(key, std::string_view(t.data));
    if (param) p.Global("torch._utils", "_rebuild_parameter");
    p.Global("torch._utils", "_rebuild_tensor_v2");
    p.Mark();
    p.Mark();
    p.Str("storage");
    p.Global("torch", storage);
    p.Str(key);
    p.Str("cpu");
    p.Int(numel);
    p.TupleFromMark();
    p.PersId();
    p.Int(0);  // storage offset
    p.IntTuple(t.shape);
    p.IntTuple(stride);
    p.Bool(false);  // requires_grad (the parameter wrapper sets its own)
    p.OrderedDict();
    p.TupleFromMark();
    p.Reduce();
    if (param) {
      p.Bool(false);  // the reference saves EMA copies, which do not require grad
      p.OrderedDict();
      p.Tuple(3);
      p.Reduce();
    }
    return Status();
  }
  Status Slots(Pickler& p, const std::vector<TensorSlot>& slots, bool param) {
    p.OrderedDict();
    if (slots.empty()) return Status();
    p.Mark();
    for (const TensorSlot& s : slots) {
      p.Str(s.name);
      if (s.t) {
        KESTREL_RETURN_IF_ERROR(Tensor(p, *s.t, param, s.name));
      } else {
        p.None();
      }
    }
    p.SetItems();
    return Status();
  }
  Status Emit(Pickler& p, const Mod& m) {
    p.Global(m.module, m.cls);
    p.EmptyTuple();
    p.NewObj();
    p.EmptyDict();
    p.Mark();
    p.Str("training");
    p.Bool(false);
    p.Str("_parameters");
    KESTREL_RETURN_IF_ERROR(Slots(p, m.params, true));
    p.Str("_buffers");
    KESTREL_RETURN_IF_ERROR(Slots(p, m.buffers, false));
    p.Str("_non_persistent_buffers_set");
    p.Global("__builtin__", "set");
    p.EmptyList();
    p.Tuple(1);
    p.Reduce();
    for (const char* hooks :
         {"_backward_hooks", "_is_full_backward_hook", "_forward_hooks", "_forward_pre_hooks",
          "_state_dict_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks"}) {
      p.Str(hooks);
      if (std::strcmp(hooks, "_is_full_backward_hook") == 0) {
        p.None();
      } else {
        p.OrderedDict();
      }
    }
    p.Str("_modules");
    p.OrderedDict();
    if (!m.children.empty()) {
      p.Mark();
      for (const auto& [name, child] : m.children) {
        p.Str(name);
        KESTREL_RETURN_IF_ERROR(Emit(p, child));
      }
      p.SetItems();
    }
    for (const auto& [name, write] : m.attrs) {
      p.Str(name);
      KESTREL_RETURN_IF_ERROR(write(p));
    }
    p.SetItems();
    p.Build();
    return Status();
  }

  const SafeTensorFile& w_;
  const PtWriteOptions& o_;
  Status err_;
  std::set<std::string> used_;
  int64_t layer_params_ = 0;
  std::deque<SafeTensor> owned_;  // tensors that are not in the state dict (stride)
  std::vector<std::pair<std::string, std::string_view>> storages_;
};

Result<std::string> CheckpointWriter::Run() {
  const ModelSpec& spec = o_.spec;
  if (!o_.names.empty() && static_cast<int>(o_.names.size()) != spec.nc) {
    return Status::InvalidArgument(
        std::to_string(o_.names.size()) + " class names for nc=" + std::to_string(spec.nc), {"", 0, "names"});
  }
  if (!o_.train_args.is_object()) return Status::InvalidArgument("not an object", {"", 0, "train_args"});
  if (!o_.train_metrics.is_null() && !o_.train_metrics.is_object())
    return Status::InvalidArgument("not an object", {"", 0, "train_metrics"});
  if (o_.archive_name.empty() || o_.archive_name.find('/') != std::string::npos)
    return Status::InvalidArgument("'" + o_.archive_name + "' is not a file stem", {"", 0, "archive_name"});

  const std::vector<LayerPlan> plan = BuildLayerPlan(spec);
  Mod seq = Container("Sequential");
  std::set<int> save;
  for (const LayerPlan& l : plan) {
    seq.Child(std::to_string(l.index), Layer(l));
    for (int f : l.from) {
      if (f != -1) save.insert(f);
    }
  }
  KESTREL_RETURN_IF_ERROR(err_);
  for (const auto& [name, t] : w_.tensors) {
    if (!used_.count(name)) {
      return Status::InvalidArgument(
          "tensor '" + EscapeInvalidUtf8(name) + "' is not part of a " + spec.Name() + " model",
          {"", 0, "model"});
    }
  }

  nlohmann::json args = nlohmann::json::object();
  args["task"] = "detect";
  args["mode"] = "train";
  for (auto it = o_.train_args.begin(); it != o_.train_args.end(); ++it) args[it.key()] = it.value();

  Mod model("ultralytics.nn.tasks", "DetectionModel");
  model.Child("model", std::move(seq));
  model.Attr("yaml", [&spec](Pickler& p) {
    // The graph itself (a custom one's rows too), so the reference rebuilds it.
    nlohmann::ordered_json yaml = GraphYaml(spec);
    yaml["scale"] = spec.scale.name;
    yaml["yaml_file"] = spec.Name() + ".yaml";
    yaml["channels"] = 3;
    return p.Json(yaml, "yaml");
  });
  model.Attr("save", [&save](Pickler& p) { return p.Json(nlohmann::json(save), "save"); });
  const auto write_names = [this](Pickler& p) {
    p.EmptyDict();  // {0: "name", ...}, as the reference keeps names
    p.Mark();
    for (int i = 0; i < o_.spec.nc; ++i) {
      p.Int(i);
      p.Str(o_.names.empty() ? "class" + std::to_string(i) : o_.names[static_cast<size_t>(i)]);
    }
    p.SetItems();
    return Status();
  };
  model.Attr("names", write_names);
  model.Bool("inplace", true);
  model.Bool("end2end", false);
  const std::vector<int> strides = plan.back().detect_strides;
  model.Attr("stride", [this, &strides](Pickler& p) { return StrideTensor(p, strides); });
  model.Int("nc", spec.nc);
  model.Attr("args", [&args](Pickler& p) { return p.Json(args, "train_args"); });
  model.None("criterion");

  Pickler p;
  p.EmptyDict();
  p.Mark();
  p.Str("date");
  p.Str(o_.date);
  p.Str("version");
  p.Str(kPtLayoutVersion);
  p.Str("epoch");
  p.Int(o_.epoch);
  p.Str("best_fitness");
  if (o_.best_fitness && std::isfinite(*o_.best_fitness)) {
    p.Float(*o_.best_fitness);
  } else {
    p.None();
  }
  p.Str("model");
  KESTREL_RETURN_IF_ERROR(Emit(p, model));
  for (const char* key : {"ema", "updates", "optimizer"}) {
    p.Str(key);
    p.None();
  }
  p.Str("train_args");
  KESTREL_RETURN_IF_ERROR(p.Json(args, "train_args"));
  if (o_.train_metrics.is_object()) {
    p.Str("train_metrics");
    KESTREL_RETURN_IF_ERROR(p.Json(o_.train_metrics, "train_metrics"));
  }
  p.SetItems();
  const std::string pickle = p.Finish();

  const std::string& a = o_.archive_name;
  std::vector<std::pair<std::string, std::string_view>> entries;
  entries.emplace_back(a + "/data.pkl", pickle);
  entries.emplace_back(a + "/byteorder", "little");
  for (const auto& [key, bytes] : storages_) entries.emplace_back(a + "/data/" + key, bytes);
  entries.emplace_back(a + "/version", "3\n");
  return pt::WriteStoredZip(entries);
}

}  // namespace

Result<std::string> SerializePtCheckpoint(const SafeTensorFile& weights, const PtWriteOptions& options) {
  CheckpointWriter writer(weights, options);
  return writer.Run();
}

Status WritePtCheckpoint(Env& env, const std::string& path, const SafeTensorFile& weights,
                         const PtWriteOptions& options) {
  auto bytes = SerializePtCheckpoint(weights, options);
  if (!bytes.IsOk()) return bytes.GetStatus().WithLocation({path});
  return env.WriteFileAtomic(path, *bytes);
}

std::string PtDate(int64_t unix_millis) {
  const std::time_t secs = static_cast<std::time_t>(unix_millis / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06d", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(unix_millis % 1000) * 1000);
  return buf;
}

}  // namespace kestrel::model
