#include "app/backends.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <utility>

#include "app/imgsz.h"
#include "app/job_kinds.h"
#include "core/env.h"

namespace kestrel::app {
namespace {

Backends& Installed() {
  static Backends backends;
  return backends;
}

Status Missing(const std::string& weights, const std::string& what) {
  return Status::FailedPrecondition(what, {weights, 0, "model"});
}

std::string NoOnnxBackend() {
  return ProgramBackends().program + " has no ONNX backend (kestrel-torch and kestrel-deploy have one)";
}

// MakeOpenCvDnnRuntime in a program without the ONNX backend.
class MissingRuntime final : public OnnxRuntime {
 public:
  std::string Name() const override { return "opencv-dnn"; }
  Result<std::vector<FloatTensor>> Run(const std::string& onnx_path,
                                       const std::vector<FloatTensor>& /*inputs*/) override {
    return Status::FailedPrecondition("OpenCV DNN cannot run here: " + NoOnnxBackend(), {onnx_path});
  }
};

}  // namespace

bool IsOnnxModelPath(const std::string& model) {
  if (model.size() < 5) return false;
  std::string ext = model.substr(model.size() - 5);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".onnx";
}

const Backends& ProgramBackends() { return Installed(); }

std::unique_ptr<OnnxRuntime> MakeOpenCvDnnRuntime() {
  const Backends& b = ProgramBackends();
  if (!b.opencv_dnn) return std::make_unique<MissingRuntime>();
  return b.opencv_dnn();
}

OnnxRuntimeLocation LocateOnnxRuntime() {
  const Backends& b = ProgramBackends();
  if (!b.locate_onnxruntime) {
    OnnxRuntimeLocation none;
    none.unavailable = NoOnnxBackend();
    return none;
  }
  return b.locate_onnxruntime();
}

std::unique_ptr<OnnxRuntime> MakeOnnxRuntimeNode(const OnnxRuntimeLocation& where) {
  return ProgramBackends().onnxruntime(where);
}

Result<std::map<std::string, exporter::TensorStats>> OnnxRuntimeOutputStats(
    const OnnxRuntimeLocation& where, const std::string& onnx_path, const std::vector<FloatTensor>& inputs,
    int bins, const std::map<std::string, std::pair<double, double>>& ranges) {
  return ProgramBackends().onnxruntime_output_stats(where, onnx_path, inputs, bins, ranges);
}

Status InstallBackends(Backends backends, JobKindTable& kinds) {
  for (const KindRunner& r : backends.runners) KESTREL_RETURN_IF_ERROR(kinds.SetRunner(r.kind, r.run));
  Installed() = std::move(backends);
  return {};
}

Status CheckDevice(const std::string& device) {
  const ErrorLocation where{"command line", 0, "device"};
  Result<DeviceSpec> spec = ParseDeviceSpec(device);
  if (!spec.IsOk()) return Status::InvalidArgument(spec.GetStatus().Message(), where);
  const Backends& b = ProgramBackends();
  if (b.check_device) {
    const Status s = b.check_device(*spec);
    return s.IsOk() ? s : Status::InvalidArgument(s.Message(), where);
  }
  if (spec->IsCuda()) {
    return Status::InvalidArgument(
        "device=" + device + ": " + b.program + " runs on the CPU (OpenCV DNN, ONNX Runtime); use device=cpu",
        where);
  }
  return {};
}

Result<std::unique_ptr<Detector>> LoadDetector(const std::string& weights,
                                               const eval::InferenceOptions& requested,
                                               const DetectorPlacement& where) {
  const Backends& b = ProgramBackends();
  // imgsz 0 is "not given": the weights' training size (app/imgsz.h),
  // resolved once the backend that runs them is known to be here.
  auto resolved = [&]() -> Result<eval::InferenceOptions> {
    eval::InferenceOptions options = requested;
    if (options.imgsz != 0) return options;
    // A missing file: the backend's own error names it.
    if (!Env::Default().Stat(weights).exists) {
      options.imgsz = kFallbackImgsz;
      return options;
    }
    KESTREL_ASSIGN_OR_RETURN(ImgszChoice choice, ChooseImgsz(weights, 0));
    options.imgsz = choice.imgsz;
    spdlog::info("{}", choice.Line());
    return options;
  };
  if (where.runtime != "opencv" && where.runtime != "onnxruntime") {
    return Status::InvalidArgument("runtime=" + where.runtime + ": one of opencv, onnxruntime",
                                   {"command line", 0, "runtime"});
  }
  if (IsOnnxModelPath(weights)) {
    if (!b.onnx_detector) {
      return Missing(weights, "running an exported ONNX file needs kestrel-torch or kestrel-deploy; " +
                                  b.program + " has no ONNX backend");
    }
    KESTREL_ASSIGN_OR_RETURN(eval::InferenceOptions options, resolved());
    return b.onnx_detector(weights, options, where);
  }
  if (!b.torch_detector) {
    return Missing(weights, b.program +
                                " runs exported ONNX files only (LibTorch weights need kestrel-torch, "
                                "which `kestrel` starts): export the model with `kestrel export model=" +
                                weights + "` and pass the .onnx file");
  }
  if (where.runtime != "opencv") {
    return Status::InvalidArgument("runtime=" + where.runtime + " runs exported .onnx files; " + weights +
                                       " is run by LibTorch (leave runtime unset)",
                                   {"command line", 0, "runtime"});
  }
  KESTREL_ASSIGN_OR_RETURN(eval::InferenceOptions options, resolved());
  return b.torch_detector(weights, options, where);
}

}  // namespace kestrel::app
