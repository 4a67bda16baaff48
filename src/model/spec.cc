#include "model/spec.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/parse.h"
#include "core/safetensors.h"
#include "model/model_yaml.h"
#include "model/pt_checkpoint.h"

namespace kestrel::model {

const char* FamilyName(Family family) {
  switch (family) {
    case Family::kYolov8:
      return "yolov8";
    case Family::kYolo11:
      return "yolo11";
    case Family::kYolov5u:
      return "yolov5u";
  }
  return "?";
}

std::vector<Family> AllFamilies() { return {Family::kYolov8, Family::kYolo11, Family::kYolov5u}; }

std::string ModelSpec::Name() const {
  if (graph) return graph->name;
  switch (family) {
    case Family::kYolov8:
      return "yolov8" + scale.name;
    case Family::kYolo11:
      return "yolo11" + scale.name;
    case Family::kYolov5u:
      return "yolov5" + scale.name + "u";
  }
  return "?";
}

std::vector<ModelScale> KnownScales(Family family) {
  switch (family) {
    case Family::kYolov8:
      return {
          {"n", 0.33, 0.25, 1024}, {"s", 0.33, 0.50, 1024},  {"m", 0.67, 0.75, 768}, {"l", 1.00, 1.00, 512},
          {"x", 1.00, 1.25, 512},  {"t", 0.33, 0.125, 1024},  // Kestrel-only: tiny, for fast tests
      };
    case Family::kYolo11:
      return {{"n", 0.50, 0.25, 1024},
              {"s", 0.50, 0.50, 1024},
              {"m", 0.50, 1.00, 512},
              {"l", 1.00, 1.00, 512},
              {"x", 1.00, 1.50, 512}};
    case Family::kYolov5u:
      return {{"n", 0.33, 0.25, 1024},
              {"s", 0.33, 0.50, 1024},
              {"m", 0.67, 0.75, 1024},
              {"l", 1.00, 1.00, 1024},
              {"x", 1.33, 1.25, 1024}};
  }
  return {};
}

std::string KnownModelNames() {
  std::string s;
  for (Family f : AllFamilies()) {
    for (const auto& sc : KnownScales(f)) s += (s.empty() ? "" : ", ") + ModelSpec{sc, 1, f}.Name();
  }
  return s;
}

Result<ModelSpec> ParseModelSpec(const std::string& spec, int nc) {
  if (IsModelYamlFile(spec)) {
    // A local model yaml is read, never replaced by the built-in of its name.
    if (nc < 1 || nc > 10000) {
      return Status::InvalidArgument("class count " + std::to_string(nc) + " out of range [1, 10000]",
                                     {"", 0, "nc"});
    }
    KESTREL_ASSIGN_OR_RETURN(ModelYaml file, ReadModelYaml(spec));
    spdlog::info("model={}: the local file ({}); the dataset's nc {} is used", spec, file.why, nc);
    file.spec.nc = nc;
    return file.spec;
  }
  std::string key;
  for (char c : spec) key += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string kYaml = ".yaml";
  if (key.size() > kYaml.size() && key.compare(key.size() - kYaml.size(), kYaml.size(), kYaml) == 0) {
    key.resize(key.size() - kYaml.size());
  }
  Family family = Family::kYolov8;
  if (key.rfind("yolov8", 0) == 0) {
    key = key.substr(6);
  } else if (key.rfind("yolo11", 0) == 0) {
    family = Family::kYolo11;
    key = key.substr(6);
  } else if (key.rfind("yolov5", 0) == 0) {
    // yolov5nu (the reference's name) or yolov5n (its yaml resolves to the same model).
    family = Family::kYolov5u;
    key = key.substr(6);
    if (key.size() == 2 && key[1] == 'u') key.resize(1);
  }
  if (nc < 1 || nc > 10000) {
    return Status::InvalidArgument("class count " + std::to_string(nc) + " out of range [1, 10000]",
                                   {"", 0, "nc"});
  }
  for (const auto& sc : KnownScales(family)) {
    if (sc.name == key) return ModelSpec{sc, nc, family};
  }
  return Status::InvalidArgument("unknown model spec '" + spec + "'; known: " + KnownModelNames() +
                                     " (also as n/s/m/l/x/t for YOLOv8, or <name>.yaml)",
                                 {"", 0, "model"});
}

int MakeDivisible(double x, int divisor) { return static_cast<int>(std::ceil(x / divisor)) * divisor; }

const char* LayerKindName(LayerKind kind) {
  switch (kind) {
    case LayerKind::kConv:
      return "Conv";
    case LayerKind::kC2f:
      return "C2f";
    case LayerKind::kC3:
      return "C3";
    case LayerKind::kC3k2:
      return "C3k2";
    case LayerKind::kSppf:
      return "SPPF";
    case LayerKind::kC2psa:
      return "C2PSA";
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

// A family as data: its graph. What depends on the scale follows the
// reference's rule for every graph (HasC3k2).
struct FamilyDef {
  std::vector<GraphRow> rows;
  size_t head_start = 0;  // first row of the yaml's head list
};

// The reference's parse_model: a graph with C3k2 is not "legacy" (Detect's
// class branch is depthwise-separable), and at scales m, l, x its C3k2
// layers all use C3k blocks.
bool HasC3k2(const std::vector<GraphRow>& rows) {
  for (const GraphRow& r : rows) {
    if (r.kind == LayerKind::kC3k2) return true;
  }
  return false;
}

using K = LayerKind;

// yolov8.yaml
FamilyDef Yolov8Def() {
  return {{
              // backbone
              {{-1}, 1, K::kConv, 64, 3, 2},             // 0 P1/2
              {{-1}, 1, K::kConv, 128, 3, 2},            // 1 P2/4
              {{-1}, 3, K::kC2f, 128, 0, 0, -1, true},   // 2
              {{-1}, 1, K::kConv, 256, 3, 2},            // 3 P3/8
              {{-1}, 6, K::kC2f, 256, 0, 0, -1, true},   // 4
              {{-1}, 1, K::kConv, 512, 3, 2},            // 5 P4/16
              {{-1}, 6, K::kC2f, 512, 0, 0, -1, true},   // 6
              {{-1}, 1, K::kConv, 1024, 3, 2},           // 7 P5/32
              {{-1}, 3, K::kC2f, 1024, 0, 0, -1, true},  // 8
              {{-1}, 1, K::kSppf, 1024, 5, 1},           // 9
                                                         // head
              {{-1}, 1, K::kUpsample, 0, 0, 2},          // 10
              {{-1, 6}, 1, K::kConcat},                  // 11 cat backbone P4
              {{-1}, 3, K::kC2f, 512},                   // 12
              {{-1}, 1, K::kUpsample, 0, 0, 2},          // 13
              {{-1, 4}, 1, K::kConcat},                  // 14 cat backbone P3
              {{-1}, 3, K::kC2f, 256},                   // 15 P3/8 out
              {{-1}, 1, K::kConv, 256, 3, 2},            // 16
              {{-1, 12}, 1, K::kConcat},                 // 17 cat head P4
              {{-1}, 3, K::kC2f, 512},                   // 18 P4/16 out
              {{-1}, 1, K::kConv, 512, 3, 2},            // 19
              {{-1, 9}, 1, K::kConcat},                  // 20 cat head P5
              {{-1}, 3, K::kC2f, 1024},                  // 21 P5/32 out
              {{15, 18, 21}, 1, K::kDetect},             // 22
          },
          10};
}

// yolo11.yaml. C3k2 keeps its default shortcut=True everywhere.
FamilyDef Yolo11Def() {
  return {{
              // backbone
              {{-1}, 1, K::kConv, 64, 3, 2},                         // 0 P1/2
              {{-1}, 1, K::kConv, 128, 3, 2},                        // 1 P2/4
              {{-1}, 2, K::kC3k2, 256, 0, 0, -1, true, 0.25},        // 2
              {{-1}, 1, K::kConv, 256, 3, 2},                        // 3 P3/8
              {{-1}, 2, K::kC3k2, 512, 0, 0, -1, true, 0.25},        // 4
              {{-1}, 1, K::kConv, 512, 3, 2},                        // 5 P4/16
              {{-1}, 2, K::kC3k2, 512, 0, 0, -1, true, 0.5, true},   // 6
              {{-1}, 1, K::kConv, 1024, 3, 2},                       // 7 P5/32
              {{-1}, 2, K::kC3k2, 1024, 0, 0, -1, true, 0.5, true},  // 8
              {{-1}, 1, K::kSppf, 1024, 5, 1},                       // 9
              {{-1}, 2, K::kC2psa, 1024},                            // 10
                                                                     // head
              {{-1}, 1, K::kUpsample, 0, 0, 2},                      // 11
              {{-1, 6}, 1, K::kConcat},                              // 12 cat backbone P4
              {{-1}, 2, K::kC3k2, 512, 0, 0, -1, true},              // 13
              {{-1}, 1, K::kUpsample, 0, 0, 2},                      // 14
              {{-1, 4}, 1, K::kConcat},                              // 15 cat backbone P3
              {{-1}, 2, K::kC3k2, 256, 0, 0, -1, true},              // 16 P3/8 out
              {{-1}, 1, K::kConv, 256, 3, 2},                        // 17
              {{-1, 13}, 1, K::kConcat},                             // 18 cat head P4
              {{-1}, 2, K::kC3k2, 512, 0, 0, -1, true},              // 19 P4/16 out
              {{-1}, 1, K::kConv, 512, 3, 2},                        // 20
              {{-1, 10}, 1, K::kConcat},                             // 21 cat head P5
              {{-1}, 2, K::kC3k2, 1024, 0, 0, -1, true, 0.5, true},  // 22 P5/32 out
              {{16, 19, 22}, 1, K::kDetect},                         // 23
          },
          11};
}

// yolov5.yaml of the anchor-free line (the "u" models).
FamilyDef Yolov5uDef() {
  return {{
              // backbone
              {{-1}, 1, K::kConv, 64, 6, 2, 2},         // 0 P1/2
              {{-1}, 1, K::kConv, 128, 3, 2},           // 1 P2/4
              {{-1}, 3, K::kC3, 128, 0, 0, -1, true},   // 2
              {{-1}, 1, K::kConv, 256, 3, 2},           // 3 P3/8
              {{-1}, 6, K::kC3, 256, 0, 0, -1, true},   // 4
              {{-1}, 1, K::kConv, 512, 3, 2},           // 5 P4/16
              {{-1}, 9, K::kC3, 512, 0, 0, -1, true},   // 6
              {{-1}, 1, K::kConv, 1024, 3, 2},          // 7 P5/32
              {{-1}, 3, K::kC3, 1024, 0, 0, -1, true},  // 8
              {{-1}, 1, K::kSppf, 1024, 5, 1},          // 9
                                                        // head
              {{-1}, 1, K::kConv, 512, 1, 1},           // 10
              {{-1}, 1, K::kUpsample, 0, 0, 2},         // 11
              {{-1, 6}, 1, K::kConcat},                 // 12 cat backbone P4
              {{-1}, 3, K::kC3, 512},                   // 13
              {{-1}, 1, K::kConv, 256, 1, 1},           // 14
              {{-1}, 1, K::kUpsample, 0, 0, 2},         // 15
              {{-1, 4}, 1, K::kConcat},                 // 16 cat backbone P3
              {{-1}, 3, K::kC3, 256},                   // 17 P3/8 out
              {{-1}, 1, K::kConv, 256, 3, 2},           // 18
              {{-1, 14}, 1, K::kConcat},                // 19 cat head P4
              {{-1}, 3, K::kC3, 512},                   // 20 P4/16 out
              {{-1}, 1, K::kConv, 512, 3, 2},           // 21
              {{-1, 10}, 1, K::kConcat},                // 22 cat head P5
              {{-1}, 3, K::kC3, 1024},                  // 23 P5/32 out
              {{17, 20, 23}, 1, K::kDetect},            // 24
          },
          10};
}

const FamilyDef& Def(Family family) {
  static const FamilyDef v8 = Yolov8Def(), v11 = Yolo11Def(), v5u = Yolov5uDef();
  switch (family) {
    case Family::kYolov8:
      return v8;
    case Family::kYolo11:
      return v11;
    case Family::kYolov5u:
      return v5u;
  }
  return v8;
}

}  // namespace

namespace {

// Rows in the reference's spelling, into `out`'s backbone and head lists.
void RowsYaml(const std::vector<GraphRow>& rows, size_t head_start, nlohmann::ordered_json& out) {
  using J = nlohmann::ordered_json;
  J backbone = J::array(), head = J::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    const GraphRow& r = rows[i];
    J from = r.from.size() == 1 ? J(r.from[0]) : J(r.from);
    std::string module = LayerKindName(r.kind);
    J args = J::array();
    switch (r.kind) {
      case LayerKind::kConv:
        args = J::array({r.c, r.k, r.s});
        if (r.p >= 0) args.push_back(r.p);
        break;
      case LayerKind::kC2f:  // shortcut defaults to False
        args = J::array({r.c});
        if (r.shortcut) args.push_back(true);
        break;
      case LayerKind::kC3:  // shortcut defaults to True
        args = J::array({r.c});
        if (!r.shortcut) args.push_back(false);
        break;
      case LayerKind::kC3k2:  // [c2, c3k, e]; e defaults to 0.5, shortcut to True
        args = J::array({r.c, r.c3k});
        if (r.e != 0.5) args.push_back(r.e);
        break;
      case LayerKind::kSppf:
        args = J::array({r.c, r.k});
        break;
      case LayerKind::kC2psa:
        args = J::array({r.c});
        if (r.e != 0.5) args.push_back(r.e);
        break;
      case LayerKind::kUpsample:
        module = "nn.Upsample";
        args = J::array({"None", r.s, "nearest"});  // the yaml's bare None is the string 'None'
        break;
      case LayerKind::kConcat:
        args = J::array({1});
        break;
      case LayerKind::kDetect:
        args = J::array({"nc"});
        break;
    }
    (i < head_start ? backbone : head).push_back(J::array({from, r.n, module, args}));
  }
  out["backbone"] = backbone;
  out["head"] = head;
}

}  // namespace

nlohmann::ordered_json ReferenceModelYaml(Family family, int nc, const std::string& extra_scale) {
  using J = nlohmann::ordered_json;
  const FamilyDef& def = Def(family);
  J scales = J::object();
  for (const ModelScale& sc : KnownScales(family)) {
    if (sc.name != "t" || sc.name == extra_scale)
      scales[sc.name] = J::array({sc.depth, sc.width, sc.max_channels});
  }
  J out = J::object();
  out["nc"] = nc;
  out["scales"] = scales;
  RowsYaml(def.rows, def.head_start, out);
  return out;
}

nlohmann::ordered_json GraphYaml(const ModelSpec& spec) {
  using J = nlohmann::ordered_json;
  if (!spec.graph) return ReferenceModelYaml(spec.family, spec.nc, spec.scale.name);
  J out = J::object();
  out["nc"] = spec.nc;
  if (spec.scale.name.empty()) {
    out["depth_multiple"] = spec.scale.depth;
    out["width_multiple"] = spec.scale.width;
  } else {
    J scales = J::object();
    scales[spec.scale.name] = J::array({spec.scale.depth, spec.scale.width, spec.scale.max_channels});
    out["scales"] = scales;
  }
  RowsYaml(spec.graph->rows, spec.graph->head_start, out);
  out["yaml_file"] = spec.graph->name + ".yaml";
  return out;
}

int AttentionHeads(int hidden) { return std::max(hidden / 64, 1); }

std::vector<LayerPlan> BuildLayerPlan(const ModelSpec& spec) {
  const std::vector<GraphRow>& rows = spec.graph ? spec.graph->rows : Def(spec.family).rows;
  const bool v11 = HasC3k2(rows);
  const bool all_c3k =
      v11 && !spec.scale.name.empty() && std::string("mlx").find(spec.scale.name) != std::string::npos;
  std::vector<LayerPlan> plan;
  std::vector<int> ch;  // output channels per layer
  std::vector<int> st;  // output stride per layer
  auto in_ch = [&](int f) { return f < 0 ? (ch.empty() ? 3 : ch.back()) : ch[static_cast<size_t>(f)]; };
  auto in_st = [&](int f) { return f < 0 ? (st.empty() ? 1 : st.back()) : st[static_cast<size_t>(f)]; };
  for (size_t i = 0; i < rows.size(); ++i) {
    const GraphRow& r = rows[i];
    LayerPlan p;
    p.index = static_cast<int>(i);
    p.from = r.from;
    p.kind = r.kind;
    p.kernel = r.k;
    p.stride = r.s;
    p.padding = r.p;
    p.shortcut = r.shortcut;
    p.c3k = r.kind == LayerKind::kC3k2 && (r.c3k || all_c3k);
    p.repeats = r.n > 1 ? std::max(static_cast<int>(std::lround(r.n * spec.scale.depth)), 1) : r.n;
    p.out_stride = in_st(r.from[0]);
    if (r.kind == LayerKind::kConv) p.out_stride *= std::max(r.s, 1);
    if (r.kind == LayerKind::kUpsample) p.out_stride /= std::max(r.s, 1);
    switch (r.kind) {
      case LayerKind::kConv:
      case LayerKind::kC2f:
      case LayerKind::kC3:
      case LayerKind::kC3k2:
      case LayerKind::kSppf:
      case LayerKind::kC2psa:
        p.c_in = in_ch(r.from[0]);
        p.c_out = MakeDivisible(std::min(r.c, spec.scale.max_channels) * spec.scale.width, 8);
        if (r.kind != LayerKind::kConv && r.kind != LayerKind::kSppf) {
          p.hidden = static_cast<int>(p.c_out * r.e);
        }
        break;
      case LayerKind::kUpsample:
        p.c_in = p.c_out = in_ch(r.from[0]);
        break;
      case LayerKind::kConcat:
        for (int f : r.from) p.c_in += in_ch(f);
        p.c_out = p.c_in;
        break;
      case LayerKind::kDetect:
        for (int f : r.from) {
          p.detect_channels.push_back(in_ch(f));
          p.detect_strides.push_back(in_st(f));
        }
        p.c_in = p.detect_channels[0];
        p.nc = spec.nc;
        p.c_out = 4 * kRegMax + spec.nc;
        p.detect_dw_cls = v11;
        break;
    }
    ch.push_back(p.c_out);
    st.push_back(p.out_stride);
    plan.push_back(std::move(p));
  }
  return plan;
}

Status CheckGraph(const ModelSpec& spec) {
  if (!spec.graph) return Status();
  const std::vector<GraphRow>& rows = spec.graph->rows;
  auto bad = [&](size_t i, const std::string& msg) {
    return Status::InvalidArgument(
        "layer " + std::to_string(i) + " (" + LayerKindName(rows[i].kind) + "): " + msg,
        {"", 0, i < spec.graph->head_start ? "backbone" : "head"});
  };
  if (rows.empty()) return Status::InvalidArgument("the graph has no layers", {"", 0, "backbone"});
  if (rows.size() > 1000)
    return Status::InvalidArgument("the graph has " + std::to_string(rows.size()) + " layers; at most 1000",
                                   {"", 0, "head"});
  std::vector<int> st;  // output stride per layer
  for (size_t i = 0; i < rows.size(); ++i) {
    const GraphRow& r = rows[i];
    const bool multi = r.kind == LayerKind::kConcat || r.kind == LayerKind::kDetect;
    if (r.from.empty() || (!multi && r.from.size() != 1))
      return bad(i, multi ? "needs at least one input" : "takes exactly one input (from)");
    if (r.kind == LayerKind::kDetect && i + 1 != rows.size())
      return bad(i, "Detect must be the last layer (the graph has " + std::to_string(rows.size()) + ")");
    if (r.kind != LayerKind::kDetect && i + 1 == rows.size()) return bad(i, "the last layer must be Detect");
    const bool repeats_inside = r.kind == LayerKind::kC2f || r.kind == LayerKind::kC3 ||
                                r.kind == LayerKind::kC3k2 || r.kind == LayerKind::kC2psa;
    if (r.n < 1 || r.n > 100 || (r.n > 1 && !repeats_inside))
      return bad(i, "repeats " + std::to_string(r.n) +
                        (repeats_inside ? " is outside [1, 100]"
                                        : " > 1: only C2f, C3, C3k2 and C2PSA repeat (write the rows out)"));
    std::vector<int> in;
    for (int f : r.from) {
      if (f == -1 && i == 0) {
        in.push_back(1);
        continue;
      }
      const int src = f == -1 ? static_cast<int>(i) - 1 : f;
      if (src < 0 || src >= static_cast<int>(i))
        return bad(i, "from " + std::to_string(f) + " is not an earlier layer");
      if (rows[static_cast<size_t>(src)].kind == LayerKind::kDetect) return bad(i, "reads Detect's output");
      in.push_back(st[static_cast<size_t>(src)]);
    }
    const bool has_c =
        r.kind != LayerKind::kUpsample && r.kind != LayerKind::kConcat && r.kind != LayerKind::kDetect;
    if (has_c && (r.c < 1 || r.c > 65536)) return bad(i, "output channels must be in [1, 65536]");
    if (repeats_inside &&
        static_cast<int>(MakeDivisible(std::min(r.c, spec.scale.max_channels) * spec.scale.width, 8) * r.e) <
            1)
      return bad(i, "the hidden width int(c_out * e) is 0");
    int out = in[0];
    if (r.kind == LayerKind::kConv) {
      const int pad = r.p >= 0 ? r.p : r.k / 2;
      // The map must shrink by exactly the stride for inputs that are multiples of it.
      if (r.s < 1 || r.k < 1 || 2 * pad < r.k - r.s || 2 * pad > r.k - 1)
        return bad(i, "kernel " + std::to_string(r.k) + ", stride " + std::to_string(r.s) + ", padding " +
                          std::to_string(pad) +
                          " does not divide the map by the stride (needs k - s <= 2p <= k - 1)");
      out *= r.s;
    } else if (r.kind == LayerKind::kSppf && (r.k % 2 == 0 || r.k < 1)) {
      return bad(i, "the pool kernel " + std::to_string(r.k) + " must be odd (the map keeps its size)");
    } else if (r.kind == LayerKind::kUpsample) {
      if (r.s < 1 || out % r.s != 0)
        return bad(i, "upsampling stride " + std::to_string(out) + " by " + std::to_string(r.s) +
                          " leaves no whole pixel per cell");
      out /= r.s;
    } else if (r.kind == LayerKind::kConcat || r.kind == LayerKind::kDetect) {
      for (size_t k = 1; k < in.size() && r.kind == LayerKind::kConcat; ++k) {
        if (in[k] != in[0])
          return bad(i, "joins maps at strides " + std::to_string(in[0]) + " and " + std::to_string(in[k]) +
                            " (Concat needs one size)");
      }
    }
    if (out > kMaxStride || kMaxStride % out != 0)
      return bad(i, "its stride " + std::to_string(out) + " does not divide " + std::to_string(kMaxStride) +
                        " (Kestrel's inputs are multiples of " + std::to_string(kMaxStride) + ")");
    st.push_back(out);
  }
  return Status();
}

int DetectBoxChannels(const std::vector<int>& detect_channels) {
  return std::max({16, detect_channels[0] / 4, kRegMax * 4});
}

int DetectClsChannels(const std::vector<int>& detect_channels, int nc) {
  return std::max(detect_channels[0], std::min(nc, 100));
}

Result<ModelSpec> SpecFromArchAndScale(const std::string& arch, const std::string& scale, int nc) {
  if (arch.empty() || scale.size() != 1) {
    KESTREL_ASSIGN_OR_RETURN(ModelSpec spec, ParseModelSpec(scale, nc));
    if (!arch.empty() && arch != FamilyName(spec.family)) {
      return Status::InvalidArgument("arch '" + arch + "' and scale '" + scale + "' disagree",
                                     {"", 0, "arch"});
    }
    return spec;
  }
  for (Family f : AllFamilies()) {
    if (arch != FamilyName(f)) continue;
    for (const auto& sc : KnownScales(f)) {
      if (sc.name == scale) return ParseModelSpec(ModelSpec{sc, nc, f}.Name(), nc);
    }
    return Status::InvalidArgument("unknown scale '" + scale + "' of " + arch, {"", 0, "scale"});
  }
  return Status::InvalidArgument("unknown arch '" + arch + "' (known: yolov8, yolo11, yolov5u)",
                                 {"", 0, "arch"});
}

Result<ModelSpec> InferSpecFromTensors(const SafeTensorFile& file) {
  // Module prefixes "model.<i>.m.<k>" present, to count each layer's repeats.
  std::set<std::string> blocks;
  for (const auto& [name, t] : file.tensors) {
    const size_t m = name.find(".m.");
    if (name.rfind("model.", 0) != 0 || m == std::string::npos) continue;
    const size_t end = name.find('.', m + 3);
    if (end != std::string::npos) blocks.insert(name.substr(0, end));
  }
  auto stem = file.tensors.find("model.0.conv.weight");
  if (stem == file.tensors.end() || stem->second.shape.size() != 4) {
    return Status::InvalidArgument(
        "not YOLO detection weights: no model.0.conv.weight [C, 3, k, k] (and no "
        "Kestrel metadata arch/scale/nc)");
  }
  std::string tried;
  for (Family f : AllFamilies()) {
    const int detect = static_cast<int>(BuildLayerPlan(ModelSpec{KnownScales(f)[0], 1, f}).size()) - 1;
    auto cls = file.tensors.find("model." + std::to_string(detect) + ".cv3.0.2.bias");
    if (cls == file.tensors.end() || cls->second.shape.size() != 1) continue;
    if (file.tensors.count("model." + std::to_string(detect + 1) + ".cv3.0.2.bias")) continue;
    const int nc = static_cast<int>(cls->second.shape[0]);
    for (const auto& sc : KnownScales(f)) {
      const ModelSpec spec{sc, nc > 0 ? nc : 1, f};
      bool match = stem->second.shape[0] == BuildLayerPlan(spec)[0].c_out &&
                   stem->second.shape[2] == BuildLayerPlan(spec)[0].kernel;
      for (const LayerPlan& p : BuildLayerPlan(spec)) {
        if (!match) break;
        if (p.kind == LayerKind::kConv || p.kind == LayerKind::kSppf || p.kind == LayerKind::kUpsample ||
            p.kind == LayerKind::kConcat || p.kind == LayerKind::kDetect)
          continue;
        int repeats = 0;
        while (blocks.count("model." + std::to_string(p.index) + ".m." + std::to_string(repeats))) ++repeats;
        match = repeats == p.repeats;
        // C3k2's blocks: a C3k has cv3, a Bottleneck does not.
        if (match && p.kind == LayerKind::kC3k2) {
          match =
              p.c3k == (file.tensors.count("model." + std::to_string(p.index) + ".m.0.cv3.conv.weight") > 0);
        }
      }
      if (match) return ParseModelSpec(spec.Name(), nc);
    }
    tried += std::string(tried.empty() ? "" : ", ") + FamilyName(f);
  }
  if (tried.empty()) {
    return Status::InvalidArgument(
        "not YOLO detection weights: no Detect layer's class bias (model.22.cv3.0.2.bias for YOLOv8, "
        "model.23 for YOLO11, model.24 for YOLOv5u) and no Kestrel metadata arch/scale/nc");
  }
  return Status::InvalidArgument(
      "cannot infer the scale: stem width " + std::to_string(stem->second.shape[0]) +
      " and the layers' repeats match no scale of " + tried + " (known: " + KnownModelNames() + ")");
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
    if (md.count("arch") && md.at("arch") == kCustomArch) {
      // A custom graph: the file carries it (GraphYaml), no yaml file needed.
      if (!md.count("graph"))
        return Status::Corruption("arch 'custom' without its graph metadata", {path, 0, "graph"});
      auto spec = SpecFromGraphYaml(md.at("graph"), static_cast<int>(*nc), path);
      if (!spec.IsOk()) return spec.GetStatus().WithLocation({path, 0, "graph"});
      info.spec = *std::move(spec);
    } else {
      auto spec =
          SpecFromArchAndScale(md.count("arch") ? md.at("arch") : "", md.at("scale"), static_cast<int>(*nc));
      if (!spec.IsOk()) return spec.GetStatus().WithLocation({path, 0, "scale"});
      info.spec = *spec;
    }
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
  auto spec = InferSpecFromTensors(file);
  if (!spec.IsOk()) return spec.GetStatus().WithLocation({path});
  info.spec = *spec;
  return info;
}

}  // namespace kestrel::model
