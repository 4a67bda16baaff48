// The torch layer of the predictor: everything else in the eval path is
// torch-free. c10::Error and cv::Exception are converted to Status here.
#include "model/predictor.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/utils.h>

#include <cmath>
#include <opencv2/core.hpp>

#include "core/env.h"
#include "model/torch_compat.h"
#include "model/weights.h"
#include "model/yolo.h"

namespace kestrel::model {

namespace {

// One vector per image from the Detect layer's inputs: each map average-
// and max-pooled over its cells (what the image holds on the whole, and
// the strongest response anywhere: a single small object shows in the
// max), each of those blocks scaled to unit length so every level and
// pooling weighs the same, the whole scaled to unit length. [B, D], D = 2
// x the maps' channels (n: 2 x (64 + 128 + 256) = 896).
at::Tensor Embed(const std::vector<at::Tensor>& features) {
  std::vector<at::Tensor> blocks;
  for (const at::Tensor& f : features) {
    const at::Tensor flat = f.to(at::kFloat).flatten(2);  // [B, C, HW]
    for (const at::Tensor& b : {flat.mean(2), std::get<0>(flat.max(2))})
      blocks.push_back(b / b.norm(2, {1}, true).clamp_min(1e-12));
  }
  return at::cat(blocks, 1) / std::sqrt(double(blocks.size()));
}

}  // namespace

struct Predictor::Impl {
  PredictorOptions opts;
  ModelSpec spec;
  std::vector<std::string> names;
  Yolo model{nullptr};
  at::Device device{at::kCPU};                // opts.device; inputs are copied there, outputs come back
  std::unique_ptr<eval::BatchInference> run;  // letterbox, batching, NMS, timing
  at::Tensor decoded;                         // the last forward's output, F32 CPU contiguous
  at::Tensor embedding;                       // its embeddings (opts.embeddings), F32 CPU [n, D]

  // The LibTorch forward for eval::BatchInference. Throws what LibTorch throws.
  eval::DecodedForward Forward() {
    return [this](const float* input, int n, int height, int width) -> Result<eval::DecodedOutput> {
      at::Tensor x = at::from_blob(const_cast<float*>(input), {n, 3, height, width}, at::kFloat);
      if (device.is_cuda()) x = HostToDevice(x, device);
      YoloOutput out = model->forward(x);
      decoded = out.decoded.to(at::kCPU, at::kFloat).contiguous();
      eval::DecodedOutput result{decoded.data_ptr<float>(), decoded.size(2)};
      if (opts.embeddings) {
        embedding = Embed(out.features).to(at::kCPU, at::kFloat).contiguous();
        result.embedding = embedding.data_ptr<float>();
        result.embedding_dim = embedding.size(1);
      }
      return result;
    };
  }
};

Predictor::Predictor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Predictor::~Predictor() = default;

Result<std::unique_ptr<Predictor>> Predictor::Load(const std::string& weights_path,
                                                   const PredictorOptions& opts) {
  KESTREL_RETURN_IF_ERROR(opts.Validate());
  if (!Env::Default().Stat(weights_path).exists) {
    return Status::NotFound("model weights not found", {weights_path, 0, "model"});
  }
  KESTREL_ASSIGN_OR_RETURN(WeightsInfo info, ReadWeightsInfo(weights_path));
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->spec = info.spec;
  impl->names = info.names;
  if (impl->names.size() != static_cast<size_t>(info.spec.nc)) {
    impl->names.clear();
    for (int c = 0; c < info.spec.nc; ++c) impl->names.push_back("class" + std::to_string(c));
  }
  KESTREL_ASSIGN_OR_RETURN(DeviceSpec device, ParseDeviceSpec(opts.device));
  KESTREL_ASSIGN_OR_RETURN(impl->device, ToTorchDevice(device));
  try {
    KESTREL_ASSIGN_OR_RETURN(impl->model, CreateModel(info.spec));
    KESTREL_RETURN_IF_ERROR(LoadWeights(*impl->model, weights_path, LoadMode::kStrict));
    impl->model->eval();
    if (opts.fuse) impl->model->Fuse();
    if (impl->device.is_cuda()) impl->model->to(impl->device);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace(),
                            {weights_path, 0, "model"});
  }
  impl->run = std::make_unique<eval::BatchInference>(info.spec.nc, opts);
  return std::unique_ptr<Predictor>(new Predictor(std::move(impl)));
}

