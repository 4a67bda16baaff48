// The torch layer of the predictor: everything else in the eval path is
// torch-free. c10::Error and cv::Exception are converted to Status here.
#include "model/predictor.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "core/env.h"
#include "model/weights.h"
#include "model/yolo.h"

namespace kestrel::model {

Status PredictorOptions::Validate() const {
  if (imgsz < kMaxStride || imgsz > 4096 || imgsz % kMaxStride != 0) {
    return Status::InvalidArgument(
        "imgsz must be a multiple of 32 in [32, 4096], got " + std::to_string(imgsz),
        {"command line", 0, "imgsz"});
  }
  if (batch < 1) {
    return Status::InvalidArgument("batch must be >= 1, got " + std::to_string(batch),
                                   {"command line", 0, "batch"});
  }
  if (warmup_batches < 0) {
    return Status::InvalidArgument("warmup_batches must be >= 0", {"command line", 0, "warmup_batches"});
  }
  Status s = nms.Validate();
  return s.IsOk() ? s : s.WithLocation({"command line", 0, ""});
}

cv::Mat LetterboxImage(const cv::Mat& image, int size, eval::Letterbox* lb) {
  const eval::Letterbox g = eval::ComputeLetterbox(image.cols, image.rows, size, size);
  if (lb != nullptr) *lb = g;
  // Same rounding as ComputeLetterbox's resized size (round half to even).
  const int new_w = static_cast<int>(std::nearbyint(image.cols * g.scale));
  const int new_h = static_cast<int>(std::nearbyint(image.rows * g.scale));
  cv::Mat resized;
  if (new_w == image.cols && new_h == image.rows) {
    resized = image;
  } else {
    cv::resize(image, resized, cv::Size(new_w, new_h), 0, 0, cv::INTER_LINEAR);
  }
  const int left = static_cast<int>(g.pad_x), top = static_cast<int>(g.pad_y);
  cv::Mat out(size, size, CV_8UC3, cv::Scalar(114, 114, 114));
  const int w = std::min(new_w, size - left), h = std::min(new_h, size - top);
  resized(cv::Rect(0, 0, w, h)).copyTo(out(cv::Rect(left, top, w, h)));
  return out;
}

struct Predictor::Impl {
  PredictorOptions opts;
  ModelSpec spec;
  std::vector<std::string> names;
  Yolo model{nullptr};
  // Accumulated over images after the warm-up batches.
  int batches_seen = 0;
  double pre_us = 0, inf_us = 0, post_us = 0;
  int64_t timed_images = 0;
  // Fallback when every batch was a warm-up one.
  double all_pre_us = 0, all_inf_us = 0, all_post_us = 0;
  int64_t all_images = 0;

  // Forward of a filled input batch, detections mapped back to original
  // pixels with each prediction's letterbox, stage times (preprocessing
  // began at t0). Throws what LibTorch throws.
  void ForwardBatch(const at::Tensor& batch, const std::vector<ImagePrediction*>& preds, int64_t t0) {
    Env& env = Env::Default();
    const size_t n = preds.size();
    const int64_t t1 = env.NowMicros();
    YoloOutput y = model->forward(batch);
    at::Tensor decoded = y.decoded.to(at::kCPU).contiguous();
    const int64_t t2 = env.NowMicros();
    auto dets = Postprocess(decoded);
    for (size_t i = 0; i < n; ++i) {
      ImagePrediction& p = *preds[i];
      p.detections = std::move(dets[i]);
      eval::ScaleToOriginal(p.detections, p.letterbox, p.width, p.height);
    }
    const int64_t t3 = env.NowMicros();
    all_pre_us += double(t1 - t0);
    all_inf_us += double(t2 - t1);
    all_post_us += double(t3 - t2);
    all_images += int64_t(n);
    if (batches_seen++ >= opts.warmup_batches) {
      pre_us += double(t1 - t0);
      inf_us += double(t2 - t1);
      post_us += double(t3 - t2);
      timed_images += int64_t(n);
    }
  }

