// The OpenCV DNN adapter of the ONNX path; everything around the forward is
// eval::BatchInference, shared with the LibTorch predictor. cv::Exception is
// converted to Status here.
#include "backend_onnx/onnx_predict.h"

#include <algorithm>
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#include <utility>

#include "backend_onnx/export_runtimes.h"
#include "core/env.h"

namespace kestrel::backend_onnx {

struct OnnxPredictor::Impl {
  std::string path;
  exporter::OnnxDetectorInfo info;
  eval::InferenceOptions opts;
  cv::dnn::Net net;                      // OnnxEngine::kOpenCvDnn
  std::unique_ptr<OnnxSession> session;  // OnnxEngine::kOnnxRuntime
  std::unique_ptr<eval::BatchInference> run;
  std::vector<float> padded;   // a last, short run filled up to the file's batch
  std::vector<float> decoded;  // the last forward's output0 rows of the real images

  // output0 of `n` letterboxed images of height x width into `decoded`, the
  // file's batch at a time (all at once when its batch is dynamic); returns
  // the anchors. Throws what OpenCV throws.
  Result<int64_t> Forward(const float* input, int n, int height, int width) {
    const int batch = info.batch > 0 ? info.batch : n;
    int64_t anchors = info.anchors;
    if (anchors < 0 && !info.nms) {
      anchors = 0;
      for (int s : {8, 16, 32}) anchors += int64_t(height / s) * (width / s);
    }
    const int64_t image_in = 3 * int64_t(height) * width;
    // Raw: [4 + nc, anchors] per image; nms=true: [max_det, 6] final detections.
    const std::vector<int64_t> shape = info.nms ? std::vector<int64_t>{batch, info.max_det, 6}
                                                : std::vector<int64_t>{batch, 4 + info.nc, anchors};
    const int64_t image_out = shape[1] * shape[2];
    decoded.resize(size_t(int64_t(n) * image_out));
    for (int start = 0; start < n; start += batch) {
      const int k = std::min(batch, n - start);
      const float* src = input + int64_t(start) * image_in;
      if (k < batch) {
        padded.assign(size_t(int64_t(batch) * image_in), 114.0f / 255.0f);
        std::copy(src, src + int64_t(k) * image_in, padded.begin());
        src = padded.data();
      }
      if (session) {
        KESTREL_ASSIGN_OR_RETURN(FloatTensor out, session->Run(src, {batch, 3, height, width}));
        if (out.shape != shape) {
          return Status::Internal(
              session->Name() + " returned output0 of another shape than the file declares",
              {path, 0, "model"});
        }
        std::copy(out.data.begin(), out.data.begin() + int64_t(k) * image_out,
                  decoded.begin() + int64_t(start) * image_out);
        continue;
      }
      const int sizes[4] = {batch, 3, height, width};
      // Wraps without copying; the net never writes its input.
      const cv::Mat blob(4, sizes, CV_32F, const_cast<float*>(src));
      net.setInput(blob, info.input.name);
      const cv::Mat out = net.forward(info.output.name);
      if (out.type() != CV_32F || out.dims != 3 || out.size[0] != batch || out.size[1] != shape[1] ||
          out.size[2] != shape[2] || !out.isContinuous()) {
        return Status::Internal("OpenCV DNN returned output0 of another shape than the file declares",
                                {path, 0, "model"});
      }
      const auto* o = reinterpret_cast<const float*>(out.data);
      std::copy(o, o + int64_t(k) * image_out, decoded.begin() + int64_t(start) * image_out);
    }
    return anchors;
  }

