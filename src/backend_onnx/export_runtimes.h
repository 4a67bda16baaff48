// The ONNX runtimes (app/onnx_runtime.h's interface; docs/export.md,
// "Verification"): OpenCV DNN in process, and ONNX Runtime (CPU) through the
// Node helper tools/onnxruntime/run.js and the npm package onnxruntime-node.
// The use cases reach them through app/backends.h (RegisterOnnxBackend
// fills the slots); OnnxPredictor and bench programs call them directly.
// Torch-free, and OpenCV-free in this header.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/onnx_runtime.h"
#include "core/status.h"
#include "export/onnx_quantize.h"

namespace kestrel::backend_onnx {

using app::FloatTensor;
using app::OnnxRuntime;
using app::OnnxRuntimeLocation;

// OpenCV DNN, CPU target, the OpenCV backend.
std::unique_ptr<OnnxRuntime> MakeOpenCvDnnRuntime();

// Where ONNX Runtime is, or why not (app/onnx_runtime.h).
OnnxRuntimeLocation LocateOnnxRuntime();

// ONNX Runtime through `node run.js` (one process per Run call; the tensors
// pass as raw float32 files in a private temporary folder, removed after).
// REQUIRES: where.unavailable is empty.
std::unique_ptr<OnnxRuntime> MakeOnnxRuntimeNode(const OnnxRuntimeLocation& where);

// INT8 calibration (docs/export.md "INT8"): runs `onnx_path` (input
// `images`) on every input in ONNX Runtime (`node stats.js`) and
// returns, per float graph output, min, max and count over all runs, plus a
// `bins`-bin histogram over [lo, hi] for the outputs named in `ranges`.
// FailedPrecondition naming the file when ONNX Runtime cannot run it.
// REQUIRES: where.unavailable is empty.
Result<std::map<std::string, exporter::TensorStats>> OnnxRuntimeOutputStats(
    const OnnxRuntimeLocation& where, const std::string& onnx_path, const std::vector<FloatTensor>& inputs,
    int bins, const std::map<std::string, std::pair<double, double>>& ranges);

// One ONNX file loaded once in a runtime and run input after input: the
// batch inference behind `kestrel export data=`'s mAP check in ONNX Runtime
// (OnnxPredictor with OnnxEngine::kOnnxRuntime). Not thread-safe.
class OnnxSession {
 public:
  virtual ~OnnxSession() = default;
  // "onnxruntime 1.23.2".
  virtual std::string Name() const = 0;
  // Runs the file once: `data` holds product(shape) floats of the input
  // `input_name`; returns the output `output_name`. FailedPrecondition
  // naming the file when the runtime cannot run it (the session stays
  // usable when the runtime itself survived).
  virtual Result<FloatTensor> Run(const float* data, const std::vector<int64_t>& shape) = 0;
  // Milliseconds the runtime itself spent in the last successful Run, as
  // it measured them (ONNX Runtime: session.run inside the helper, without
  // the tensors' way through files and the socket).
  virtual double LastRunMs() const = 0;
};

// OpenCV DNN (CPU, the OpenCV backend) on the file, loaded once; LastRunMs is
// the wall time of net.forward. FailedPrecondition naming the file when
// OpenCV DNN cannot load it.
Result<std::unique_ptr<OnnxSession>> OpenOpenCvDnnSession(const std::string& onnx_path,
                                                          const std::string& input_name = "images",
                                                          const std::string& output_name = "output0");

// ONNX Runtime through one `node run.js --serve` process for the session's
// life (its stdin/stdout a socket pair: a request line per run, the tensors
// as raw float32 files in a private temporary folder, removed with the
// session). FailedPrecondition naming `onnx_path` when the helper cannot
// start or load the file. REQUIRES: where.unavailable is empty.
Result<std::unique_ptr<OnnxSession>> OpenOnnxRuntimeSession(const OnnxRuntimeLocation& where,
                                                            const std::string& onnx_path,
                                                            const std::string& input_name = "images",
                                                            const std::string& output_name = "output0");

}  // namespace kestrel::backend_onnx
