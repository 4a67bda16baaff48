#include "eval/dataset_eval.h"

#include <cstdio>
#include <map>
#include <set>

#include "eval/prediction_io.h"

namespace kestrel::eval {

Result<EvalSplit> LoadEvalSplit(const data::Manifest& m, data::Split split) {
  EvalSplit out;
  out.names = m.names;
  out.split = data::SplitName(split);
  std::map<std::string, int64_t> per_split;
  for (const auto& e : m.entries) {
    ++per_split[data::SplitName(e.split)];
    if (e.split != split) continue;
    SplitImage img;
    img.path = e.path;
    img.stem = Stem(e.path);
    img.image_sha = e.image_sha;
    img.file = e.file;
    img.width = e.width;
    img.height = e.height;
    img.export_id = static_cast<int64_t>(out.images.size()) + 1;
    img.labels.reserve(e.boxes.size());
    for (const auto& b : e.boxes) {
      img.labels.push_back(
          GroundTruth{BoxFromCxCyWh(b.cx * e.width, b.cy * e.height, b.w * e.width, b.h * e.height), b.cls});
    }
    out.images.push_back(std::move(img));
  }
  if (out.images.empty()) {
    std::string have;
    for (const auto& [name, n] : per_split) {
      have += (have.empty() ? "" : ", ") + name + " " + std::to_string(n);
    }
    return Status::FailedPrecondition("split '" + out.split + "' has no images (the version has: " +
                                          (have.empty() ? std::string("no images at all") : have) + ")",
                                      {"", 0, "split"});
  }
  return out;
}

int64_t NumericStem(const std::string& stem) {
  if (stem.empty() || stem.size() > 18) return -1;
  int64_t v = 0;
  for (char c : stem) {
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

namespace {

Result<SplitPredictions> ReadYoloDir(Env& env, const std::string& dir, const EvalSplit& split) {
  std::map<std::string, ImageSize> sizes;
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < split.images.size(); ++i) {
    const SplitImage& img = split.images[i];
    if (!index.emplace(img.stem, i).second) {
      return Status::InvalidArgument(
          "two images of split '" + split.split + "' share the stem '" + img.stem + "' (" +
              split.images[index[img.stem]].path + ", " + img.path +
              "): YOLO txt predictions cannot tell them apart; use a COCO results JSON",
          {dir, 0, ""});
    }
    sizes[img.stem] = ImageSize{img.width, img.height};
  }
  auto read = ReadYoloPredictionDir(env, dir, sizes, static_cast<int>(split.names.size()));
  if (!read.IsOk()) {
    const Status& s = read.GetStatus();
    if (s.Code() == StatusCode::kNotFound && !s.Where().file.empty() && s.Where().file != dir) {
      return Status::NotFound("prediction file names no image of split '" + split.split + "'", s.Where());
    }
    return s;
  }
  SplitPredictions out;
  out.format = "yolo_txt";
  out.per_image.resize(split.images.size());
  for (auto& [stem, dets] : *read) out.per_image[index.at(stem)] = std::move(dets);
  return out;
}

Result<SplitPredictions> ReadCocoJson(Env& env, const std::string& path, const EvalSplit& split,
                                      const PredictionReadOptions& opts) {
  std::string mode = opts.image_ids;
  if (mode != "auto" && mode != "stem" && mode != "export") {
    return Status::InvalidArgument("image_ids must be auto, stem or export, got '" + mode + "'",
                                   {"command line", 0, "image_ids"});
  }
  std::map<int64_t, size_t> by_stem;
  bool stems_ok = true;
  for (size_t i = 0; i < split.images.size(); ++i) {
    const int64_t id = NumericStem(split.images[i].stem);
    if (id < 0 || !by_stem.emplace(id, i).second) stems_ok = false;
  }
  if (mode == "auto") mode = stems_ok ? "stem" : "export";
  if (mode == "stem" && !stems_ok) {
    return Status::InvalidArgument(
        "image_ids=stem needs every image stem of split '" + split.split + "' to be a distinct integer",
        {"command line", 0, "image_ids"});
  }
  std::vector<int> category_ids(split.names.size());
  for (size_t c = 0; c < category_ids.size(); ++c) category_ids[c] = static_cast<int>(c) + 1;
  KESTREL_ASSIGN_OR_RETURN(auto read,
                           ReadCocoResults(env, path, category_ids, static_cast<int>(split.names.size())));
  SplitPredictions out;
  out.format = "coco_json";
  out.image_ids = mode;
  out.per_image.resize(split.images.size());
  for (auto& [image_id, dets] : read) {
    size_t i = 0;
    if (mode == "stem") {
      auto it = by_stem.find(image_id);
      if (it == by_stem.end()) {
        return Status::NotFound("image_id " + std::to_string(image_id) + " is no image stem of split '" +
                                    split.split + "' (image_ids=stem)",
                                {path, 0, "image_id"});
      }
      i = it->second;
    } else {
      if (image_id < 1 || image_id > static_cast<int64_t>(split.images.size())) {
        return Status::NotFound("image_id " + std::to_string(image_id) + " is outside 1.." +
                                    std::to_string(split.images.size()) + " (image_ids=export, split '" +
                                    split.split + "')",
                                {path, 0, "image_id"});
      }
      i = static_cast<size_t>(image_id - 1);
    }
    out.per_image[i] = std::move(dets);
  }
  return out;
}

}  // namespace

Result<SplitPredictions> ReadSplitPredictions(Env& env, const std::string& path, const EvalSplit& split,
                                              const PredictionReadOptions& opts) {
  const FileInfo info = env.Stat(path);
  if (!info.exists) return Status::NotFound("predictions not found", {path, 0, "predictions"});
  if (info.is_dir) return ReadYoloDir(env, path, split);
  if (Extension(path) == "json") return ReadCocoJson(env, path, split, opts);
  return Status::InvalidArgument(
      "predictions must be a folder of YOLO txt files or a COCO results .json file",
      {path, 0, "predictions"});
}

EvalSplit ValScoredSplit(const EvalSplit& split, const ValShapeOptions& shapes) {
  EvalSplit out = split;
  std::vector<ImageSize> sizes;
  sizes.reserve(split.images.size());
  for (const SplitImage& im : split.images) sizes.push_back({im.width, im.height});
  for (const ValBatchShape& b : PlanValBatches(sizes, shapes)) {
    for (size_t i : b.images) {
      SplitImage& im = out.images[i];
      if (im.width <= 0 || im.height <= 0) continue;
      const ValGeometry g = ComputeValGeometry(im.width, im.height, shapes.imgsz, b.width, b.height);
      for (GroundTruth& gt : im.labels) gt.box = ValLabelRoundTrip(gt.box, g, im.width, im.height);
    }
  }
  return out;
}

Result<EvalResult> EvaluateSplit(const EvalSplit& split, const std::vector<std::vector<Detection>>& per_image,
                                 EvalOptions opts) {
  const int nc = static_cast<int>(split.names.size());
  if (opts.num_classes != 0 && opts.num_classes != nc) {
    return Status::InvalidArgument("class count mismatch: predictions/model have " +
                                       std::to_string(opts.num_classes) + " classes, the dataset has " +
                                       std::to_string(nc),
                                   {"", 0, "nc"});
  }
  opts.num_classes = nc;
  if (opts.class_names.empty()) opts.class_names = split.names;
  if (per_image.size() != split.images.size()) {
    return Status::Internal("predictions for " + std::to_string(per_image.size()) + " images, split has " +
                            std::to_string(split.images.size()));
  }
  DetectionEvaluator ev(opts);
  KESTREL_RETURN_IF_ERROR(ev.OptionsStatus());
  for (size_t i = 0; i < split.images.size(); ++i) {
    Status s = ev.AddImage(split.images[i].labels, per_image[i]);
    if (!s.IsOk()) return s.WithContext("image " + split.images[i].path);
  }
  return ev.Finalize();
}

std::string EvalSummaryText(const EvalResult& r) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%22s %11s %11s %11s %11s %11s %11s\n", "Class", "Images", "Instances", "P",
                "R", "mAP50", "mAP50-95");
  out += buf;
  std::snprintf(buf, sizeof(buf), "%22s %11lld %11lld %11.3f %11.3f %11.3f %11.3f\n", "all",
                static_cast<long long>(r.images), static_cast<long long>(r.instances), r.precision, r.recall,
                r.map50, r.map5095);
  out += buf;
  for (const ClassMetrics& c : r.classes) {
    std::snprintf(buf, sizeof(buf), "%22s %11lld %11lld %11.3f %11.3f %11.3f %11.3f\n",
                  c.name.substr(0, 22).c_str(), static_cast<long long>(c.images),
                  static_cast<long long>(c.instances), c.precision, c.recall, c.ap50, c.ap5095);
    out += buf;
  }
  std::snprintf(
      buf, sizeof(buf),
      "best F1 %.3f at confidence %.3f; fitness %.5f (0.1 mAP50 + 0.9 mAP50-95)\n"
      "settings: conf %g, iou %g, max_det %d; %lld predictions scored, %lld dropped by conf/max_det\n",
      r.best_f1, r.best_conf, r.fitness, r.settings.conf, r.settings.iou, r.settings.max_det,
      static_cast<long long>(r.predictions), static_cast<long long>(r.predictions_dropped));
  out += buf;
  const ErrorCounts t = r.errors.Total();
  const ErrorAnalysisOptions& eo = r.errors.Options();
  std::snprintf(buf, sizeof(buf),
                "errors (conf > %g, IoU fg %g / bg %g): TP %lld; FP: localization %lld, classification %lld, "
                "both %lld, duplicate %lld, background %lld; FN: missed %lld\n",
                eo.conf, eo.fg_iou, eo.bg_iou, static_cast<long long>(t.true_positive),
                static_cast<long long>(t.localization), static_cast<long long>(t.classification),
                static_cast<long long>(t.both), static_cast<long long>(t.duplicate),
                static_cast<long long>(t.background), static_cast<long long>(t.missed));
  out += buf;
  return out;
}

