// YOLOv8 detection model specs, layer plan and summary — torch-free, so the
// CLI, store and job code can describe a model without LibTorch.
//
// A spec is a scale (depth/width multipliers and a channel cap) plus a class
// count. The layer plan resolves the public yolov8.yaml graph for a spec:
// channels = MakeDivisible(min(c, max_channels) * width, 8), repeats =
// max(round(n * depth), 1). The torch module (yolo.h) is built from this plan,
// and the summary (params, GFLOPs) is computed from it analytically.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::model {

inline constexpr int kRegMax = 16;          // DFL bins per box side
inline constexpr int kNumDetectLevels = 3;  // P3, P4, P5
inline constexpr int kDetectStrides[3] = {8, 16, 32};
inline constexpr int kMaxStride = 32;            // input H, W must be multiples
inline constexpr int kWeightsFormatVersion = 1;  // metadata "kestrel_format_version"

struct ModelScale {
  std::string name;         // "n", "s", "m", "l", "x", or Kestrel's test scale "t"
  double depth = 0.33;      // repeat multiplier
  double width = 0.25;      // channel multiplier
  int max_channels = 1024;  // channel cap applied before the width multiplier
};

struct ModelSpec {
  ModelScale scale;
  int nc = 80;  // number of classes, >= 1
  // "yolov8n" etc.
  std::string Name() const { return "yolov8" + scale.name; }
};

// Known scales: n (0.33, 0.25, 1024), s (0.33, 0.50, 1024), m (0.67, 0.75, 768),
// l (1.00, 1.00, 512), x (1.00, 1.25, 512) as in the public yolov8.yaml, and
// the Kestrel-only test scale t (0.33, 0.125, 1024) for fast tests.
std::vector<ModelScale> KnownScales();

// Accepts "n", "yolov8n", "yolov8n.yaml", "YOLOv8n.yaml" (any case), likewise
// s/m/l/x/t; nc must be in [1, 10000]. Errors name the spec and list the
// known ones.
Result<ModelSpec> ParseModelSpec(const std::string& spec, int nc);

// ceil(x / divisor) * divisor.
int MakeDivisible(double x, int divisor);

enum class LayerKind { kConv, kC2f, kSppf, kUpsample, kConcat, kDetect };
const char* LayerKindName(LayerKind kind);  // "Conv", "C2f", ...

// One resolved layer of the graph.
struct LayerPlan {
  int index = 0;
  std::vector<int> from;  // input layer indices; -1 = the previous layer
  int repeats = 1;        // C2f bottlenecks; 1 elsewhere
  LayerKind kind = LayerKind::kConv;
  int c_in = 0;                      // input channels (sum for Concat)
  int c_out = 0;                     // output channels
  int kernel = 1;                    // Conv / SPPF pool kernel
  int stride = 1;                    // Conv stride; 2 for Upsample is the scale factor
  bool shortcut = false;             // C2f residual bottlenecks
  std::vector<int> detect_channels;  // Detect: input channels per level
  int nc = 0;                        // Detect: classes
};

// The 23 layers (0..22) of yolov8.yaml resolved for `spec`.
std::vector<LayerPlan> BuildLayerPlan(const ModelSpec& spec);

// Detect head hidden widths: c2 = max(16, ch0/4, 4*reg_max) for the box
// branch (cv2), c3 = max(ch0, min(nc, 100)) for the class branch (cv3).
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
// C_in * k * k per conv (BN, activations, pooling, upsample not counted);
// includes the DFL 1x1 conv of the eval-mode decode.
ModelSummary SummarizeModel(const ModelSpec& spec, int imgsz_h = 640, int imgsz_w = 640);
// A printable table: index, from, n, params, module, arguments, then totals.
std::string FormatSummary(const ModelSummary& summary);

// What a weights file says about the model that produced it: from Kestrel's
// metadata when present, otherwise inferred from tensor shapes (class count
// from model.22.cv3.0.2.bias, scale from model.0.conv.weight's width) — so
// Ultralytics weights exported with save_file(model.state_dict()) work too.
struct WeightsInfo {
  ModelSpec spec;
  std::vector<std::string> names;  // class names; empty when not recorded
  bool from_metadata = false;      // false: inferred from shapes
  int format_version = 0;          // 0 when not a Kestrel file
};
Result<WeightsInfo> ReadWeightsInfo(const std::string& path);

}  // namespace kestrel::model