  eval::DecodedForward Forwarder() {
    return [this](const float* input, int n, int height, int width) -> Result<eval::DecodedOutput> {
      if (info.FixedSize() && (height != info.height || width != info.width)) {
        return Status::InvalidArgument("input " + std::to_string(height) + "x" + std::to_string(width) +
                                           " is not the file's " + std::to_string(info.height) + "x" +
                                           std::to_string(info.width),
                                       {path, 0, "imgsz"});
      }
      KESTREL_ASSIGN_OR_RETURN(int64_t anchors, Forward(input, n, height, width));
      if (info.nms) return eval::DecodedOutput{decoded.data(), 0, info.max_det};
      return eval::DecodedOutput{decoded.data(), anchors};
    };
  }
};

OnnxPredictor::OnnxPredictor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OnnxPredictor::~OnnxPredictor() = default;

Result<std::unique_ptr<OnnxPredictor>> OnnxPredictor::Load(const std::string& path,
                                                           const eval::InferenceOptions& options,
                                                           OnnxEngine engine) {
  Env& env = Env::Default();
  if (!env.Stat(path).exists) return Status::NotFound("model file not found", {path, 0, "model"});
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, env.ReadFile(path));
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  KESTREL_ASSIGN_OR_RETURN(impl->info, exporter::ReadOnnxDetectorInfo(bytes, path));
  const exporter::OnnxDetectorInfo& info = impl->info;
  if (info.FixedSize() && info.height != info.width) {
    return Status::InvalidArgument("the file's input is " + std::to_string(info.height) + "x" +
                                       std::to_string(info.width) + "; only square inputs are run",
                                   {path, 0, "imgsz"});
  }
  impl->opts = options;
  if (info.FixedSize()) impl->opts.imgsz = info.width;
  Status valid = impl->opts.Validate();
  if (!valid.IsOk()) return valid.WithLocation({path, 0, valid.Where().field});
  if (info.nms && engine != OnnxEngine::kOnnxRuntime) {
    return Status::InvalidArgument(
        "exported with nms=true (NonMaxSuppression in the graph, output0 holds final detections), which "
        "OpenCV DNN 4.6 cannot import: run it with runtime=onnxruntime, or export again with nms=false",
        {path, 0, "model"});
  }
  // The exporter's note on a graph OpenCV DNN cannot import (a dynamic
  // YOLO11's Shape node): say which operator instead of OpenCV's parse error.
  if (auto it = info.metadata.find("opencv_dnn");
      it != info.metadata.end() && engine != OnnxEngine::kOnnxRuntime) {
    return Status::InvalidArgument(
        "OpenCV DNN 4.6 cannot run this file (" + it->second +
            "): run it with runtime=onnxruntime, or export again without dynamic=true",
        {path, 0, "model"});
  }
  if (engine == OnnxEngine::kOnnxRuntime) {
    const OnnxRuntimeLocation where = LocateOnnxRuntime();
    if (!where.unavailable.empty()) {
      return Status::FailedPrecondition("ONNX Runtime is not available: " + where.unavailable,
                                        {path, 0, "model"});
    }
    KESTREL_ASSIGN_OR_RETURN(impl->session,
                             OpenOnnxRuntimeSession(where, path, info.input.name, info.output.name));
    impl->run = std::make_unique<eval::BatchInference>(info.nc, impl->opts);
    return std::unique_ptr<OnnxPredictor>(new OnnxPredictor(std::move(impl)));
  }
  try {
    impl->net = cv::dnn::readNetFromONNX(bytes.data(), bytes.size());
    impl->net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    impl->net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  } catch (const cv::Exception& e) {
    return Status::InvalidArgument(
        std::string(
            "OpenCV DNN cannot load the file (FP16 and INT8 exports run with runtime=onnxruntime): ") +
            e.what(),
        {path, 0, "model"});
  }
  impl->run = std::make_unique<eval::BatchInference>(info.nc, impl->opts);
  return std::unique_ptr<OnnxPredictor>(new OnnxPredictor(std::move(impl)));
}

const exporter::OnnxDetectorInfo& OnnxPredictor::Info() const { return impl_->info; }
int OnnxPredictor::NumClasses() const { return impl_->info.nc; }
const std::vector<std::string>& OnnxPredictor::Names() const { return impl_->info.names; }
std::string OnnxPredictor::Arch() const { return impl_->info.arch; }
bool OnnxPredictor::FixedInputSize() const { return impl_->info.FixedSize(); }
const eval::InferenceOptions& OnnxPredictor::Options() const { return impl_->opts; }
std::string OnnxPredictor::RuntimeName() const {
  return impl_->session ? impl_->session->Name() : "opencv-dnn " CV_VERSION;
}

Result<std::vector<eval::ImagePrediction>> OnnxPredictor::Predict(
    const std::vector<eval::ImageView>& images) {
  try {
    return impl_->run->Predict(images, impl_->Forwarder());
  } catch (const cv::Exception& e) {
    return Status::Internal(std::string("OpenCV DNN: ") + e.what(), {impl_->path, 0, "model"});
  }
}

Result<std::vector<eval::ImagePrediction>> OnnxPredictor::PredictVal(
    const std::vector<eval::ImageSize>& sizes, const eval::ValShapeOptions& shapes,
    const std::function<Result<eval::ImageView>(size_t index)>& load) {
  if (impl_->info.FixedSize() && shapes.rect) {
    return Status::InvalidArgument("an ONNX file has one input shape: validate it with rect=false",
                                   {"command line", 0, "rect"});
  }
  if (impl_->info.FixedSize() && shapes.imgsz != impl_->info.width) {
    return Status::InvalidArgument("imgsz " + std::to_string(shapes.imgsz) +
                                       " is not the file's input side " + std::to_string(impl_->info.width),
                                   {"command line", 0, "imgsz"});
  }
  try {
    return impl_->run->PredictVal(sizes, shapes, load, impl_->Forwarder());
  } catch (const cv::Exception& e) {
    return Status::Internal(std::string("OpenCV DNN: ") + e.what(), {impl_->path, 0, "model"});
  }
}

eval::StageTimes OnnxPredictor::Timing() const { return impl_->run->Timing(); }
void OnnxPredictor::ResetTiming() { impl_->run->ResetTiming(); }

}  // namespace kestrel::backend_onnx
