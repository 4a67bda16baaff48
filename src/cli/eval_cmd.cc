// `kestrel val`, `kestrel predict`, `kestrel compare` (docs/evaluation.md).
// `val predictions=` is torch-free and always built; everything that runs a
// model needs KESTREL_CLI_WITH_TORCH (the cli target defines it when the
// model module is built).
#include <cstdio>
#include <iostream>

#include "cli/cli.h"
#include "train/train_config.h"
#include "core/json.h"
#include "core/staged_dir.h"
#include "data/registry.h"
#include "eval/dataset_eval.h"
#include "eval/plots.h"
#include "eval/split_coco.h"
#include "eval/val_batch.h"
#include "cli/eval_model.h"  // torch-free; LoadSplit (model functions only with LibTorch)

namespace kestrel::cli {

Result<LoadedSplit> LoadSplit(Stores& stores, const std::string& spec, const std::string& split_name) {
  data::Registry reg(*stores.meta, *stores.blobs);
  LoadedSplit out;
  KESTREL_ASSIGN_OR_RETURN(out.version, reg.Load(spec));
  KESTREL_ASSIGN_OR_RETURN(data::Split split, data::ParseSplit(split_name));
  auto s = eval::LoadEvalSplit(out.version.manifest, split);
  if (!s.IsOk()) return s.GetStatus().WithContext(spec);
  out.split = std::move(s).Value();
  return out;
}

namespace {

struct ValOptions {
  std::string predictions;  // folder of YOLO txt or COCO results JSON
  std::string model;        // weights (.safetensors)
  std::string data;         // NAME[@VERSION]
  std::string split = "val";
  double conf = 0.001;
  double iou = 0.7;
  int max_det = 300;
  int imgsz = 640;
  int batch = 16;
  bool rect = true;
  std::string image_ids = "auto";
  std::string project = "runs/val";
  std::string name;
  bool exist_ok = false;
  bool plots = true;
  bool save_json = false;
  bool coco_metrics = false;

  void Bind(OptionSet& s) {
    s.String("predictions", &predictions, "predictions to score: folder of YOLO txt files or COCO results JSON");
    s.String("model", &model, "weights file (.safetensors) to run on the split");
    s.String("data", &data, "dataset NAME or NAME@VERSION");
    s.Choice("split", &split, {"train", "val", "test"}, "split to evaluate");
    // iou, imgsz and batch apply to model=; iou is recorded for predictions=.
    train::BindInferenceKeys(s, &conf, &iou, &imgsz, &max_det, &batch);
    s.Bool("rect", &rect,
           "model=: batches by aspect ratio, each letterboxed to its own shape plus half a stride "
           "(the reference validator); false: every image letterboxed into imgsz x imgsz");
    s.Choice("image_ids", &image_ids, {"auto", "stem", "export"},
             "how COCO results image_id names images (read with predictions=, written with save_json=)");
    train::BindRunFolderKeys(s, &project, &name, &exist_ok);  // name "" = val, val2, ...
    s.Bool("plots", &plots, "write the PNG plots and the val_batch0 image grids into the run folder");
    s.Bool("save_json", &save_json, "write the scored predictions as COCO results JSON (predictions.json)");
    s.Bool("coco_metrics", &coco_metrics, "also compute COCO-style AP/AR (pycocotools conventions)");
  }
};

Status Usage(const std::string& msg, const std::string& field) {
  return Status::InvalidArgument(msg, {"command line", 0, field});
}

// Plots, the already rendered `files` (name, bytes) and result.json into the
// run folder, record into the store. Called only after everything was
// computed and rendered, so bad input writes nothing.
struct WrittenOutputs {
  std::string dir;
  std::string record_sha;
  std::string record_path;
};
Result<WrittenOutputs> WriteEvalOutputs(Stores& stores, const eval::EvalResult& r, const nlohmann::json& record,
                                        const std::string& dir, bool plots,
                                        const std::vector<std::pair<std::string, std::string>>& files) {
  Env& env = Env::Default();
  WrittenOutputs w;
  w.dir = dir;
  // Built beside the run folder and moved in when complete (result.json
  // last): a failure halfway leaves no folder that looks like a result.
  KESTREL_ASSIGN_OR_RETURN(StagedDir out, StagedDir::Create(env, dir));
  if (plots) KESTREL_RETURN_IF_ERROR(eval::WritePlots(env, out.Path(), r));
  for (const auto& [name, bytes] : files) {
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(out.Path(), name), bytes));
  }
  const std::string text = DumpJson(record, 1);
  KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(out.Path(), "result.json"), text));
  KESTREL_RETURN_IF_ERROR(out.Commit({"result.json"}));
  KESTREL_ASSIGN_OR_RETURN(w.record_sha, stores.blobs->Put(text));
  w.record_path = stores.blobs->PathFor(w.record_sha);
  return w;
}

