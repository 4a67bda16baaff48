#include "train/train_config.h"

#include <algorithm>
#include <filesystem>

#include "core/safetensors.h"
#include "core/utf8.h"
#include "model/pt_checkpoint.h"
#include "model/spec.h"

namespace kestrel::train {

void BindInferenceKeys(OptionSet& s, double* conf, double* iou, int* imgsz, int* max_det, int* batch) {
  // conf < 1: scores are kept when strictly greater than conf.
  s.Float("conf", conf, "minimum confidence of kept predictions", Range::ClosedOpen(0, 1));
  s.Float("iou", iou, "NMS IoU: a box overlapping a kept one by more is suppressed", Range::Closed(0, 1));
  // 0 is "not given" (the default of val, predict, compare): the size the
  // weights were trained at (app/imgsz.h); the inference options reject
  // any other value that is not a multiple of 32.
  s.Int("imgsz", imgsz,
        "network input side in pixels, a multiple of 32; 0 (default): the size the weights were trained at "
        "(640 when they record none)",
        0, kMaxImgsz);
  s.Int("max_det", max_det, "at most this many predictions per image", 1, 100000);
  if (batch != nullptr) s.Int("batch", batch, "images per forward", 1, 1024);
}

void BindRunFolderKeys(OptionSet& s, std::string* project, std::string* name, bool* exist_ok) {
  s.String("project", project, "parent folder of the run folders");
  s.String("name", name, "run folder name (project/name; taken: name2, name3, ...)");
  s.Bool("exist_ok", exist_ok, "reuse project/name instead of creating name2, name3, ...");
}

void TrainConfig::Bind(OptionSet& s) {
  s.String("data", &data, "dataset in the registry: NAME, NAME@vN or NAME@<version id prefix>");
  s.String("model", &model,
           "model: a YOLOv8 scale n|s|m|l|x|t, a name or yaml (yolov8s, yolo11n, yolov5su.yaml, ...) or a "
           "weights file");
  s.Int("epochs", &epochs, "total training epochs", 1, 100000);
  s.Float("time", &time,
          "hours to train (0 = off): the run stops with a checkpoint when they are spent, and after each "
          "epoch epochs becomes ceil(time / mean epoch time) with the LR schedule stretched to it (the "
          "reference's time=)",
          Range::AtLeast(0));
  s.String("device", &device, "cpu, cuda, cuda:N or a CUDA device index N (0 = cuda:0)");
  s.Bool("amp", &amp, "mixed precision on CUDA (bf16 autocast); ignored on the CPU");
  s.Int("seed", &seed, "random seed (weights init and data order/augmentation)");
  s.Bool("deterministic", &deterministic, "use deterministic torch algorithms");
  s.Int("patience", &patience, "epochs without fitness improvement before early stopping (0 = off)", 0,
        1000000);
  s.Float("save_period_min", &save_period_min, "also checkpoint mid-epoch every N minutes (0 = off)", 0, 1e9);
  s.Int("save_period", &save_period, "also keep weights/epochN.ckpt every N epochs (0 or -1 = off)", -1,
        100000);
  s.Int("keep_ckpts", &keep_ckpts,
        "epoch checkpoints a succeeded job keeps, newest first (best/last always stay)", 0, 100000);
  s.String("pretrained", &pretrained,
           "weights to start from (.safetensors, .pt; class count may differ); true: as unset (model=*.pt "
           "loads its weights), false: model=*.pt's architecture from scratch");
  s.String(
      "resume", &resume,
      "checkpoint to continue exactly (runs/detect/NAME/weights/last.ckpt); true or a bare `resume`: the "
      "newest last.ckpt under project");
  s.Int("threads", &threads,
        "torch intra-op threads (0 = the cores this process may use: affinity, cgroup quota)", 0, 4096);
  s.String("freeze", &freeze, "freeze the first N model layers (N), or the layers listed ([0,1,2] or 0,1,2)");
  BindRunFolderKeys(s, &project, &name, &exist_ok);
  s.String("run_dir", &run_dir, "explicit run directory (overrides project/name)");
  s.Bool("val", &val, "validate every epoch");
  s.Bool("plots", &plots, "write evaluation plots and train_batch0.jpg");
  s.Bool("save_pt", &save_pt,
         "also write weights/best.pt and last.pt in the reference framework's checkpoint layout "
         "(YOLO(\"best.pt\") "
         "loads them)");
  s.Int("val_samples", &val_samples,
        "first N val images whose predictions each epoch writes to samples/epoch-E.json (0 = off)", 0, 64);
  loader.Bind(s, kMinImgsz, kMaxImgsz, /*auto_batch=*/true, /*auto_workers=*/true);
  s.Choice("cache", &loader.cache, {"false", "true", "ram", "disk"},
           "keep train images decoded and resized to imgsz: ram (or true) in memory after the first read, "
           "disk in <home>/cache/decoded (reused by later runs, safe to delete); false decodes every read");
  augment.Bind(s);
  optimizer.Bind(s);
  BindLossKeys(s, &box, &cls, &dfl);
  BindLabelSmoothingKey(s, &label_smoothing);
  subset.Bind(s, /*train=*/true);
  no_effect.Bind(s);
}

bool IsBoolText(const std::string& text, bool* value) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t != "true" && t != "false") return false;
  if (value != nullptr) *value = t == "true";
  return true;
}

