#include "eval/inference.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/env.h"

namespace kestrel::eval {
namespace {

constexpr int kInputMultiple = 32;  // the largest YOLOv8 stride

Status CheckImage(const ImageView& im, size_t index) {
  if (im.data == nullptr || im.channels != 3 || im.width <= 0 || im.height <= 0) {
    return Status::InvalidArgument("image " + std::to_string(index) + " is not 8-bit 3-channel");
  }
  return {};
}

size_t RowBytes(const ImageView& im) { return im.stride != 0 ? im.stride : size_t(im.width) * 3; }

}  // namespace

Status InferenceOptions::Validate() const {
  if (imgsz < kInputMultiple || imgsz > 4096 || imgsz % kInputMultiple != 0) {
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

BatchInference::BatchInference(int num_classes, const InferenceOptions& options)
    : num_classes_(num_classes), opts_(options) {}

std::vector<std::vector<Detection>> BatchInference::Postprocess(const DecodedOutput& decoded, int n) const {
  std::vector<std::vector<Detection>> out(static_cast<size_t>(n));
  if (decoded.final_rows > 0) {
    for (int i = 0; i < n; ++i) {
      std::vector<Detection>& dets = out[static_cast<size_t>(i)];
      const float* r = decoded.data + int64_t(i) * decoded.final_rows * 6;
      for (int64_t k = 0; k < decoded.final_rows; ++k, r += 6) {
        const int cls = static_cast<int>(r[5]);
        if (!(r[4] > 0) || r[4] < opts_.nms.conf || cls < 0 || cls >= num_classes_) continue;
        dets.push_back({{r[0], r[1], r[2], r[3]}, r[4], cls});
      }
      std::stable_sort(dets.begin(), dets.end(),
                       [](const Detection& a, const Detection& b) { return a.score > b.score; });
      if (dets.size() > size_t(opts_.nms.max_det)) dets.resize(size_t(opts_.nms.max_det));
    }
    return out;
  }
  const int64_t rows = 4 + num_classes_;
  for (int i = 0; i < n; ++i) {
    out[static_cast<size_t>(i)] = PostprocessYolo(decoded.data + int64_t(i) * rows * decoded.anchors,
                                                  num_classes_, static_cast<int>(decoded.anchors), opts_.nms);
  }
  return out;
}

Status BatchInference::ForwardBatch(const std::vector<float>& input, int height, int width,
                                    const std::vector<ImagePrediction*>& preds, int64_t t0_us,
                                    const DecodedForward& forward) {
  Env& env = Env::Default();
  const int n = static_cast<int>(preds.size());
  const int64_t t1 = env.NowMicros();
  KESTREL_ASSIGN_OR_RETURN(DecodedOutput decoded, forward(input.data(), n, height, width));
  const int64_t t2 = env.NowMicros();
  std::vector<std::vector<Detection>> dets = Postprocess(decoded, n);
  for (int i = 0; i < n; ++i) {
    ImagePrediction& p = *preds[size_t(i)];
    p.detections = std::move(dets[size_t(i)]);
    ScaleToOriginal(p.detections, p.letterbox, p.width, p.height);
    if (decoded.embedding != nullptr && decoded.embedding_dim > 0) {
      const float* row = decoded.embedding + int64_t(i) * decoded.embedding_dim;
      p.embedding.assign(row, row + decoded.embedding_dim);
    }
  }
  const int64_t t3 = env.NowMicros();
  all_pre_us_ += double(t1 - t0_us);
  all_inf_us_ += double(t2 - t1);
  all_post_us_ += double(t3 - t2);
  all_images_ += n;
  if (batches_seen_++ >= opts_.warmup_batches) {
    pre_us_ += double(t1 - t0_us);
    inf_us_ += double(t2 - t1);
    post_us_ += double(t3 - t2);
    timed_images_ += n;
  }
  return {};
}

Result<std::vector<ImagePrediction>> BatchInference::Predict(const std::vector<ImageView>& images,
                                                             const DecodedForward& forward) {
  const int size = opts_.imgsz;
  const int64_t image_floats = 3 * int64_t(size) * size;
  std::vector<ImagePrediction> out(images.size());
  Env& env = Env::Default();
  std::vector<float> input;
  for (size_t start = 0; start < images.size(); start += size_t(opts_.batch)) {
    const size_t n = std::min(images.size() - start, size_t(opts_.batch));
    const int64_t t0 = env.NowMicros();
    input.resize(size_t(int64_t(n) * image_floats));
    std::vector<ImagePrediction*> preds;
    for (size_t i = 0; i < n; ++i) {
      const ImageView& img = images[start + i];
      KESTREL_RETURN_IF_ERROR(CheckImage(img, start + i));
      ImagePrediction& p = out[start + i];
      p.width = img.width;
      p.height = img.height;
      const ValGeometry g = ComputeSquareGeometry(img.width, img.height, size);
      p.letterbox = g.letterbox;
      KESTREL_RETURN_IF_ERROR(ValLetterboxToChw(img.data, img.height, img.width, RowBytes(img), g,
                                                input.data() + int64_t(i) * image_floats));
      preds.push_back(&p);
    }
    KESTREL_RETURN_IF_ERROR(ForwardBatch(input, size, size, preds, t0, forward));
  }
  return out;
}

Result<std::vector<ImagePrediction>> BatchInference::PredictVal(
    const std::vector<ImageSize>& sizes, const ValShapeOptions& shapes,
    const std::function<Result<ImageView>(size_t index)>& load, const DecodedForward& forward) {
  Status valid = shapes.Validate();
  if (!valid.IsOk()) return valid.WithLocation({"command line", 0, valid.Where().field});
  if (shapes.stride % kInputMultiple != 0) {
    return Status::InvalidArgument("stride must be a multiple of " + std::to_string(kInputMultiple),
                                   {"command line", 0, "stride"});
  }
  std::vector<ImagePrediction> out(sizes.size());
  Env& env = Env::Default();
  std::vector<float> input;
  for (const ValBatchShape& shape : PlanValBatches(sizes, shapes)) {
    const int64_t t0 = env.NowMicros();
    const int64_t image_floats = 3 * int64_t(shape.height) * shape.width;
    input.resize(size_t(int64_t(shape.images.size()) * image_floats));
    std::vector<ImagePrediction*> preds;
    for (size_t i = 0; i < shape.images.size(); ++i) {
      const size_t idx = shape.images[i];
      KESTREL_ASSIGN_OR_RETURN(ImageView img, load(idx));
      KESTREL_RETURN_IF_ERROR(CheckImage(img, idx));
      const ValGeometry g =
          ComputeValGeometry(img.width, img.height, shapes.imgsz, shape.width, shape.height);
      KESTREL_RETURN_IF_ERROR(ValLetterboxToChw(img.data, img.height, img.width, RowBytes(img), g,
                                                input.data() + int64_t(i) * image_floats));
      ImagePrediction& p = out[idx];
      p.width = img.width;
      p.height = img.height;
      p.letterbox = g.letterbox;
      preds.push_back(&p);
    }
    KESTREL_RETURN_IF_ERROR(ForwardBatch(input, shape.height, shape.width, preds, t0, forward));
  }
  return out;
}

StageTimes BatchInference::Timing() const {
  StageTimes t;
  const bool timed = timed_images_ > 0;
  const double n = double(timed ? timed_images_ : all_images_);
  if (n == 0) return t;
  t.images = timed ? timed_images_ : all_images_;
  t.preprocess_ms = (timed ? pre_us_ : all_pre_us_) / n / 1000.0;
  t.inference_ms = (timed ? inf_us_ : all_inf_us_) / n / 1000.0;
  t.postprocess_ms = (timed ? post_us_ : all_post_us_) / n / 1000.0;
  return t;
}

void BatchInference::ResetTiming() {
  batches_seen_ = 0;
  pre_us_ = inf_us_ = post_us_ = 0;
  all_pre_us_ = all_inf_us_ = all_post_us_ = 0;
  timed_images_ = all_images_ = 0;
}

}  // namespace kestrel::eval
