// The engines a program lends the use cases (docs/ARCHITECTURE.md "Two
// programs"). The application layer is torch-free and OpenCV-DNN-free; what
// runs a network or trains one is a backend module that each program's
// main() registers, as ggml registers its backends:
//
//   kestrel-torch   RegisterTorchBackend (src/backend_torch: LibTorch) and
//                   RegisterOnnxBackend (src/backend_onnx: OpenCV DNN, ONNX
//                   Runtime)
//   kestrel-deploy  RegisterOnnxBackend only
//   kestrel         RegisterOnnxBackend only, for `serve --ls-model` (the
//                   Label Studio ML backend); the commands that need
//                   LibTorch it hands to kestrel-torch
//
//   app::Backends b;
//   b.program = "kestrel-torch";
//   backend_torch::RegisterTorchBackend(b);
//   backend_onnx::RegisterOnnxBackend(b);
//   KESTREL_RETURN_IF_ERROR(app::InstallBackends(std::move(b), app::JobKinds()));
//
// A use case reaches a backend only through the functions below (and those
// of app/onnx_runtime.h), which choose the slot and, when the program lacks
// it, fail with kFailedPrecondition naming the program that has it. Every
// slot may be empty.
//
// Thread-safety: filled once, before any thread starts (main(), or a test's
// set-up), then only read. Torch-free and OpenCV-free header.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/detector.h"
#include "app/onnx_runtime.h"
#include "core/device_spec.h"
#include "core/status.h"
#include "eval/inference.h"
#include "export/onnx_quantize.h"

namespace kestrel::train {
struct TrainOptions;
struct TrainHooks;
struct TrainSummary;
}  // namespace kestrel::train

namespace kestrel::app {

struct AttemptContext;  // app/job_kinds.h
struct AttemptResult;
class JobKindTable;

// The reference an exported file is verified against: the weights' network
// as trained (eval mode, BatchNorm not fused), forward and decode without
// NMS, once per input. Each input F32 [B, 3, H, W], RGB in [0, 1],
// letterboxed, H and W multiples of 32 (inputs may differ in shape); each
// output F32 [B, 4 + nc, A] (cx, cy, w, h in input pixels, then class
// scores), same order. Errors: the weights' (NotFound, InvalidArgument).
using ReferenceForward = std::function<Result<std::vector<FloatTensor>>(
    const std::string& weights, const std::vector<FloatTensor>& inputs)>;

// A training run (train/trainer.h's Train): setup problems are errors, how
// the run ended is in the summary.
using TrainEntry = std::function<Result<train::TrainSummary>(const train::TrainOptions& options,
                                                             const train::TrainHooks& hooks)>;

// The runner of job kind `kind` (app/job_kinds.h AttemptRunner) a backend
// provides; InstallBackends sets it in the job-kind table.
struct KindRunner {
  std::string kind;
  std::function<Result<AttemptResult>(AttemptContext& ctx)> run;
};

struct Backends {
  // The program, as errors name it ("kestrel-torch", "kestrel-deploy").
  std::string program = "kestrel";

  // ---- LibTorch (src/backend_torch)
  // LibTorch weights (.safetensors, .pt) behind Detector, on where.device
  // (where.runtime is "opencv", the default: LoadDetector refuses any other).
  DetectorLoader torch_detector;
  // Whether this machine has `device` for LibTorch (a CUDA device visible):
  // kInvalidArgument naming it when not ("device=cuda:3: no such CUDA
  // device"). Unset: only the CPU (CheckDevice).
  std::function<Status(const DeviceSpec& device)> check_device;
  ReferenceForward reference_forward;
  TrainEntry train;

  // ---- ONNX (src/backend_onnx)
  // An exported .onnx file behind Detector, in where.runtime ("opencv" or
  // "onnxruntime"; device is ignored: the CPU).
  DetectorLoader onnx_detector;
  // OpenCV DNN (CPU target, the OpenCV backend) as an OnnxRuntime.
  std::function<std::unique_ptr<OnnxRuntime>()> opencv_dnn;
  // ONNX Runtime: where it is (or why it cannot run), and the runtime there
  // (REQUIRES: the location's `unavailable` is empty).
  std::function<OnnxRuntimeLocation()> locate_onnxruntime;
  std::function<std::unique_ptr<OnnxRuntime>(const OnnxRuntimeLocation& where)> onnxruntime;
  // INT8 calibration in ONNX Runtime: per float graph output of `onnx_path`
  // over every input, min, max and count, plus a `bins`-bin histogram over
  // [lo, hi] for the outputs named in `ranges`. FailedPrecondition naming
  // the file when ONNX Runtime cannot run it. REQUIRES: as `onnxruntime`.
  std::function<Result<std::map<std::string, exporter::TensorStats>>(
      const OnnxRuntimeLocation& where, const std::string& onnx_path, const std::vector<FloatTensor>& inputs,
      int bins, const std::map<std::string, std::pair<double, double>>& ranges)>
      onnxruntime_output_stats;

  // ---- Job kinds: the attempt runners this program has (train, val,
  // export), set in the job-kind table by InstallBackends.
  std::vector<KindRunner> runners;
};

// The process's backends: empty (program "kestrel") until InstallBackends.
const Backends& ProgramBackends();

// Makes `backends` the process's and sets each of its runners in `kinds`
// (kNotFound naming a kind the table lacks). REQUIRES: no other thread
// reads either yet (main(), or a test's set-up); called once per process
// (a test may call it again between tests).
Status InstallBackends(Backends backends, JobKindTable& kinds);

// The detector for a resolved weights path, chosen by the file's type: an
// .onnx file (IsOnnxModelPath) to the ONNX backend, anything else to
// LibTorch. Errors, each naming the field:
// - a runtime other than opencv/onnxruntime: kInvalidArgument "runtime";
// - runtime=onnxruntime with LibTorch weights: kInvalidArgument "runtime"
//   (it selects how an ONNX file runs);
// - the backend missing from this program: kFailedPrecondition "model",
//   saying which program runs it (LibTorch weights: kestrel-torch, or
//   `kestrel export` them and pass the .onnx file);
// - the backend's own (a missing file, a bad graph, ...).
// options.imgsz 0 means "not given": ChooseImgsz (app/imgsz.h) picks the
// weights' training size (else 640) and logs "imgsz=N (why)" at info; the
// detector's Options().imgsz is the side in effect.
Result<std::unique_ptr<Detector>> LoadDetector(const std::string& weights,
                                               const eval::InferenceOptions& options,
                                               const DetectorPlacement& where);

// device= of the commands that run a model (predict, val model=, compare):
// its form (core/device_spec.h), then whether this program can run on it —
// the LibTorch backend's check_device, or, without one, the CPU only. Errors
// are kInvalidArgument located at the command line's `device` (a usage
// error: nothing is read or written before it).
Status CheckDevice(const std::string& device);

}  // namespace kestrel::app
