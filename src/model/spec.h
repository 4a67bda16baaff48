// YOLO detection model specs, layer plans and summary — torch-free, so the
// CLI, store and job code can describe a model without LibTorch.
//
// A spec is a family (YOLOv8, YOLO11, YOLOv5u), a scale (depth/width
// multipliers and a channel cap) and a class count. A family is data: its
// backbone/head table (the public yolov8.yaml, yolo11.yaml, yolov5.yaml rows)
// and its scales. The layer plan resolves that table for a spec:
// channels = MakeDivisible(min(c, max_channels) * width, 8), repeats =
// max(round(n * depth), 1). The torch module (yolo.h) reads the plan into its
// module registry (one module per LayerKind), and the summary (params, GFLOPs)
// is computed from the same plan analytically.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "core/status.h"

namespace kestrel::model {

inline constexpr int kRegMax = 16;  // DFL bins per box side
// Input H, W must be multiples of it. The built-in graphs detect at strides
// 8, 16, 32 (P3, P4, P5); a custom graph's levels are its Detect layer's
// LayerPlan::detect_strides (a P2 head adds 4), each dividing kMaxStride.
inline constexpr int kMaxStride = 32;
inline constexpr int kWeightsFormatVersion = 1;  // metadata "kestrel_format_version"
inline constexpr char kCustomArch[] = "custom";  // metadata "arch" of a custom graph (with "graph")

struct ModelScale {
  std::string name;         // "n", "s", "m", "l", "x", or Kestrel's test scale "t"
  double depth = 0.33;      // repeat multiplier
  double width = 0.25;      // channel multiplier
  int max_channels = 1024;  // channel cap applied before the width multiplier
};

// Architecture families. YOLOv5u is the anchor-free YOLOv5 (C3 blocks, the
// YOLOv8 Detect head and loss); YOLO11 has C3k2, C2PSA and a Detect head whose
// class branch uses depthwise-separable convolutions.
enum class Family { kYolov8, kYolo11, kYolov5u };
const char* FamilyName(Family family);  // "yolov8", "yolo11", "yolov5u" (weights metadata "arch")
std::vector<Family> AllFamilies();

// The module registry's kinds (the reference's module class names):
//  Conv    Conv2d(kernel, stride, padding) + BN + SiLU.
//  C2f     cv1 1x1 -> 2*hidden, split, `repeats` Bottlenecks (3x3, 3x3) on the
//          last half, concat (2+repeats)*hidden, cv2 1x1 -> c_out.
//  C3      cv1, cv2 1x1 -> hidden; `repeats` Bottlenecks (1x1, 3x3) on cv1's
//          branch; cv3 1x1 over the concat -> c_out.
//  C3k2    C2f whose blocks are Bottlenecks (3x3, 3x3, half width) or, with
//          `c3k`, C3k blocks (a C3 of 2 Bottlenecks 3x3, 3x3).
//  SPPF    cv1 1x1 -> c_in/2, three chained max pools, cv2 1x1.
//  C2PSA   cv1 1x1 -> 2*hidden, split, `repeats` PSABlocks (multi-head
//          Attention with its depthwise 3x3 positional conv, then a 2-conv
//          feed-forward) on the second half, cv2 1x1 -> c_out.
//  Upsample (nearest 2x), Concat (channels), Detect (the anchor-free head).
enum class LayerKind { kConv, kC2f, kC3, kC3k2, kSppf, kC2psa, kUpsample, kConcat, kDetect };
const char* LayerKindName(LayerKind kind);  // "Conv", "C2f", "C3", "C3k2", "SPPF", "C2PSA", ...

// One row of a model graph before scaling (a model yaml's [from, repeats,
// module, args]): base channels c (scaled by the spec's width and cap),
// kernel k, stride s (Conv; Upsample's scale factor), padding p (-1: k / 2),
// shortcut, expansion e (hidden = int(c_out * e)), C3k2's c3k flag.
struct GraphRow {
  std::vector<int> from;  // -1 = the previous layer, else an earlier layer's index
  int n = 1;              // repeats before the depth multiplier (> 1 only for C2f/C3/C3k2/C2PSA)
  LayerKind kind = LayerKind::kConv;
  int c = 0;
  int k = 0;
  int s = 0;
  int p = -1;
  bool shortcut = false;
  double e = 0.5;
  bool c3k = false;
};

// A graph that is none of the built-in families' (model=custom.yaml with an
// extra block, a P2 head, other channels or repeats, another neck): carried
// in the spec, so weights and checkpoints rebuild it without the yaml file.
// As in the reference, a graph with C3k2 gets the depthwise class branch in
// Detect and C3k blocks at scales m, l and x.
struct ModelGraph {
  std::string name;            // the yaml file's stem ("yolov8-p2"): the model's name
  std::vector<GraphRow> rows;  // backbone then head; the last row is Detect
  size_t head_start = 0;       // first row of the yaml's head list
};

struct ModelSpec {
  ModelScale scale;
  int nc = 80;  // number of classes, >= 1
  Family family = Family::kYolov8;
  // Set: a custom graph (family and the family's scale table unused; `scale`
  // holds the file's multipliers, its name may be any key or empty).
  std::optional<ModelGraph> graph = std::nullopt;
  // "yolov8n", "yolo11n", "yolov5nu" (the reference's model names); a
  // custom graph's name.
  std::string Name() const;
};

// Known scales of a family, as in its public yaml. YOLOv8: n (0.33, 0.25,
// 1024), s (0.33, 0.50, 1024), m (0.67, 0.75, 768), l (1.00, 1.00, 512),
// x (1.00, 1.25, 512) and the Kestrel-only test scale t (0.33, 0.125, 1024)
// for fast tests. YOLO11: n (0.50, 0.25, 1024), s (0.50, 0.50, 1024),
// m (0.50, 1.00, 512), l (1.00, 1.00, 512), x (1.00, 1.50, 512). YOLOv5u:
// n (0.33, 0.25), s (0.33, 0.50), m (0.67, 0.75), l (1.00, 1.00),
// x (1.33, 1.25), all capped at 1024.
std::vector<ModelScale> KnownScales(Family family = Family::kYolov8);

// Accepts (any case, optional ".yaml"): "n" (YOLOv8) and "yolov8n", likewise
// s/m/l/x/t; "yolo11n" ... "yolo11x"; "yolov5nu" ... "yolov5xu". nc must be
// in [1, 10000]. Errors name the spec and list the known ones. A spec ending
// in .yaml/.yml that is a file on disk is that file (ReadModelYaml in
// model_yaml.h: its graph and scale; `nc` replaces the file's), never the
// built-in of the same name; which was used is logged.
Result<ModelSpec> ParseModelSpec(const std::string& spec, int nc);
// The "arch" and "scale" metadata of a weights file: ("yolo11", "n"); no arch
// (files of Kestrel before the families) means YOLOv8; a full name in scale
// ("yolo11n") also works, and must agree with arch when both are given.
Result<ModelSpec> SpecFromArchAndScale(const std::string& arch, const std::string& scale, int nc);
// Every known model name, comma-separated ("yolov8n, ..., yolov5xu").
std::string KnownModelNames();

// ceil(x / divisor) * divisor.
int MakeDivisible(double x, int divisor);

// One resolved layer of the graph.
struct LayerPlan {
  int index = 0;
  std::vector<int> from;  // input layer indices; -1 = the previous layer
  int repeats = 1;        // inner blocks of C2f/C3/C3k2/C2PSA; 1 elsewhere
  LayerKind kind = LayerKind::kConv;
  int c_in = 0;                      // input channels (sum for Concat)
  int c_out = 0;                     // output channels
  int kernel = 1;                    // Conv / SPPF pool kernel
  int stride = 1;                    // Conv stride; 2 for Upsample is the scale factor
  int padding = -1;                  // Conv padding; -1 = kernel / 2
  bool shortcut = false;             // residual bottlenecks (C2f, C3, C3k2)
  int hidden = 0;                    // C2f/C3/C3k2/C2PSA hidden width (int(c_out * e))
  bool c3k = false;                  // C3k2: C3k blocks instead of Bottlenecks
  std::vector<int> detect_channels;  // Detect: input channels per level
  int nc = 0;                        // Detect: classes
  bool detect_dw_cls = false;        // Detect: depthwise-separable class branch (YOLO11)
  std::vector<int> detect_strides;   // Detect: input pixels per cell of each level ({8, 16, 32})
  int out_stride = 1;                // input pixels per cell of this layer's output
};

// The family's yaml graph (or spec.graph) resolved for `spec`: 23 layers
// (0..22) for YOLOv8, 24 for YOLO11, 25 for YOLOv5u; the last one is Detect.
// REQUIRES: a custom graph passed CheckGraph.
std::vector<LayerPlan> BuildLayerPlan(const ModelSpec& spec);

// Whether spec.graph can be built: rows, exactly one Detect and it last,
// `from` naming earlier layers, repeats > 1 only on blocks that repeat inside,
// every layer's stride a whole number of pixels and at most kMaxStride,
// Concat inputs at one stride. InvalidArgument naming the layer ("layer 12
// (Concat) joins strides 16 and 32"). OK for a built-in family.
Status CheckGraph(const ModelSpec& spec);

// The spec's graph as the reference's model yaml (see ReferenceModelYaml):
// the family's table, or the custom graph's rows with its one scale (or
// depth_multiple / width_multiple when it has no name) and "yaml_file". What
// weights ("graph" metadata), checkpoints and the .pt writer carry;
// SpecFromGraphYaml reads it back to the same spec.
nlohmann::ordered_json GraphYaml(const ModelSpec& spec);

// The family's graph as the reference framework's model yaml holds it
// (yolov8.yaml, yolo11.yaml, yolov5.yaml), in file order: {"nc": nc,
// "scales": {name: [depth, width, max_channels]}, "backbone": rows,
// "head": rows}, each row [from, repeats, module, args] with the reference's
// spelling of args (Conv [64, 3, 2], C2f [128, True], C3k2 [256, False, 0.25],
// nn.Upsample ['None', 2, 'nearest'], Concat [1], Detect ['nc']). `scales` is
// the reference's table; `extra_scale` (Kestrel's test scale "t") is added
// when it is a known scale the table lacks. The .pt writer pickles it as the
// model's `yaml`, so the reference can rebuild the model from a written file.
nlohmann::ordered_json ReferenceModelYaml(Family family, int nc, const std::string& extra_scale = "");

// C2PSA attention heads for a hidden width: hidden / 64 (at least 1).
int AttentionHeads(int hidden);

// Detect head hidden widths: c2 = max(16, ch0/4, 4*reg_max) for the box
// branch (cv2), c3 = max(ch0, min(nc, 100)) for the class branch (cv3). The
// class branch is Conv 3x3, Conv 3x3, Conv2d 1x1, or with detect_dw_cls
// (DWConv 3x3, Conv 1x1), (DWConv 3x3, Conv 1x1), Conv2d 1x1.
int DetectBoxChannels(const std::vector<int>& detect_channels);
int DetectClsChannels(const std::vector<int>& detect_channels, int nc);

struct LayerSummary {
  int index = 0;
  std::vector<int> from;
  int repeats = 1;
  int64_t params = 0;  // trainable + frozen parameters (not BN running stats)
  std::string type;    // "Conv", "C2f", ...
  std::string args;    // "[16, 32, 3, 2]" style, like the public summaries
  double gflops = 0;   // 2 * conv MACs at the summary input size
};

struct ModelSummary {
  std::string name;  // "yolov8n"
  int nc = 0;
  std::vector<LayerSummary> layers;
  int64_t params = 0;     // all parameters (incl. the frozen DFL conv)
  int64_t gradients = 0;  // parameters that require grad (params - 16)
  int64_t buffers = 0;    // BN running_mean/var elements + num_batches_tracked
  int imgsz_h = 640, imgsz_w = 640;
  double gflops = 0;  // 2 * conv MACs for one [1, 3, imgsz_h, imgsz_w] input
};

// Analytic summary of the unfused model. Conv MACs = H_out * W_out * C_out *
// C_in / groups * k * k per conv (BN, activations, pooling, upsample and the
// attention's two matrix products not counted);
// includes the DFL 1x1 conv of the eval-mode decode.
ModelSummary SummarizeModel(const ModelSpec& spec, int imgsz_h = 640, int imgsz_w = 640);
// A printable table: index, from, n, params, module, arguments, then totals.
std::string FormatSummary(const ModelSummary& summary);

// What a weights file says about the model that produced it: from Kestrel's
// metadata when present (arch = family, scale, nc; arch "custom" with the
// graph itself in "graph", GraphYaml's JSON), otherwise inferred from
// tensor shapes (family from the layer count and module names, class count
// from the Detect layer's model.<last>.cv3.0.2.bias, scale from
// model.0.conv.weight's width and the repeats) — so Ultralytics weights
// exported with save_file(model.state_dict()) work too.
struct WeightsInfo {
  ModelSpec spec;
  std::vector<std::string> names;  // class names; empty when not recorded
  bool from_metadata = false;      // false: inferred from shapes
  int format_version = 0;          // 0 when not a Kestrel file
};
Result<WeightsInfo> ReadWeightsInfo(const std::string& path);
// The shape-inference half of ReadWeightsInfo, on tensors already read.
Result<ModelSpec> InferSpecFromTensors(const SafeTensorFile& file);

}  // namespace kestrel::model