const ModelSpec& Predictor::Spec() const { return impl_->spec; }
int Predictor::NumClasses() const { return impl_->spec.nc; }
const std::vector<std::string>& Predictor::Names() const { return impl_->names; }
const PredictorOptions& Predictor::Options() const { return impl_->opts; }

Result<std::vector<ImagePrediction>> Predictor::Predict(const std::vector<cv::Mat>& images) {
  std::vector<eval::ImageView> views;
  views.reserve(images.size());
  for (size_t i = 0; i < images.size(); ++i) {
    const cv::Mat& img = images[i];
    if (img.empty() || img.type() != CV_8UC3) {
      return Status::InvalidArgument("image " + std::to_string(i) + " is not 8-bit 3-channel");
    }
    views.push_back({img.data, img.cols, img.rows, 3, img.step[0]});
  }
  try {
    torch::NoGradGuard no_grad;
    return impl_->run->Predict(views, impl_->Forward());
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

Result<std::vector<ImagePrediction>> Predictor::PredictVal(
    const std::vector<eval::ImageSize>& sizes, const eval::ValShapeOptions& shapes,
    const std::function<Result<cv::Mat>(size_t index)>& load) {
  cv::Mat current;  // the image being letterboxed (one at a time)
  auto view = [&](size_t i) -> Result<eval::ImageView> {
    KESTREL_ASSIGN_OR_RETURN(current, load(i));
    if (current.empty() || current.type() != CV_8UC3) {
      return Status::InvalidArgument("image " + std::to_string(i) + " is not 8-bit 3-channel");
    }
    return eval::ImageView{current.data, current.cols, current.rows, 3, current.step[0]};
  };
  try {
    torch::NoGradGuard no_grad;
    return impl_->run->PredictVal(sizes, shapes, view, impl_->Forward());
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace());
  } catch (const cv::Exception& e) {
    return Status::InvalidArgument(std::string("OpenCV: ") + e.what());
  }
}

namespace {

// What PredictInput and ForwardDecoded take: a letterboxed float batch.
Status CheckNetworkInput(const SafeTensor& input) {
  if (input.dtype != "F32" || input.shape.size() != 4 || input.shape[1] != 3 ||
      input.shape[2] % kMaxStride != 0 || input.shape[3] % kMaxStride != 0) {
    return Status::InvalidArgument("input must be F32 [B, 3, H, W] with H, W multiples of 32",
                                   {"", 0, "input"});
  }
  return {};
}

}  // namespace

Result<std::vector<std::vector<eval::Detection>>> Predictor::PredictInput(const SafeTensor& input) {
  KESTREL_RETURN_IF_ERROR(CheckNetworkInput(input));
  try {
    torch::NoGradGuard no_grad;
    KESTREL_ASSIGN_OR_RETURN(at::Tensor x, ToTorch(input, "input"));
    if (impl_->device.is_cuda()) x = HostToDevice(x, impl_->device);
    const at::Tensor d = impl_->model->forward(x).decoded.to(at::kCPU, at::kFloat).contiguous();
    return impl_->run->Postprocess({d.data_ptr<float>(), d.size(2)}, static_cast<int>(d.size(0)));
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

Result<SafeTensor> Predictor::ForwardDecoded(const SafeTensor& input) {
  KESTREL_RETURN_IF_ERROR(CheckNetworkInput(input));
  try {
    torch::NoGradGuard no_grad;
    KESTREL_ASSIGN_OR_RETURN(at::Tensor x, ToTorch(input, "input"));
    if (impl_->device.is_cuda()) x = HostToDevice(x, impl_->device);
    return FromTorch(impl_->model->forward(x).decoded.to(at::kFloat));
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

StageTimes Predictor::Timing() const { return impl_->run->Timing(); }

void Predictor::ResetTiming() { impl_->run->ResetTiming(); }

}  // namespace kestrel::model
