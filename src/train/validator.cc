#include "train/validator.h"

#include <torch/utils.h>

#include <algorithm>
#include <cstdio>

#include "eval/postprocess.h"

namespace kestrel::train {

Result<std::unique_ptr<Validator>> Validator::Create(const data::Manifest& manifest, data::ImageSource source,
                                                     data::LoaderOptions loader,
                                                     const std::vector<std::string>& names, torch::Device device) {
  loader.augment = false;
  loader.shuffle = false;
  loader.drop_last = false;
  loader.rect = false;  // square letterbox: one input size for every batch
  std::unique_ptr<Validator> v(new Validator());
  KESTREL_ASSIGN_OR_RETURN(v->loader_, data::Loader::Create(manifest, data::Split::kVal, std::move(source), loader));
  for (const auto& e : manifest.entries) {
    if (e.split == data::Split::kVal) v->by_path_[e.path] = &e;
  }
  v->manifest_ = &manifest;
  v->names_ = names;
  v->device_ = device;
  return v;
}

int64_t Validator::NumImages() const { return loader_->NumSamples(); }

Result<eval::EvalResult> Validator::Run(model::YoloImpl& model, DetectionLoss* loss,
                                        const std::function<void(int64_t done, int64_t total)>& on_progress) {
  last_loss_ = {0, 0, 0};
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

  const bool was_training = model.is_training();
  model.eval();
  KESTREL_RETURN_IF_ERROR(loader_->StartEpoch(0));
  if (on_progress) on_progress(0, total);
  Status status;
  try {
    torch::NoGradGuard no_grad;
    for (;;) {
      auto next = loader_->Next();
      if (!next.IsOk()) {
        status = next.GetStatus();
        break;
      }
      if (!next->has_value()) break;
      data::Batch batch = std::move(**next);
      auto images = torch::from_blob(batch.images.data(), {batch.size, 3, batch.height, batch.width}, torch::kFloat)
                        .to(device_);
      auto out = model.forward(images);
      if (loss != nullptr) {
        const int64_t n = batch.NumTargets();
        auto targets = n > 0 ? torch::from_blob(batch.targets.data(), {n, 6}, torch::kFloat).to(device_)
                             : torch::zeros({0, 6}, torch::TensorOptions().device(device_));
        DetectionTargets t{targets.select(1, 0), targets.select(1, 1), targets.slice(1, 2, 6)};
        auto l = loss->Compute(out.maps, t, ImageSize{batch.height, batch.width});
        if (!l.IsOk()) {
          status = l.GetStatus();
          loader_->Recycle(std::move(batch));
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
      for (int i = 0; i < batch.size && status.IsOk(); ++i) {
        auto dets = eval::PostprocessYolo(base + static_cast<int64_t>(i) * (4 + nc) * anchors, nc, anchors, nms);
        const auto& lb = batch.letterbox[i];
        const int oh = batch.orig_hw[i][0], ow = batch.orig_hw[i][1];
        eval::ScaleToOriginal(dets, eval::Letterbox{lb[0], lb[1], lb[2]}, ow, oh);
        std::vector<eval::GroundTruth> gt;
        auto it = by_path_.find(batch.paths[i]);
        if (it != by_path_.end()) {
          const auto& e = *it->second;
          for (const auto& b : e.boxes) {
            gt.push_back({eval::BoxFromCxCyWh(b.cx * e.width, b.cy * e.height, b.w * e.width, b.h * e.height), b.cls});
          }
        }
        status = evaluator.AddImage(gt, dets);
      }
      const int size = batch.size;
      loader_->Recycle(std::move(batch));
      if (!status.IsOk()) break;
      // Bad samples are replaced by good ones, so the batch sizes add up to
      // the split; min() only guards the contract.
      done = std::min(total, done + size);
      if (on_progress) on_progress(done, total);
    }
  } catch (const c10::Error& e) {
    status = Status::Internal(std::string("validation: torch error: ") + e.what_without_backtrace());
  }
  if (was_training) model.train();
  KESTREL_RETURN_IF_ERROR(status);
  if (loss_batches > 0) {
    for (double& v : last_loss_) v /= static_cast<double>(loss_batches);
  }
  return evaluator.Finalize();
}

std::string FormatValidationTable(const eval::EvalResult& r) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%22s %8s %10s %9s %9s %9s %9s\n", "Class", "Images", "Instances", "P", "R",
                "mAP50", "mAP50-95");
  out += line;
  std::snprintf(line, sizeof line, "%22s %8lld %10lld %9.3f %9.3f %9.3f %9.3f\n", "all",
                static_cast<long long>(r.images), static_cast<long long>(r.instances), r.precision, r.recall,
                r.map50, r.map5095);
  out += line;
  for (const auto& c : r.classes) {
    std::string name = c.name.empty() ? std::to_string(c.class_id) : c.name;
    std::snprintf(line, sizeof line, "%22s %8lld %10lld %9.3f %9.3f %9.3f %9.3f\n", name.c_str(),
                  static_cast<long long>(c.images), static_cast<long long>(c.instances), c.precision, c.recall,
                  c.ap50, c.ap5095);
    out += line;
  }
  return out;
}

}  // namespace kestrel::train
