#include "model/spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/parse.h"
#include "core/safetensors.h"
#include "model/pt_checkpoint.h"

namespace kestrel::model {

std::vector<ModelScale> KnownScales() {
  return {
      {"n", 0.33, 0.25, 1024}, {"s", 0.33, 0.50, 1024},  {"m", 0.67, 0.75, 768}, {"l", 1.00, 1.00, 512},
      {"x", 1.00, 1.25, 512},  {"t", 0.33, 0.125, 1024},  // Kestrel-only: tiny, for fast tests
  };
}

static std::string KnownSpecList() {
  std::string s;
  for (const auto& sc : KnownScales()) s += (s.empty() ? "" : ", ") + ("yolov8" + sc.name);
  return s;
}

Result<ModelSpec> ParseModelSpec(const std::string& spec, int nc) {
  std::string key;
  for (char c : spec) key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string kYaml = ".yaml";
  if (key.size() > kYaml.size() && key.compare(key.size() - kYaml.size(), kYaml.size(), kYaml) == 0) {
    key.resize(key.size() - kYaml.size());
  }
  if (key.rfind("yolov8", 0) == 0) key = key.substr(6);
  if (nc < 1 || nc > 10000) {
    return Status::InvalidArgument("class count " + std::to_string(nc) + " out of range [1, 10000]",
                                   {"", 0, "nc"});
  }
  for (const auto& sc : KnownScales()) {
    if (sc.name == key) return ModelSpec{sc, nc};
  }
  return Status::InvalidArgument("unknown model spec '" + spec + "'; known: " + KnownSpecList() +
                                     " (also as n/s/m/l/x/t or <name>.yaml)",
                                 {"", 0, "model"});
}

int MakeDivisible(double x, int divisor) { return static_cast<int>(std::ceil(x / divisor)) * divisor; }

const char* LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kConv:
      return "Conv";
    case LayerKind::kC2f:
      return "C2f";
    case LayerKind::kSppf:
      return "SPPF";
    case LayerKind::kUpsample:
      return "Upsample";
    case LayerKind::kConcat:
      return "Concat";
    case LayerKind::kDetect:
      return "Detect";
  }
  return "?";
}

namespace {

// One row of yolov8.yaml before scaling: from, n, module, base channels, k, s, shortcut.
struct YamlRow {
  std::vector<int> from;
  int n;
  LayerKind kind;
  int c;
  int k;
  int s;
  bool shortcut;
};

const std::vector<YamlRow>& Yolov8Yaml() {
  static const std::vector<YamlRow> rows = {
      // backbone
      {{-1}, 1, LayerKind::kConv, 64, 3, 2, false},    // 0 P1/2
      {{-1}, 1, LayerKind::kConv, 128, 3, 2, false},   // 1 P2/4
      {{-1}, 3, LayerKind::kC2f, 128, 0, 0, true},     // 2
      {{-1}, 1, LayerKind::kConv, 256, 3, 2, false},   // 3 P3/8
      {{-1}, 6, LayerKind::kC2f, 256, 0, 0, true},     // 4
      {{-1}, 1, LayerKind::kConv, 512, 3, 2, false},   // 5 P4/16
      {{-1}, 6, LayerKind::kC2f, 512, 0, 0, true},     // 6
      {{-1}, 1, LayerKind::kConv, 1024, 3, 2, false},  // 7 P5/32
      {{-1}, 3, LayerKind::kC2f, 1024, 0, 0, true},    // 8
      {{-1}, 1, LayerKind::kSppf, 1024, 5, 1, false},  // 9
      // head
      {{-1}, 1, LayerKind::kUpsample, 0, 0, 2, false},        // 10
      {{-1, 6}, 1, LayerKind::kConcat, 0, 0, 0, false},       // 11 cat backbone P4
      {{-1}, 3, LayerKind::kC2f, 512, 0, 0, false},           // 12
      {{-1}, 1, LayerKind::kUpsample, 0, 0, 2, false},        // 13
      {{-1, 4}, 1, LayerKind::kConcat, 0, 0, 0, false},       // 14 cat backbone P3
      {{-1}, 3, LayerKind::kC2f, 256, 0, 0, false},           // 15 P3/8 out
      {{-1}, 1, LayerKind::kConv, 256, 3, 2, false},          // 16
      {{-1, 12}, 1, LayerKind::kConcat, 0, 0, 0, false},      // 17 cat head P4
      {{-1}, 3, LayerKind::kC2f, 512, 0, 0, false},           // 18 P4/16 out
      {{-1}, 1, LayerKind::kConv, 512, 3, 2, false},          // 19
      {{-1, 9}, 1, LayerKind::kConcat, 0, 0, 0, false},       // 20 cat head P5
      {{-1}, 3, LayerKind::kC2f, 1024, 0, 0, false},          // 21 P5/32 out
      {{15, 18, 21}, 1, LayerKind::kDetect, 0, 0, 0, false},  // 22
  };
  return rows;
}

}  // namespace