  // [B, 4+nc, A] eval output -> per-image detections in input pixels.
  std::vector<std::vector<eval::Detection>> Postprocess(const at::Tensor& decoded) const {
    at::Tensor d = decoded.to(at::kCPU, at::kFloat).contiguous();
    const int64_t b = d.size(0), rows = d.size(1), anchors = d.size(2);
    std::vector<std::vector<eval::Detection>> out(static_cast<size_t>(b));
    const float* base = d.data_ptr<float>();
    for (int64_t i = 0; i < b; ++i) {
      out[static_cast<size_t>(i)] =
          eval::PostprocessYolo(base + i * rows * anchors, spec.nc, static_cast<int>(anchors), opts.nms);
    }
    return out;
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
  try {
    KESTREL_ASSIGN_OR_RETURN(impl->model, CreateModel(info.spec));
    KESTREL_RETURN_IF_ERROR(LoadWeights(*impl->model, weights_path, LoadMode::kStrict));
    impl->model->eval();
    if (opts.fuse) impl->model->Fuse();
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace(),
                            {weights_path, 0, "model"});
  }
  return std::unique_ptr<Predictor>(new Predictor(std::move(impl)));
}

const ModelSpec& Predictor::Spec() const { return impl_->spec; }
int Predictor::NumClasses() const { return impl_->spec.nc; }
const std::vector<std::string>& Predictor::Names() const { return impl_->names; }
const PredictorOptions& Predictor::Options() const { return impl_->opts; }

Result<std::vector<ImagePrediction>> Predictor::Predict(const std::vector<cv::Mat>& images) {
  Impl& m = *impl_;
  const int size = m.opts.imgsz;
  const int64_t plane = int64_t(size) * size;
  std::vector<ImagePrediction> out(images.size());
  Env& env = Env::Default();
  try {
    torch::NoGradGuard no_grad;
    for (size_t start = 0; start < images.size(); start += size_t(m.opts.batch)) {
      const size_t n = std::min(images.size() - start, size_t(m.opts.batch));
      const int64_t t0 = env.NowMicros();
      at::Tensor batch = at::empty({int64_t(n), 3, size, size}, at::kFloat);
      float* dst = batch.data_ptr<float>();
      for (size_t i = 0; i < n; ++i) {
        const cv::Mat& img = images[start + i];
        if (img.empty() || img.type() != CV_8UC3) {
          return Status::InvalidArgument("image " + std::to_string(start + i) + " is not 8-bit 3-channel");
        }
        ImagePrediction& p = out[start + i];
        p.width = img.cols;
        p.height = img.rows;
        cv::Mat lb = LetterboxImage(img, size, &p.letterbox);
        float* chw = dst + int64_t(i) * 3 * plane;
        for (int y = 0; y < size; ++y) {
          const uint8_t* row = lb.ptr<uint8_t>(y);
          for (int x = 0; x < size; ++x) {
            const int64_t o = int64_t(y) * size + x;
            chw[o] = row[3 * x] * (1.0f / 255.0f);
            chw[plane + o] = row[3 * x + 1] * (1.0f / 255.0f);
            chw[2 * plane + o] = row[3 * x + 2] * (1.0f / 255.0f);
          }
        }
      }
      std::vector<ImagePrediction*> preds;
      for (size_t i = 0; i < n; ++i) preds.push_back(&out[start + i]);
      m.ForwardBatch(batch, preds, t0);
    }
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace());
  } catch (const cv::Exception& e) {
    return Status::InvalidArgument(std::string("OpenCV: ") + e.what());
  }
  return out;
}

Result<std::vector<ImagePrediction>> Predictor::PredictVal(
    const std::vector<eval::ImageSize>& sizes, const eval::ValShapeOptions& shapes,
    const std::function<Result<cv::Mat>(size_t index)>& load) {
  Status valid = shapes.Validate();
  if (!valid.IsOk()) return valid.WithLocation({"command line", 0, valid.Where().field});
  if (shapes.stride % kMaxStride != 0) {
    return Status::InvalidArgument("stride must be a multiple of " + std::to_string(kMaxStride),
                                   {"command line", 0, "stride"});
  }
  Impl& m = *impl_;
  std::vector<ImagePrediction> out(sizes.size());
  Env& env = Env::Default();
  try {
    torch::NoGradGuard no_grad;
    for (const eval::ValBatchShape& shape : eval::PlanValBatches(sizes, shapes)) {
      const int64_t t0 = env.NowMicros();
      const int64_t n = int64_t(shape.images.size());
      const int64_t plane = int64_t(shape.height) * shape.width;
      at::Tensor batch = at::empty({n, 3, shape.height, shape.width}, at::kFloat);
      float* dst = batch.data_ptr<float>();
      std::vector<ImagePrediction*> preds;
      for (int64_t i = 0; i < n; ++i) {
        const size_t idx = shape.images[size_t(i)];
        KESTREL_ASSIGN_OR_RETURN(cv::Mat img, load(idx));
        if (img.empty() || img.type() != CV_8UC3) {
          return Status::InvalidArgument("image " + std::to_string(idx) + " is not 8-bit 3-channel");
        }
        const eval::ValGeometry g =
            eval::ComputeValGeometry(img.cols, img.rows, shapes.imgsz, shape.width, shape.height);
        KESTREL_RETURN_IF_ERROR(
            eval::ValLetterboxToChw(img.data, img.rows, img.cols, img.step[0], g, dst + i * 3 * plane));
        ImagePrediction& p = out[idx];
        p.width = img.cols;
        p.height = img.rows;
        p.letterbox = g.letterbox;
        preds.push_back(&p);
      }
      m.ForwardBatch(batch, preds, t0);
    }
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace());
  } catch (const cv::Exception& e) {
    return Status::InvalidArgument(std::string("OpenCV: ") + e.what());
  }
  return out;
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
    YoloOutput y = impl_->model->forward(x);
    return impl_->Postprocess(y.decoded);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

Result<SafeTensor> Predictor::ForwardDecoded(const SafeTensor& input) {
  KESTREL_RETURN_IF_ERROR(CheckNetworkInput(input));
  try {
    torch::NoGradGuard no_grad;
    KESTREL_ASSIGN_OR_RETURN(at::Tensor x, ToTorch(input, "input"));
    return FromTorch(impl_->model->forward(x).decoded.to(at::kFloat));
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("LibTorch: ") + e.what_without_backtrace());
  }
}

StageTimes Predictor::Timing() const {
  const Impl& m = *impl_;
  StageTimes t;
  const bool timed = m.timed_images > 0;
  const double n = double(timed ? m.timed_images : m.all_images);
  if (n == 0) return t;
  t.images = timed ? m.timed_images : m.all_images;
  t.preprocess_ms = (timed ? m.pre_us : m.all_pre_us) / n / 1000.0;
  t.inference_ms = (timed ? m.inf_us : m.all_inf_us) / n / 1000.0;
  t.postprocess_ms = (timed ? m.post_us : m.all_post_us) / n / 1000.0;
  return t;
}

void Predictor::ResetTiming() {
  Impl& m = *impl_;
  m.batches_seen = 0;
  m.pre_us = m.inf_us = m.post_us = 0;
  m.all_pre_us = m.all_inf_us = m.all_post_us = 0;
  m.timed_images = m.all_images = 0;
}

}  // namespace kestrel::model
