#include "backend_onnx/onnx_backend.h"

#include "backend_onnx/export_runtimes.h"
#include "backend_onnx/onnx_predict.h"

namespace kestrel::backend_onnx {

Result<std::unique_ptr<app::Detector>> LoadOnnxDetector(const std::string& weights,
                                                        const eval::InferenceOptions& options,
                                                        const app::DetectorPlacement& where) {
  if (where.runtime != "opencv" && where.runtime != "onnxruntime") {
    return Status::InvalidArgument("runtime=" + where.runtime + ": one of opencv, onnxruntime",
                                   {"command line", 0, "runtime"});
  }
  const OnnxEngine engine =
      where.runtime == "onnxruntime" ? OnnxEngine::kOnnxRuntime : OnnxEngine::kOpenCvDnn;
  KESTREL_ASSIGN_OR_RETURN(auto onnx, OnnxPredictor::Load(weights, options, engine));
  return std::unique_ptr<app::Detector>(std::move(onnx));
}

void RegisterOnnxBackend(app::Backends& backends) {
  backends.onnx_detector = LoadOnnxDetector;
  backends.opencv_dnn = MakeOpenCvDnnRuntime;
  backends.locate_onnxruntime = LocateOnnxRuntime;
  backends.onnxruntime = MakeOnnxRuntimeNode;
  backends.onnxruntime_output_stats = OnnxRuntimeOutputStats;
}

}  // namespace kestrel::backend_onnx