Result<std::vector<int>> TrainConfig::FrozenLayers() const {
  constexpr int kLayers = 23;  // model.0 .. model.22 of the YOLOv8/YOLO11 detectors
  const bool list = freeze.find(',') != std::string::npos || freeze.find('[') != std::string::npos;
  KESTREL_ASSIGN_OR_RETURN(std::vector<int> v,
                           ParseIndexList(freeze, "freeze", list ? kLayers - 1 : kLayers));
  if (list) return v;
  std::vector<int> first;
  for (int i = 0; i < (v.empty() ? 0 : v[0]); ++i) first.push_back(i);
  return first;
}

std::string TrainConfig::PretrainedWeights(const std::string& model_weights) const {
  bool flag = true;
  if (pretrained.empty() || IsBoolText(pretrained, &flag)) return flag ? model_weights : "";
  return pretrained;
}

std::vector<std::string> TrainConfig::Warnings() const {
  std::vector<std::string> out = no_effect.Warnings();
  if (std::string w = LabelSmoothingWarning(label_smoothing); !w.empty()) out.push_back(std::move(w));
  return out;
}

Result<std::string> ResolveResume(const std::string& resume, const std::string& project) {
  bool flag = false;
  if (!IsBoolText(resume, &flag)) return resume;
  if (!flag) return std::string();
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string best;
  fs::file_time_type best_time;
  for (fs::recursive_directory_iterator it(project, fs::directory_options::skip_permission_denied, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->path().filename() != "last.ckpt" || it->path().parent_path().filename() != "weights") continue;
    if (!it->is_regular_file(ec)) continue;
    const auto t = it->last_write_time(ec);
    if (ec) continue;
    if (best.empty() || t > best_time) {
      best = it->path().string();
      best_time = t;
    }
  }
  if (best.empty()) {
    return Status::NotFound("resume=" + resume + ": no weights/last.ckpt under project=" + project +
                                " to resume (name the checkpoint: resume=PATH/weights/last.ckpt)",
                            {"", 0, "resume"});
  }
  return best;
}

