#include "train/validator.h"

#include <torch/utils.h>

#include <algorithm>
#include <cstdio>
#include <opencv2/core/mat.hpp>

#include "data/image.h"
#include "eval/postprocess.h"
#include "model/spec.h"

namespace kestrel::train {

Result<std::unique_ptr<Validator>> Validator::Create(const data::Manifest& manifest, data::ImageSource source,
                                                     data::LoaderOptions loader,
                                                     const std::vector<std::string>& names,
                                                     torch::Device device, const ValidatorOptions& options) {
  if (!source) return Status::InvalidArgument("validation needs an image source");
  if (!(loader.max_bad_fraction >= 0 && loader.max_bad_fraction <= 1)) {
    return Status::InvalidArgument("must be in [0, 1]", {"", 0, "max_bad_fraction"});
  }
  if (options.samples < 0) {
    return Status::InvalidArgument("must be >= 0 (0 = no samples)", {"", 0, "val_samples"});
  }
  if (options.grid_batches < 0 || options.grid_batches > 3) {
    return Status::InvalidArgument("must be in [0, 3]", {"", 0, "grid_batches"});
  }
  if (options.batch < 0) {
    return Status::InvalidArgument("val batch must be >= 0 (0 = twice the training batch)", {"", 0, "batch"});
  }
  eval::ValShapeOptions so;
  so.imgsz = loader.imgsz;
  so.batch = options.batch > 0 ? options.batch : 2 * std::max(1, loader.batch);
  so.rect = options.rect;
  so.pad = options.pad;
  so.stride = model::kMaxStride;
  KESTREL_RETURN_IF_ERROR(so.Validate());
  std::unique_ptr<Validator> v(new Validator());
  std::vector<eval::ImageSize> sizes;
  for (const auto& e : manifest.entries) {
    if (e.split != data::Split::kVal) continue;
    v->entries_.push_back(&e);
    sizes.push_back({e.width, e.height});
  }
  if (v->entries_.empty())
    return Status::FailedPrecondition("data: the val split has no images")
        .WithReason(FailureReason::kDatasetErrors);
  v->plan_ = eval::PlanValBatches(sizes, so);
  v->source_ = std::move(source);
  v->imgsz_ = so.imgsz;
  v->max_bad_fraction_ = loader.max_bad_fraction;
  v->names_ = names;
  v->device_ = device;
  v->samples_ = options.samples;
  v->grid_batches_ = options.grid_batches;
  return v;
}

int64_t Validator::NumImages() const { return static_cast<int64_t>(entries_.size()); }

namespace {

// One val batch, built on the calling thread: the letterboxed images, the
// loss targets and, per image, what is needed to score it.
struct ValBatch {
  int height = 0, width = 0;
  std::vector<float> images;   // [B, 3, H, W]
  std::vector<float> targets;  // [N, 6] batch_idx, cls, cx, cy, w, h normalized to W, H
  std::vector<const data::ManifestEntry*> entries;
  std::vector<eval::ValGeometry> geometry;
  int Size() const { return static_cast<int>(entries.size()); }
};

// Reads, decodes and letterboxes the images of `shape`; unreadable ones are
// left out and counted in `bad`.
Status BuildValBatch(const eval::ValBatchShape& shape, const std::vector<const data::ManifestEntry*>& entries,
                     const data::ImageSource& source, int imgsz, ValBatch& out, int64_t& bad) {
  out.height = shape.height;
  out.width = shape.width;
  const int64_t plane = int64_t(shape.height) * shape.width;
  out.images.assign(size_t(3 * plane) * shape.images.size(), 0.0f);
  for (size_t idx : shape.images) {
    const data::ManifestEntry& e = *entries[idx];
    auto bytes = source(e);
    if (!bytes.IsOk()) {
      // An image store that does not answer (S3 down, this host cut off) says
      // nothing about the image: the run fails (a retryable attempt failure),
      // it is never counted against max_bad_fraction (dataset_errors, permanent).
      if (bytes.GetStatus().Code() == StatusCode::kUnavailable) return bytes.GetStatus();
      ++bad;
      continue;
    }
    auto img = data::DecodeImage(*bytes, e.path);
    if (!img.IsOk()) {
      ++bad;
      continue;
    }
    const cv::Mat& m = *img;
    const eval::ValGeometry g = eval::ComputeValGeometry(m.cols, m.rows, imgsz, shape.width, shape.height);
    const int b = out.Size();
    KESTREL_RETURN_IF_ERROR(
        eval::ValLetterboxToChw(m.data, m.rows, m.cols, m.step[0], g, out.images.data() + b * 3 * plane)
            .WithContext(e.path));
    // Labels as the letterbox moves them (normalized by the resized size).
    const double sx = double(g.placed_width) / shape.width, sy = double(g.placed_height) / shape.height;
    const double ox = g.letterbox.pad_x / shape.width, oy = g.letterbox.pad_y / shape.height;
    for (const auto& box : e.boxes) {
      out.targets.insert(out.targets.end(), {float(b), float(box.cls), float(box.cx * sx + ox),
                                             float(box.cy * sy + oy), float(box.w * sx), float(box.h * sy)});
    }
    out.entries.push_back(&e);
    out.geometry.push_back(g);
  }
  out.images.resize(size_t(3 * plane) * out.entries.size());
  return {};
}

}  // namespace

Result<eval::EvalResult> Validator::Run(model::YoloImpl& model, DetectionLoss* loss,
                                        const std::function<void(int64_t done, int64_t total)>& on_progress) {
  last_loss_ = {0, 0, 0};
  bad_images_ = 0;
  last_samples_.clear();
  last_grids_.clear();
  // Batches follow the aspect-ratio plan, not manifest order: collect the
  // sample entries (the first samples_ val entries) by identity, sort after.
  const auto samples_end =
      entries_.begin() + static_cast<ptrdiff_t>(std::min(entries_.size(), static_cast<size_t>(samples_)));
  const auto sample_rank = [&](const data::ManifestEntry* e) {
    return std::find(entries_.begin(), samples_end, e) - entries_.begin();  // == K: not a sample
  };
  const int64_t total = NumImages();
  int64_t done = 0;
  int64_t loss_batches = 0;
  eval::EvalOptions eo;
  eo.num_classes = model.NumClasses();
  if (static_cast<int>(names_.size()) == eo.num_classes) eo.class_names = names_;
  eval::DetectionEvaluator evaluator(eo);
  KESTREL_RETURN_IF_ERROR(evaluator.OptionsStatus());
  eval::NmsOptions nms;
  nms.conf = static_cast<float>(eo.conf);
  nms.iou = static_cast<float>(eo.iou);
  nms.max_det = eo.max_det;
  nms.multi_label = true;
  const int64_t max_bad = static_cast<int64_t>(max_bad_fraction_ * static_cast<double>(total));

  const bool was_training = model.is_training();
  model.eval();
  if (on_progress) on_progress(0, total);
  Status status;
  try {
    torch::NoGradGuard no_grad;
    ValBatch batch;
    int batch_index = 0;
    for (const eval::ValBatchShape& shape : plan_) {
      batch = ValBatch{};
      status = BuildValBatch(shape, entries_, source_, imgsz_, batch, bad_images_);
      if (status.IsOk() && bad_images_ > max_bad) {
        status = Status::FailedPrecondition("data: " + std::to_string(bad_images_) +
                                            " val images could not be read (max_bad_fraction " +
                                            std::to_string(max_bad_fraction_) + ")")
                     .WithReason(FailureReason::kDatasetErrors);
      }
      if (!status.IsOk()) break;
      const int size = batch.Size();
      if (size > 0) {
        auto images =
            torch::from_blob(batch.images.data(), {size, 3, batch.height, batch.width}, torch::kFloat)
                .to(device_);
        auto out = model.forward(images);
        if (loss != nullptr) {
          const int64_t n = static_cast<int64_t>(batch.targets.size() / 6);
          auto targets = n > 0 ? torch::from_blob(batch.targets.data(), {n, 6}, torch::kFloat).to(device_)
                               : torch::zeros({0, 6}, torch::TensorOptions().device(device_));
          DetectionTargets t{targets.select(1, 0), targets.select(1, 1), targets.slice(1, 2, 6)};
          auto l = loss->Compute(out.maps, t, ImageSize{batch.height, batch.width});
          if (!l.IsOk()) {
            status = l.GetStatus();
            break;
          }
          auto items = l->items.to(torch::kCPU, torch::kDouble);
          for (int k = 0; k < 3; ++k) last_loss_[k] += items[k].item<double>();
          ++loss_batches;
        }
        // [B, 4+nc, A] on the CPU, contiguous, for the torch-free postprocess.
        auto decoded = out.decoded.to(torch::kCPU, torch::kFloat).contiguous();
        const int nc = model.NumClasses();
        const int anchors = static_cast<int>(decoded.size(2));
        const float* base = decoded.data_ptr<float>();
        std::vector<SampleImage>* grid = nullptr;
        if (batch_index < grid_batches_) grid = &last_grids_.emplace_back();
        for (int i = 0; i < size && status.IsOk(); ++i) {
          const data::ManifestEntry& e = *batch.entries[size_t(i)];
          const eval::ValGeometry& g = batch.geometry[size_t(i)];
          auto dets =
              eval::PostprocessYolo(base + static_cast<int64_t>(i) * (4 + nc) * anchors, nc, anchors, nms);
          eval::ScaleToOriginal(dets, g.letterbox, e.width, e.height);
          if (entries_.begin() + sample_rank(&e) != samples_end) {
            SampleImage sample;
            sample.entry = &e;
            for (const auto& d : dets) {
              if (d.score >= kSampleConf) sample.detections.push_back(d);
            }
            last_samples_.push_back(std::move(sample));
          }
          if (grid != nullptr && grid->size() < kGridImages) {
            SampleImage& tile = grid->emplace_back();
            tile.entry = &e;
            for (const auto& d : dets) {
              if (d.score >= kSampleConf) tile.detections.push_back(d);
            }
          }
          std::vector<eval::GroundTruth> gt;
          gt.reserve(e.boxes.size());
          for (const auto& b : e.boxes) {
            const eval::Box px =
                eval::BoxFromCxCyWh(b.cx * e.width, b.cy * e.height, b.w * e.width, b.h * e.height);
            gt.push_back(
                {std::getenv("KESTREL_VAL_NO_RT") ? px : eval::ValLabelRoundTrip(px, g, e.width, e.height),
                 b.cls});
          }
          status = evaluator.AddImage(gt, dets);
        }
        if (!status.IsOk()) break;
      }
      ++batch_index;
      done = std::min(total, done + static_cast<int64_t>(shape.images.size()));
      if (on_progress) on_progress(done, total);
    }
  } catch (const c10::Error& e) {
    status = Status::Internal(std::string("validation: torch error: ") + e.what_without_backtrace());
  }
  if (was_training) model.train();
  KESTREL_RETURN_IF_ERROR(status);
  std::sort(last_samples_.begin(), last_samples_.end(), [&](const SampleImage& a, const SampleImage& b) {
    return sample_rank(a.entry) < sample_rank(b.entry);
  });
  if (loss_batches > 0) {
    for (double& v : last_loss_) v /= static_cast<double>(loss_batches);
  }
  return evaluator.Finalize();
}

std::string FormatValidationTable(const eval::EvalResult& r, bool per_class) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%22s %8s %10s %9s %9s %9s %9s\n", "Class", "Images", "Instances", "P",
                "R", "mAP50", "mAP50-95");
  out += line;
  std::snprintf(line, sizeof line, "%22s %8lld %10lld %9.3f %9.3f %9.3f %9.3f\n", "all",
                static_cast<long long>(r.images), static_cast<long long>(r.instances), r.precision, r.recall,
                r.map50, r.map5095);
  out += line;
  if (!per_class) return out;
  for (const auto& c : r.classes) {
    std::string name = c.name.empty() ? std::to_string(c.class_id) : c.name;
    std::snprintf(line, sizeof line, "%22s %8lld %10lld %9.3f %9.3f %9.3f %9.3f\n", name.c_str(),
                  static_cast<long long>(c.images), static_cast<long long>(c.instances), c.precision,
                  c.recall, c.ap50, c.ap5095);
    out += line;
  }
  return out;
}

}  // namespace kestrel::train