std::vector<LayerPlan> BuildLayerPlan(const ModelSpec& spec) {
  const auto& rows = Yolov8Yaml();
  std::vector<LayerPlan> plan;
  std::vector<int> ch;  // output channels per layer
  auto in_ch = [&](int f) { return f < 0 ? (ch.empty() ? 3 : ch.back()) : ch[static_cast<size_t>(f)]; };
  for (size_t i = 0; i < rows.size(); ++i) {
    const YamlRow& r = rows[i];
    LayerPlan p;
    p.index = static_cast<int>(i);
    p.from = r.from;
    p.kind = r.kind;
    p.kernel = r.k;
    p.stride = r.s;
    p.shortcut = r.shortcut;
    p.repeats = r.n > 1 ? std::max(static_cast<int>(std::lround(r.n * spec.scale.depth)), 1) : r.n;
    switch (r.kind) {
      case LayerKind::kConv:
      case LayerKind::kC2f:
      case LayerKind::kSppf:
        p.c_in = in_ch(r.from[0]);
        p.c_out = MakeDivisible(std::min(r.c, spec.scale.max_channels) * spec.scale.width, 8);
        break;
      case LayerKind::kUpsample:
        p.c_in = p.c_out = in_ch(r.from[0]);
        break;
      case LayerKind::kConcat:
        for (int f : r.from) p.c_in += in_ch(f);
        p.c_out = p.c_in;
        break;
      case LayerKind::kDetect:
        for (int f : r.from) p.detect_channels.push_back(in_ch(f));
        p.c_in = p.detect_channels[0];
        p.nc = spec.nc;
        p.c_out = 4 * kRegMax + spec.nc;
        break;
    }
    ch.push_back(p.c_out);
    plan.push_back(std::move(p));
  }
  return plan;
}

int DetectBoxChannels(const std::vector<int>& detect_channels) {
  return std::max({16, detect_channels[0] / 4, kRegMax * 4});
}

int DetectClsChannels(const std::vector<int>& detect_channels, int nc) {
  return std::max(detect_channels[0], std::min(nc, 100));
}

namespace {

// Accumulates params, BN buffers and MACs of convs at a given spatial size.
struct Counter {
  int64_t params = 0;
  int64_t buffers = 0;
  double macs = 0;

  // Conv2d (optionally with bias) without BN.
  void PlainConv(int c1, int c2, int k, bool bias, int64_t h_out, int64_t w_out) {
    params += static_cast<int64_t>(c1) * c2 * k * k + (bias ? c2 : 0);
    macs += static_cast<double>(h_out) * static_cast<double>(w_out) * c2 * c1 * k * k;
  }
  // Kestrel Conv = Conv2d(no bias) + BN(weight, bias; running mean/var, count).
  void ConvBn(int c1, int c2, int k, int64_t h_out, int64_t w_out) {
    PlainConv(c1, c2, k, false, h_out, w_out);
    params += 2 * static_cast<int64_t>(c2);
    buffers += 2 * static_cast<int64_t>(c2) + 1;
  }
};

int64_t ConvOut(int64_t size, int k, int s) { return (size + 2 * static_cast<int64_t>(k / 2) - k) / s + 1; }

std::string FromString(const std::vector<int>& from) {
  if (from.size() == 1) return std::to_string(from[0]);
  std::string s = "[";
  for (size_t i = 0; i < from.size(); ++i) s += (i ? ", " : "") + std::to_string(from[i]);
  return s + "]";
}

}  // namespace

