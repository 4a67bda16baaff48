#include "app/evaluate.h"

#include <utility>

#include "app/datasets.h"
#include "core/json.h"
#include "core/staged_dir.h"
#include "data/version_files.h"
#include "eval/plots.h"
#include "eval/split_coco.h"
#include "eval/val_batch.h"

namespace kestrel::app {

Result<LoadedSplit> LoadSplit(store::MetadataStore& meta, store::ArtifactStore& blobs,
                              const std::string& spec, const std::string& split_name,
                              const train::DataSubset* subset) {
  LoadedSplit out;
  KESTREL_ASSIGN_OR_RETURN(out.version, Datasets(meta, blobs).Show(spec));
  if (subset != nullptr) {
    KESTREL_ASSIGN_OR_RETURN(out.version.manifest, subset->Apply(out.version.manifest));
  }
  KESTREL_ASSIGN_OR_RETURN(data::Split split, data::ParseSplit(split_name));
  auto s = eval::LoadEvalSplit(out.version.manifest, split);
  if (!s.IsOk()) return s.GetStatus().WithContext(spec);
  out.split = std::move(s).Value();
  out.split.version = data::VersionName(out.version.record);
  return out;
}

Result<ValRun> WriteValRun(Env& env, store::ArtifactStore& blobs, const ValKeys& keys,
                           const LoadedSplit& loaded, const ScoredSplit& scored,
                           const std::string& dir_or_empty) {
  const eval::EvalSplit& split = loaded.split;
  const auto& rec = loaded.version.record;
  const eval::EvalProvenance prov{rec.dataset,        "v" + std::to_string(rec.seq),
                                  rec.version_id,     split.split,
                                  scored.source_kind, scored.source,
                                  scored.extra};
  ValRun out;
  out.result = scored.result;
  nlohmann::json& record = out.record;
  record = eval::EvalRecordJson(out.result, prov, env.UnixSeconds());
  if (!scored.speed.is_null()) record["speed"] = scored.speed;
  std::vector<std::pair<std::string, std::string>> files;  // name, bytes
  std::string coco_text;
  if (keys.coco_metrics) {
    KESTREL_ASSIGN_OR_RETURN(auto coco, eval::CocoEvaluateSplit(split, scored.per_image));
    record["coco"] = eval::CocoMetricsToJson(coco);
    coco_text =
        "COCO-style metrics (pycocotools bbox conventions; area = box area):\n" + eval::CocoSummaryText(coco);
  }
  if (keys.save_json) {
    KESTREL_ASSIGN_OR_RETURN(auto cj,
                             eval::SplitPredictionsCocoJson(split, scored.per_image, keys.image_ids));
    record["predictions_json"] = {{"file", "predictions.json"},
                                  {"image_ids", cj.image_ids},
                                  {"category_id", "class_id + 1"},
                                  {"detections", cj.detections}};
    files.emplace_back("predictions.json", std::move(cj.text));
  }
  if (keys.plots) {
    auto grids =
        eval::RenderValBatch(split, scored.per_image, [&blobs, &env, &split](const eval::SplitImage& im) {
          return data::ReadImageBytes(im.path, im.image_sha, im.file, split.version, blobs, env);
        });
    if (!grids.IsOk()) return grids.GetStatus().WithContext("val_batch0 grid");
    files.emplace_back("val_batch0_labels.jpg", std::move(grids->labels_jpg));
    files.emplace_back("val_batch0_pred.jpg", std::move(grids->pred_jpg));
  }
  out.dir = dir_or_empty.empty() ? eval::NextRunDir(env, keys.project, keys.name, "val", keys.exist_ok)
                                 : dir_or_empty;
  {
    // Built beside the run folder and moved in when complete (result.json
    // last): a failure halfway leaves no folder that looks like a result.
    KESTREL_ASSIGN_OR_RETURN(StagedDir staged, StagedDir::Create(env, out.dir));
    if (keys.plots) KESTREL_RETURN_IF_ERROR(eval::WritePlots(env, staged.Path(), out.result));
    for (const auto& [name, bytes] : files) {
      KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(staged.Path(), name), bytes));
    }
    const std::string text = DumpJson(record, 1);
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(staged.Path(), "result.json"), text));
    KESTREL_RETURN_IF_ERROR(staged.Commit({"result.json"}));
    KESTREL_ASSIGN_OR_RETURN(out.record_sha, blobs.Put(text));
    out.record_path = blobs.PathFor(out.record_sha);
  }
  out.text = rec.dataset + "@v" + std::to_string(rec.seq) + " split " + split.split + " (" +
             std::to_string(split.images.size()) + " images), " + prov.source_kind + " " + prov.source +
             "\n" + eval::EvalSummaryText(out.result) + coco_text + scored.speed_text + "results saved to " +
             out.dir + "\n";
  if (keys.save_json) {
    out.predictions_path = JoinPath(out.dir, "predictions.json");
    out.text += "predictions saved to " + out.predictions_path +
                " (COCO results, image_ids=" + record["predictions_json"]["image_ids"].get<std::string>() +
                ")\n";
  }
  out.text += "result record " + out.record_sha + " (" + out.record_path + ")\n";
  return out;
}

Result<ValRun> EvaluatePredictions(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                                   const ValKeys& keys, const std::string& dir_or_empty) {
  // single_cls after reading: the files name the dataset's classes.
  train::DataSubset labels = keys.subset;
  labels.single_cls = false;
  KESTREL_ASSIGN_OR_RETURN(LoadedSplit loaded, LoadSplit(meta, blobs, keys.data, keys.split, &labels));
  eval::PredictionReadOptions ro;
  ro.image_ids = keys.image_ids;
  KESTREL_ASSIGN_OR_RETURN(auto preds, eval::ReadSplitPredictions(env, keys.predictions, loaded.split, ro));
  ScoredSplit scored;
  scored.per_image = std::move(preds.per_image);
  if (keys.subset.single_cls) {  // the reference validator's pred[:, 5] = 0, its labels one class
    for (auto& dets : scored.per_image) {
      for (auto& d : dets) d.class_id = 0;
    }
    for (auto& im : loaded.split.images) {
      for (auto& gt : im.labels) gt.class_id = 0;
    }
    loaded.split.names = {"item"};
  }
  const eval::EvalSplit& split = loaded.split;
  eval::EvalOptions eo;
  eo.conf = keys.conf;
  eo.iou = keys.iou;
  eo.max_det = keys.max_det;
  KESTREL_ASSIGN_OR_RETURN(scored.result, eval::EvaluateSplit(split, scored.per_image, eo));
  scored.source_kind = "predictions";
  scored.source = keys.predictions;
  scored.extra = {{"format", preds.format}};
  if (!preds.image_ids.empty()) scored.extra["image_ids"] = preds.image_ids;
  return WriteValRun(env, blobs, keys, loaded, scored, dir_or_empty);
}

nlohmann::json ValRunJson(const ValRun& run) {
  nlohmann::json j = {{"ok", true},
                      {"dir", run.dir},
                      {"record_sha", run.record_sha},
                      {"record_path", run.record_path},
                      {"result", run.record}};
  if (!run.predictions_path.empty()) j["predictions_json"] = run.predictions_path;
  return j;
}

}  // namespace kestrel::app
