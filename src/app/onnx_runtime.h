// The ONNX runtimes as the use cases see them (docs/export.md
// "Verification"): a written file run on float tensors, in OpenCV DNN (in
// process) or ONNX Runtime (CPU, through the Node helper
// tools/onnxruntime/run.js). The implementations are the ONNX backend's
// (src/backend_onnx), reached through the program's backends
// (app/backends.h). Torch-free and OpenCV-free header.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "export/onnx_quantize.h"

namespace kestrel::app {

// A dense float32 tensor, row-major.
struct FloatTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // product(shape) values
};

// Runs an exported detection graph (input `images`, output `output0`).
// Implementations: OpenCV DNN, ONNX Runtime. Not thread-safe.
class OnnxRuntime {
 public:
  virtual ~OnnxRuntime() = default;
  // Name and version as reported: "opencv-dnn 4.6.0", "onnxruntime 1.23.2".
  virtual std::string Name() const = 0;
  // Loads `onnx_path` once and runs it once per input ([B, 3, H, W] each;
  // shapes may differ between inputs for a dynamic graph); output0 of each
  // run, same order. FailedPrecondition naming the file when the runtime
  // cannot load or run it.
  virtual Result<std::vector<FloatTensor>> Run(const std::string& onnx_path,
                                               const std::vector<FloatTensor>& inputs) = 0;
};

// Where ONNX Runtime is, or why it is not there. Looked up as:
// - node: $KESTREL_NODE if set, else `node` on $PATH;
// - the helper folder: $KESTREL_ONNXRUNTIME_DIR if set, else the source
//   tree's tools/onnxruntime (compiled in), which must hold run.js and
//   node_modules/onnxruntime-node (scripts/install-node-deps.sh installs it);
// - then `node run.js --version` must load the native binding.
struct OnnxRuntimeLocation {
  std::string node;         // the node executable
  std::string dir;          // the folder holding run.js
  std::string version;      // "1.23.2" when found
  std::string unavailable;  // why it cannot run ("" when it can)
};

// ---- The program's runtimes (app/backends.h slots; defined in backends.cc)

// OpenCV DNN, CPU target, the OpenCV backend. Without an ONNX backend in
// this program: a runtime whose Run is kFailedPrecondition saying so.
std::unique_ptr<OnnxRuntime> MakeOpenCvDnnRuntime();
// Where ONNX Runtime is; without an ONNX backend, `unavailable` says this
// program has none.
OnnxRuntimeLocation LocateOnnxRuntime();
// ONNX Runtime through `node run.js` (one process per Run call; the tensors
// pass as raw float32 files in a private temporary folder, removed after).
// REQUIRES: where.unavailable is empty (so the program has the backend).
std::unique_ptr<OnnxRuntime> MakeOnnxRuntimeNode(const OnnxRuntimeLocation& where);
// INT8 calibration (docs/export.md "INT8"): runs `onnx_path` (input
// `images`) on every input in ONNX Runtime (`node stats.js`) and returns,
// per float graph output, min, max and count over all runs, plus a
// `bins`-bin histogram over [lo, hi] for the outputs named in `ranges`.
// FailedPrecondition naming the file when ONNX Runtime cannot run it.
// REQUIRES: where.unavailable is empty.
Result<std::map<std::string, exporter::TensorStats>> OnnxRuntimeOutputStats(
    const OnnxRuntimeLocation& where, const std::string& onnx_path, const std::vector<FloatTensor>& inputs,
    int bins, const std::map<std::string, std::pair<double, double>>& ranges);

}  // namespace kestrel::app