ModelSummary SummarizeModel(const ModelSpec& spec, int imgsz_h, int imgsz_w) {
  ModelSummary out;
  out.name = spec.Name();
  out.nc = spec.nc;
  out.imgsz_h = imgsz_h;
  out.imgsz_w = imgsz_w;
  std::vector<std::pair<int64_t, int64_t>> hw;  // output spatial size per layer
  auto in_hw = [&](int f) {
    return f < 0 ? (hw.empty() ? std::make_pair<int64_t, int64_t>(imgsz_h, imgsz_w) : hw.back())
                 : hw[static_cast<size_t>(f)];
  };
  for (const LayerPlan& p : BuildLayerPlan(spec)) {
    Counter c;
    auto [h, w] = in_hw(p.from[0]);
    std::string args;
    switch (p.kind) {
      case LayerKind::kConv:
        h = ConvOut(h, p.kernel, p.stride);
        w = ConvOut(w, p.kernel, p.stride);
        c.ConvBn(p.c_in, p.c_out, p.kernel, h, w);
        args = "[" + std::to_string(p.c_in) + ", " + std::to_string(p.c_out) + ", " +
               std::to_string(p.kernel) + ", " + std::to_string(p.stride) + "]";
        break;
      case LayerKind::kC2f: {
        const int hidden = p.c_out / 2;
        c.ConvBn(p.c_in, 2 * hidden, 1, h, w);
        for (int i = 0; i < p.repeats; ++i) {
          c.ConvBn(hidden, hidden, 3, h, w);
          c.ConvBn(hidden, hidden, 3, h, w);
        }
        c.ConvBn((2 + p.repeats) * hidden, p.c_out, 1, h, w);
        args = "[" + std::to_string(p.c_in) + ", " + std::to_string(p.c_out) + ", " +
               std::to_string(p.repeats) + ", " + (p.shortcut ? "True" : "False") + "]";
        break;
      }
      case LayerKind::kSppf: {
        const int hidden = p.c_in / 2;
        c.ConvBn(p.c_in, hidden, 1, h, w);
        c.ConvBn(4 * hidden, p.c_out, 1, h, w);
        args = "[" + std::to_string(p.c_in) + ", " + std::to_string(p.c_out) + ", " +
               std::to_string(p.kernel) + "]";
        break;
      }
      case LayerKind::kUpsample:
        h *= p.stride;
        w *= p.stride;
        args = "[None, 2, 'nearest']";
        break;
      case LayerKind::kConcat:
        args = "[1]";
        break;
      case LayerKind::kDetect: {
        const int c2 = DetectBoxChannels(p.detect_channels);
        const int c3 = DetectClsChannels(p.detect_channels, p.nc);
        int64_t anchors = 0;
        args = "[" + std::to_string(p.nc) + ", [";
        for (size_t i = 0; i < p.from.size(); ++i) {
          const auto [lh, lw] = in_hw(p.from[i]);
          const int x = p.detect_channels[i];
          anchors += lh * lw;
          c.ConvBn(x, c2, 3, lh, lw);
          c.ConvBn(c2, c2, 3, lh, lw);
          c.PlainConv(c2, 4 * kRegMax, 1, true, lh, lw);
          c.ConvBn(x, c3, 3, lh, lw);
          c.ConvBn(c3, c3, 3, lh, lw);
          c.PlainConv(c3, p.nc, 1, true, lh, lw);
          args += (i ? ", " : "") + std::to_string(x);
        }
        args += "]]";
        // DFL: 1x1 conv over 16 bins, output [1, 1, 4, anchors].
        c.PlainConv(kRegMax, 1, 1, false, 4, anchors);
        out.gradients -= kRegMax;  // the DFL conv is frozen
        break;
      }
    }
    hw.emplace_back(h, w);
    LayerSummary ls;
    ls.index = p.index;
    ls.from = p.from;
    ls.repeats = p.repeats;
    ls.params = c.params;
    ls.type = LayerKindName(p.kind);
    ls.args = std::move(args);
    ls.gflops = 2.0 * c.macs / 1e9;
    out.params += c.params;
    out.gradients += c.params;
    out.buffers += c.buffers;
    out.gflops += ls.gflops;
    out.layers.push_back(std::move(ls));
  }
  return out;
}

