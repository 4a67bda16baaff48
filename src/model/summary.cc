// SummarizeModel / FormatSummary (model/spec.h): parameters, buffers and
// MACs counted from a spec's layer plan, without building the network, and
// the table the trainer prints at start. Split from spec.cc.
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "model/spec.h"

namespace kestrel::model {

namespace {

// Accumulates params, BN buffers and MACs of convs at a given spatial size.
struct Counter {
  int64_t params = 0;
  int64_t buffers = 0;
  double macs = 0;

  // Conv2d (optionally with bias) without BN; `g` groups.
  void PlainConv(int c1, int c2, int k, bool bias, int64_t h_out, int64_t w_out, int g = 1) {
    params += static_cast<int64_t>(c1 / g) * c2 * k * k + (bias ? c2 : 0);
    macs += static_cast<double>(h_out) * static_cast<double>(w_out) * c2 * (c1 / g) * k * k;
  }
  // Kestrel Conv = Conv2d(no bias) + BN(weight, bias; running mean/var, count).
  void ConvBn(int c1, int c2, int k, int64_t h_out, int64_t w_out, int g = 1) {
    PlainConv(c1, c2, k, false, h_out, w_out, g);
    params += 2 * static_cast<int64_t>(c2);
    buffers += 2 * static_cast<int64_t>(c2) + 1;
  }
  // Bottleneck(c1 -> c2, kernels k1/k2, hidden int(c2 * e)).
  void Bottleneck(int c1, int c2, int k1, int k2, double e, int64_t h, int64_t w) {
    const int hidden = static_cast<int>(c2 * e);
    ConvBn(c1, hidden, k1, h, w);
    ConvBn(hidden, c2, k2, h, w);
  }
  // C3(c1 -> c2, n Bottlenecks with kernels k1/k2 at e=1, hidden int(c2 * e)).
  void C3(int c1, int c2, int n, int k1, int hidden, int64_t h, int64_t w) {
    ConvBn(c1, hidden, 1, h, w);
    ConvBn(c1, hidden, 1, h, w);
    ConvBn(2 * hidden, c2, 1, h, w);
    for (int i = 0; i < n; ++i) Bottleneck(hidden, hidden, k1, 3, 1.0, h, w);
  }
};

int64_t ConvOut(int64_t size, int k, int s, int pad) {
  return (size + 2 * static_cast<int64_t>(pad >= 0 ? pad : k / 2) - k) / s + 1;
}

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
        h = ConvOut(h, p.kernel, p.stride, p.padding);
        w = ConvOut(w, p.kernel, p.stride, p.padding);
        c.ConvBn(p.c_in, p.c_out, p.kernel, h, w);
        args = "[" + std::to_string(p.c_in) + ", " + std::to_string(p.c_out) + ", " +
               std::to_string(p.kernel) + ", " + std::to_string(p.stride) +
               (p.padding >= 0 ? ", " + std::to_string(p.padding) : std::string()) + "]";
        break;
      case LayerKind::kC2f:
      case LayerKind::kC3k2: {
        const int hidden = p.hidden;
        c.ConvBn(p.c_in, 2 * hidden, 1, h, w);
        for (int i = 0; i < p.repeats; ++i) {
          if (p.kind == LayerKind::kC2f) {
            c.Bottleneck(hidden, hidden, 3, 3, 1.0, h, w);
          } else if (p.c3k) {
            c.C3(hidden, hidden, 2, 3, hidden / 2, h, w);
          } else {
            c.Bottleneck(hidden, hidden, 3, 3, 0.5, h, w);
          }
        }
        c.ConvBn((2 + p.repeats) * hidden, p.c_out, 1, h, w);
        args = "[" + std::to_string(p.c_in) + ", " + std::to_string(p.c_out) + ", " +
               std::to_string(p.repeats) + ", " +
               ((p.kind == LayerKind::kC2f ? p.shortcut : p.c3k) ? "True" : "False");
        if (p.kind == LayerKind::kC3k2) {
          char e[32];
          std::snprintf(e, sizeof e, ", %g", static_cast<double>(p.hidden) / p.c_out);
          args += e;
        }
        args += "]";
        break;
      }
      case LayerKind::kC3:
        c.C3(p.c_in, p.c_out, p.repeats, 1, p.hidden, h, w);
        args = "[" + std::to_string(p.c_in) + ", " + std::to_string(p.c_out) + ", " +
               std::to_string(p.repeats) + ", " + (p.shortcut ? "True" : "False") + "]";
        break;
      case LayerKind::kSppf: {
        const int hidden = p.c_in / 2;
        c.ConvBn(p.c_in, hidden, 1, h, w);
        c.ConvBn(4 * hidden, p.c_out, 1, h, w);
        args = "[" + std::to_string(p.c_in) + ", " + std::to_string(p.c_out) + ", " +
               std::to_string(p.kernel) + "]";
        break;
      }
      case LayerKind::kC2psa: {
        const int hc = p.hidden;
        const int heads = AttentionHeads(hc);
        const int key_dim = hc / heads / 2;
        c.ConvBn(p.c_in, 2 * hc, 1, h, w);
        for (int i = 0; i < p.repeats; ++i) {
          c.ConvBn(hc, hc + 2 * key_dim * heads, 1, h, w);  // qkv
          c.ConvBn(hc, hc, 1, h, w);                        // proj
          c.ConvBn(hc, hc, 3, h, w, hc);                    // pe (depthwise)
          c.ConvBn(hc, 2 * hc, 1, h, w);                    // ffn
          c.ConvBn(2 * hc, hc, 1, h, w);
        }
        c.ConvBn(2 * hc, p.c_out, 1, h, w);
        args = "[" + std::to_string(p.c_in) + ", " + std::to_string(p.c_out) + ", " +
               std::to_string(p.repeats) + "]";
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
          if (p.detect_dw_cls) {
            c.ConvBn(x, x, 3, lh, lw, x);
            c.ConvBn(x, c3, 1, lh, lw);
            c.ConvBn(c3, c3, 3, lh, lw, c3);
            c.ConvBn(c3, c3, 1, lh, lw);
          } else {
            c.ConvBn(x, c3, 3, lh, lw);
            c.ConvBn(c3, c3, 3, lh, lw);
          }
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

}  // namespace kestrel::model