nlohmann::json EvalRecordJson(const EvalResult& r, const EvalProvenance& p, int64_t created_at) {
  nlohmann::json metrics = EvalResultToJson(r);
  // The mean curves the plots draw, 101 points (additive: format_version 1).
  if (!r.curves.x.empty()) metrics["curves"] = MeanCurvesJson(MeanCurvesOf(r, kRecordCurvePoints));
  nlohmann::json settings = metrics.contains("settings") ? metrics["settings"] : nlohmann::json::object();
  return {{"kind", "kestrel.eval_result"},
          {"format_version", 1},
          {"created_at", created_at},
          {"provenance",
           {{"dataset", p.dataset},
            {"version", p.version},
            {"version_id", p.version_id},
            {"split", p.split},
            {"source_kind", p.source_kind},
            {"source", p.source},
            {"extra", p.extra}}},
          {"settings", settings},
          {"metrics", metrics}};
}

std::string NextRunDir(Env& env, const std::string& project, const std::string& name,
                       const std::string& default_name, bool exist_ok) {
  const std::string base = name.empty() ? default_name : name;
  std::string dir = JoinPath(project, base);
  if (exist_ok) return dir;
  for (int n = 2; env.Stat(dir).exists; ++n) dir = JoinPath(project, base + std::to_string(n));
  return dir;
}

}  // namespace kestrel::eval