std::string FormatSummary(const ModelSummary& s) {
  std::ostringstream os;
  char line[256];
  std::snprintf(line, sizeof line, "%5s %14s %3s %10s %-9s %s\n", "", "from", "n", "params", "module",
                "arguments");
  os << line;
  for (const auto& l : s.layers) {
    std::snprintf(line, sizeof line, "%5d %14s %3d %10lld %-9s %s\n", l.index, FromString(l.from).c_str(),
                  l.repeats, static_cast<long long>(l.params), l.type.c_str(), l.args.c_str());
    os << line;
  }
  std::snprintf(line, sizeof line,
                "%s summary (nc=%d): %zu layers, %lld parameters, %lld gradients, %.1f GFLOPs at %dx%d\n",
                s.name.c_str(), s.nc, s.layers.size(), static_cast<long long>(s.params),
                static_cast<long long>(s.gradients), s.gflops, s.imgsz_w, s.imgsz_h);
  os << line;
  return os.str();
}

Result<WeightsInfo> ReadWeightsInfo(const std::string& path) {
  // safetensors or an Ultralytics .pt (by magic bytes; pt_checkpoint.h).
  KESTREL_ASSIGN_OR_RETURN(SafeTensorFile file, ReadWeightsFile(path));
  WeightsInfo info;
  const auto& md = file.metadata;
  if (md.count("scale") && md.count("nc")) {
    auto nc = ParseInt64(md.at("nc"), {path, 0, "nc"}, std::numeric_limits<int>::min(),
                         std::numeric_limits<int>::max(), "an integer class count");
    if (!nc.IsOk()) return Status::Corruption("metadata nc: " + nc.GetStatus().Message(), {path, 0, "nc"});
    auto spec = ParseModelSpec(md.at("scale"), static_cast<int>(*nc));
    if (!spec.IsOk()) return spec.GetStatus().WithLocation({path, 0, "scale"});
    info.spec = *spec;
    info.from_metadata = true;
    if (md.count("kestrel_format_version")) {
      auto v = ParseInt64(md.at("kestrel_format_version"), {path, 0, "kestrel_format_version"}, 0, 1 << 30);
      if (!v.IsOk()) {
        return Status::Corruption("bad kestrel_format_version: " + v.GetStatus().Message(),
                                  {path, 0, "kestrel_format_version"});
      }
      info.format_version = static_cast<int>(*v);
    }
    if (md.count("names")) {
      try {
        info.names = nlohmann::json::parse(md.at("names")).get<std::vector<std::string>>();
      } catch (const std::exception& e) {
        return Status::Corruption(std::string("metadata names is not a JSON string array: ") + e.what(),
                                  {path, 0, "names"});
      }
    }
    return info;
  }
  // No Kestrel metadata (e.g. an Ultralytics state_dict): infer from shapes.
  auto stem = file.tensors.find("model.0.conv.weight");
  auto cls = file.tensors.find("model.22.cv3.0.2.bias");
  if (stem == file.tensors.end() || cls == file.tensors.end() || stem->second.shape.size() != 4 ||
      cls->second.shape.size() != 1) {
    return Status::InvalidArgument(
        "not YOLOv8 detection weights: need model.0.conv.weight [C, 3, 3, 3] and "
        "model.22.cv3.0.2.bias [nc] (or Kestrel metadata scale/nc)",
        {path});
  }
  const int64_t width = stem->second.shape[0];
  const int nc = static_cast<int>(cls->second.shape[0]);
  // Repeats of layer 4 (C2f, 6 at depth 1) tell the depth apart.
  int repeats = 0;
  while (file.tensors.count("model.4.m." + std::to_string(repeats) + ".cv1.conv.weight")) ++repeats;
  for (const auto& sc : KnownScales()) {
    ModelSpec spec{sc, nc};
    auto plan = BuildLayerPlan(spec);
    if (plan[0].c_out == width && plan[4].repeats == repeats) {
      auto checked = ParseModelSpec(sc.name, nc);
      if (!checked.IsOk()) return checked.GetStatus().WithLocation({path});
      info.spec = *checked;
      return info;
    }
  }
  return Status::InvalidArgument("cannot infer the YOLOv8 scale: stem width " + std::to_string(width) +
                                     ", layer 4 repeats " + std::to_string(repeats) + " match none of " +
                                     KnownSpecList(),
                                 {path});
}

}  // namespace kestrel::model