void RunVal(Context& ctx, int* exit_code, ValOptions& o) {
  if (o.data.empty()) {
    *exit_code = Fail(ctx, Usage("data=NAME[@VERSION] is required", "data"));
    return;
  }
  if (o.predictions.empty() == o.model.empty()) {
    *exit_code = Fail(ctx, Usage("give exactly one of predictions=PATH or model=WEIGHTS", "predictions"));
    return;
  }
#ifndef KESTREL_CLI_WITH_TORCH
  if (!o.model.empty()) {
    *exit_code = Fail(ctx, Status::FailedPrecondition("this kestrel was built without LibTorch: val model= is "
                                                      "unavailable (val predictions= works)",
                                                      {"", 0, "model"}));
    return;
  }
#endif
  auto stores = OpenStores(ctx);
  if (!stores.IsOk()) {
    *exit_code = Fail(ctx, stores.GetStatus());
    return;
  }
  // data= may be a dataset path: imported (or its version reused) first.
  if (!ResolveDataOption(ctx, *stores, &o.data, nullptr, exit_code)) return;
  // model= may name a registered model (NAME@vN, NAME@TAG, id prefix).
  if (Status w = ResolveWeightsOption(ctx, &o.model); !w.IsOk()) {
    *exit_code = Fail(ctx, w);
    return;
  }
  auto loaded = LoadSplit(*stores, o.data, o.split);
  if (!loaded.IsOk()) {
    *exit_code = Fail(ctx, loaded.GetStatus());
    return;
  }
  const eval::EvalSplit& split = loaded->split;
  const auto& rec = loaded->version.record;
  eval::EvalProvenance prov{rec.dataset, "v" + std::to_string(rec.seq), rec.version_id, split.split, "", "", {}};
  std::string speed_text;
  nlohmann::json speed_json;
  eval::EvalOptions eo;
  eo.conf = o.conf;
  eo.iou = o.iou;
  eo.max_det = o.max_det;
  Result<eval::EvalResult> result = Status::Internal("not evaluated");
  std::vector<std::vector<eval::Detection>> per_image;  // what was scored, parallel to split.images
  if (!o.predictions.empty()) {
    eval::PredictionReadOptions ro;
    ro.image_ids = o.image_ids;
    auto preds = eval::ReadSplitPredictions(Env::Default(), o.predictions, split, ro);
    if (!preds.IsOk()) {
      *exit_code = Fail(ctx, preds.GetStatus());
      return;
    }
    per_image = std::move(preds->per_image);
    result = eval::EvaluateSplit(split, per_image, eo);
    prov.source_kind = "predictions";
    prov.source = o.predictions;
    prov.extra = {{"format", preds->format}};
    if (!preds->image_ids.empty()) prov.extra["image_ids"] = preds->image_ids;
  } else {
#ifdef KESTREL_CLI_WITH_TORCH
    ModelRunOptions mo{o.imgsz, o.batch, o.conf, o.iou, o.max_det};
    mo.rect = o.rect;
    auto scored = ScoreModelOnSplit(*stores->blobs, o.model, split, mo);
    if (!scored.IsOk()) {
      *exit_code = Fail(ctx, scored.GetStatus());
      return;
    }
    result = std::move(scored->result);
    per_image = std::move(scored->run.per_image);
    prov.source_kind = "model";
    prov.source = o.model;
    prov.extra = scored->run.info;
    speed_json = scored->run.speed;
    speed_text = scored->run.speed_text;
#endif
  }
  if (!result.IsOk()) {
    *exit_code = Fail(ctx, result.GetStatus());
    return;
  }
  nlohmann::json record = eval::EvalRecordJson(*result, prov, Env::Default().UnixSeconds());
  if (!speed_json.is_null()) record["speed"] = speed_json;
  // Everything optional is computed and rendered here, before anything is
  // written: a failure (undecodable image, impossible image_ids) writes nothing.
  std::vector<std::pair<std::string, std::string>> files;  // name, bytes
  std::string coco_text;
  if (o.coco_metrics) {
    auto coco = eval::CocoEvaluateSplit(split, per_image);
    if (!coco.IsOk()) {
      *exit_code = Fail(ctx, coco.GetStatus());
      return;
    }
    record["coco"] = eval::CocoMetricsToJson(*coco);
    coco_text = "COCO-style metrics (pycocotools bbox conventions; area = box area):\n" + eval::CocoSummaryText(*coco);
  }
  if (o.save_json) {
    auto cj = eval::SplitPredictionsCocoJson(split, per_image, o.image_ids);
    if (!cj.IsOk()) {
      *exit_code = Fail(ctx, cj.GetStatus());
      return;
    }
    record["predictions_json"] = {{"file", "predictions.json"},
                                  {"image_ids", cj->image_ids},
                                  {"category_id", "class_id + 1"},
                                  {"detections", cj->detections}};
    files.emplace_back("predictions.json", std::move(cj->text));
  }
  if (o.plots) {
    store::ArtifactStore& blobs = *stores->blobs;
    auto grids = eval::RenderValBatch(split, per_image,
                                      [&blobs](const eval::SplitImage& im) { return blobs.Get(im.image_sha); });
    if (!grids.IsOk()) {
      *exit_code = Fail(ctx, grids.GetStatus().WithContext("val_batch0 grid"));
      return;
    }
    files.emplace_back("val_batch0_labels.jpg", std::move(grids->labels_jpg));
    files.emplace_back("val_batch0_pred.jpg", std::move(grids->pred_jpg));
  }
  const std::string dir = eval::NextRunDir(Env::Default(), o.project, o.name, "val", o.exist_ok);
  auto written = WriteEvalOutputs(*stores, *result, record, dir, o.plots, files);
  if (!written.IsOk()) {
    *exit_code = Fail(ctx, written.GetStatus());
    return;
  }
  std::string text = rec.dataset + "@v" + std::to_string(rec.seq) + " split " + split.split + " (" +
                     std::to_string(split.images.size()) + " images), " + prov.source_kind + " " + prov.source +
                     "\n" + eval::EvalSummaryText(*result) + coco_text + speed_text + "results saved to " +
                     written->dir + "\n";
  if (o.save_json) {
    text += "predictions saved to " + JoinPath(written->dir, "predictions.json") + " (COCO results, image_ids=" +
            record["predictions_json"]["image_ids"].get<std::string>() + ")\n";
  }
  text += "result record " + written->record_sha + " (" + written->record_path + ")\n";
  nlohmann::json j = {{"ok", true},
                      {"dir", written->dir},
                      {"record_sha", written->record_sha},
                      {"record_path", written->record_path},
                      {"result", record}};
  if (o.save_json) j["predictions_json"] = JoinPath(written->dir, "predictions.json");
  *exit_code = Emit(ctx, text, j);
}

}  // namespace

void AddEvalCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct ValState {
    ValOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto st = std::make_shared<ValState>();
  st->opts.Bind(st->set);
  CLI::App* val = app.add_subcommand(
      "val", "Score a model or predictions made elsewhere on a dataset version (mAP, P, R, errors, plots)");
  val->add_option("key=value", st->extras, "e.g. predictions=DIR data=coco128 split=val conf=0.001");
  AddOptionFlags(val, st->set, &st->flags);
  val->callback([&ctx, exit_code, st] {
    Status s = ApplyOptions(st->set, st->flags, st->extras);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    RunVal(ctx, exit_code, st->opts);
  });
#ifdef KESTREL_CLI_WITH_TORCH
  AddModelCommands(app, ctx, exit_code);
#endif
}

}  // namespace kestrel::cli