Status TrainConfig::Validate() const {
  for (auto [key, text] : {std::pair<const char*, const std::string*>{"data", &data},
                           {"model", &model},
                           {"device", &device},
                           {"pretrained", &pretrained},
                           {"resume", &resume},
                           {"project", &project},
                           {"name", &name},
                           {"run_dir", &run_dir},
                           {"freeze", &freeze},
                           {"classes", &subset.classes}}) {
    const size_t bad = FirstInvalidUtf8(*text);
    if (bad != std::string::npos) {
      return Status::InvalidArgument(
          "'" + EscapeInvalidUtf8(*text) + "' is not valid UTF-8 (byte " + std::to_string(bad) + ")",
          {"", 0, key});
    }
  }
  if (data.empty() && resume.empty()) {
    return Status::InvalidArgument("data= is required (a registry dataset name)", {"", 0, "data"});
  }
  if (auto d = ParseDeviceSpec(device); !d.IsOk()) return d.GetStatus();
  if (loader.batch != kAutoBatch && loader.batch < 1) {
    return Status::InvalidArgument(
        "batch=" + std::to_string(loader.batch) + ": must be >= 1, or -1 for the automatic batch size",
        {"", 0, "batch"});
  }
  KESTREL_RETURN_IF_ERROR(FrozenLayers().GetStatus());
  KESTREL_RETURN_IF_ERROR(subset.Validate());
  if (IsBoolText(resume)) {
    return Status::InvalidArgument("resume=" + resume +
                                       ": not resolved to a checkpoint (train::ResolveResume: the newest "
                                       "last.ckpt under project)",
                                   {"", 0, "resume"});
  }
  if (model::IsWeightsPath(model)) {
    // model=yolov8n.pt: architecture and pretrained weights from that file
    // (read in ValidateFiles); a second weights file would be ambiguous.
    if (!pretrained.empty() && pretrained != model && !IsBoolText(pretrained)) {
      return Status::InvalidArgument(
          "model=" + EscapeInvalidUtf8(model) +
              " already loads its weights; drop pretrained= or use model=<scale> pretrained=" +
              EscapeInvalidUtf8(pretrained),
          {"", 0, "pretrained"});
    }
  } else if (auto spec = model::ParseModelSpec(model, 1); !spec.IsOk()) {
    return spec.GetStatus();
  }
  // Every bound range (incl. imgsz within [kMinImgsz, kMaxImgsz]), then the
  // components' rules between fields (imgsz a multiple of the stride).
  TrainConfig copy = *this;
  copy.optimizer = OptimizerOptions();  // checked below, where any case of the name is accepted
  KESTREL_RETURN_IF_ERROR(CheckBoundValues(copy));
  KESTREL_RETURN_IF_ERROR(optimizer.Validate());
  data::LoaderOptions sized = loader;
  if (sized.batch == kAutoBatch) sized.batch = 1;  // the loader's own rules, with any concrete batch
  sized.shuffle = !sized.rect;                     // as the trainer sets it: rect batches are never shuffled
  KESTREL_RETURN_IF_ERROR(sized.Validate());
  return {};
}

Status TrainConfig::ValidateFiles() const {
  if (model::IsWeightsPath(model)) {
    auto info = model::ReadWeightsInfo(model);
    if (info.GetStatus().Code() == StatusCode::kNotFound) {
      // model=yolo11n.pt as the reference framework takes it: it would
      // download the file; Kestrel has no network and never tries.
      return Status::InvalidArgument(model::MissingWeightsError(model).Message(), {"", 0, "model"});
    }
    if (!info.IsOk()) {
      return Status::InvalidArgument("model=" + EscapeInvalidUtf8(model) + ": " + info.GetStatus().Message(),
                                     {"", 0, "model"});
    }
  }
  if (!pretrained.empty() && pretrained != model && !IsBoolText(pretrained)) {
    Status h = model::FileLooksLikeZip(pretrained) ? model::ReadWeightsInfo(pretrained).GetStatus()
                                                   : ReadSafeTensorsHeader(pretrained).GetStatus();
    if (!h.IsOk()) {
      const Status& e = h;
      const std::string why = e.Code() == StatusCode::kCorruption && !model::FileLooksLikeZip(pretrained)
                                  ? "not a safetensors weights file (" + e.Message() + ")"
                                  : e.Message();
      return Status::InvalidArgument("pretrained=" + EscapeInvalidUtf8(pretrained) + ": " + why,
                                     {"", 0, "pretrained"});
    }
  }
  if (!resume.empty()) {
    auto h = ReadSafeTensorsHeader(resume);
    if (!h.IsOk()) {
      const Status& e = h.GetStatus();
      const std::string why = e.Code() == StatusCode::kCorruption
                                  ? "not a Kestrel checkpoint (" + e.Message() + ")"
                                  : e.Message();
      return Status::InvalidArgument("resume=" + EscapeInvalidUtf8(resume) + ": " + why, {"", 0, "resume"});
    }
    auto f = h->metadata.find("format");
    if (f == h->metadata.end() || f->second != kCheckpointFormat) {
      return Status::InvalidArgument(
          "resume=" + EscapeInvalidUtf8(resume) +
              ": not a Kestrel training checkpoint (weights files go to pretrained=)",
          {"", 0, "resume"});
    }
  }
  return {};
}

}  // namespace kestrel::train
