// INT8 post-training quantization of an FP32 graph written by BuildOnnxModel
// (`kestrel export int8=true`, docs/export.md "INT8"): a QDQ graph that ONNX
// Runtime's CPU execution provider fuses into QLinearConv.
//
// What is quantized: every Conv followed by SiLU (the Conv+BN+SiLU blocks of
// the backbone, the neck and the first two convs of each Detect branch). Its
// float input X gets QuantizeLinear -> DequantizeLinear (per tensor, uint8,
// asymmetric: the range seen in calibration), its weight becomes an int8
// initializer with a per-channel DequantizeLinear (axis 0, symmetric, zero
// point 0), its bias an int32 initializer with scale x_scale * w_scale[c]
// (DequantizeLinear axis 0), and its output gets a uint8 QuantizeLinear ->
// DequantizeLinear pair before the SiLU reads it, so that each block is the
// DQ -> Conv -> Q group ORT turns into one QLinearConv (u8 activations, s8
// weights, int32 bias). Everything else stays float: the SiLU's Sigmoid and
// Mul, Split/Concat/Add/MaxPool/Resize, the Detect head's last 1x1 convs (box
// distribution and class logits), the DFL softmax and the decode, so scores
// and boxes keep float precision after the last quantized block.
//
// Calibration (the caller runs the FP32 graph): CalibrationTensors lists the
// tensors whose ranges the pass needs (every quantized conv's input and
// output), WithTensorOutputs returns the FP32 model with them exposed as
// graph outputs, and RangeFromStats turns what a runtime observed into a
// range (min/max, or a percentile of a histogram). Torch-free, OpenCV-free.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::exporter {

enum class CalibMethod { kMinMax, kPercentile };

// "minmax" / "percentile"; InvalidArgument naming `calib_method` otherwise.
Result<CalibMethod> ParseCalibMethod(const std::string& text);
const char* CalibMethodName(CalibMethod method);

// The percentile of |tails| kept by kPercentile: the range spans the
// (100 - p)th to the p-th percentile of the values seen (docs/export.md).
inline constexpr double kDefaultCalibPercentile = 99.99;
// Histogram bins a runtime collects per tensor for kPercentile.
inline constexpr int kCalibHistogramBins = 2048;

// What the calibration run saw of one tensor over every calibration image.
struct TensorStats {
  double min = 0, max = 0;   // over all values
  int64_t count = 0;         // values seen
  std::vector<double> hist;  // counts over [min, max] in equal bins (empty: minmax only)
};

// A float range [lo, hi] of one activation, lo <= 0 <= hi after RangeFromStats.
struct TensorRange {
  double lo = 0, hi = 0;
};

// kMinMax: [min, max]. kPercentile: from the histogram, the value below which
// (100 - percentile)% of the values lie and the one above which as many lie
// (bins interpolated linearly); needs stats.hist. Both widened to include 0
// (the zero point must be exact). InvalidArgument naming `tensor` when the
// stats are empty, not finite or lack the histogram.
Result<TensorRange> RangeFromStats(const TensorStats& stats, CalibMethod method, double percentile,
                                   const std::string& tensor);

// The float tensors calibration must observe in the FP32 model `model_bytes`
// (a serialized ModelProto from BuildOnnxModel): the input and the output of
// every conv the pass quantizes, in graph order, no duplicates. Internal when
// the bytes do not parse or the graph has no such conv.
Result<std::vector<std::string>> CalibrationTensors(const std::string& model_bytes);

// The model with `tensors` appended as float graph outputs (shape left
// unknown), for a calibration run. Metadata and everything else unchanged.
Result<std::string> WithTensorOutputs(const std::string& model_bytes,
                                      const std::vector<std::string>& tensors);

struct QuantizeOptions {
  CalibMethod method = CalibMethod::kMinMax;    // recorded in the metadata
  double percentile = kDefaultCalibPercentile;  // recorded when method is kPercentile
  int calib_images = 0;                         // recorded in the metadata
};

struct QuantizedModel {
  std::string bytes;                            // serialized ModelProto, passed onnx::checker
  int64_t quantized_convs = 0;                  // convs turned into DQ -> Conv -> Q groups
  int64_t float_convs = 0;                      // convs left float (head's last 1x1s, DFL, ...)
  int64_t nodes = 0;                            // graph nodes after the pass
  std::map<std::string, std::string> metadata;  // metadata_props as written
};

// The QDQ graph (the header comment) of `model_bytes`, with activation ranges
// `ranges` for every tensor CalibrationTensors lists (InvalidArgument naming
// the tensor when one is missing). metadata_props gain `int8` = "true",
// `int8_calibration` = "percentile 99.99" or "minmax" and `int8_calib_images`.
// Internal when the checker rejects the result (a bug here).
Result<QuantizedModel> QuantizeOnnxModel(const std::string& model_bytes,
                                         const std::map<std::string, TensorRange>& ranges,
                                         const QuantizeOptions& options);

}  // namespace kestrel::exporter
