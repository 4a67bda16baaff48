// `kestrel val`, `kestrel predict`, `kestrel compare` (docs/evaluation.md).
// `val predictions=` is torch-free and always built; everything that runs a
// model needs KESTREL_CLI_WITH_TORCH (the cli target defines it when the
// model module is built).
#include <cstdio>
#include <iostream>

#include "app/val_keys.h"
#include "cli/cli.h"
#include "cli/eval_model.h"  // torch-free; LoadSplit (model functions only with LibTorch)
#include "cli/job_child.h"
#include "core/failure_of.h"
#include "core/json.h"
#include "core/staged_dir.h"
#include "data/registry.h"
#include "eval/dataset_eval.h"
#include "eval/plots.h"
#include "eval/split_coco.h"
#include "eval/val_batch.h"
#include "jobs/job_keys.h"

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

// `kestrel val`'s keys: the same binding val jobs are validated with.
using ValOptions = app::ValKeys;

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
Result<WrittenOutputs> WriteEvalOutputs(Stores& stores, const eval::EvalResult& r,
                                        const nlohmann::json& record, const std::string& dir, bool plots,
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

// What one evaluation computed and wrote.
struct ValRun {
  nlohmann::json record;  // result.json (eval::EvalRecordJson plus speed, coco, predictions_json)
  eval::EvalResult result;
  WrittenOutputs written;
  std::string text;  // the human summary `kestrel val` prints
};

// Scores o.predictions or o.model (both already resolved: data= a registry
// reference, model= a file) on o.data's split and writes the run folder:
// `dir`, or with "" the next free project/name. `kestrel val` and `kestrel
// val --job` both run it.
Result<ValRun> ScoreAndWrite(Stores& stores, const ValOptions& o, const std::string& dir_or_empty) {
  KESTREL_ASSIGN_OR_RETURN(LoadedSplit loaded, LoadSplit(stores, o.data, o.split));
  const eval::EvalSplit& split = loaded.split;
  const auto& rec = loaded.version.record;
  eval::EvalProvenance prov{rec.dataset, "v" + std::to_string(rec.seq), rec.version_id, split.split, "", "",
                            {}};
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
    KESTREL_ASSIGN_OR_RETURN(auto preds,
                             eval::ReadSplitPredictions(Env::Default(), o.predictions, split, ro));
    per_image = std::move(preds.per_image);
    result = eval::EvaluateSplit(split, per_image, eo);
    prov.source_kind = "predictions";
    prov.source = o.predictions;
    prov.extra = {{"format", preds.format}};
    if (!preds.image_ids.empty()) prov.extra["image_ids"] = preds.image_ids;
  } else {
#ifdef KESTREL_CLI_WITH_TORCH
    ModelRunOptions mo{o.imgsz, o.batch, o.conf, o.iou, o.max_det};
    mo.rect = o.rect;
    KESTREL_ASSIGN_OR_RETURN(auto scored, ScoreModelOnSplit(*stores.blobs, o.model, split, mo));
    result = std::move(scored.result);
    per_image = std::move(scored.run.per_image);
    prov.source_kind = "model";
    prov.source = o.model;
    prov.extra = scored.run.info;
    speed_json = scored.run.speed;
    speed_text = scored.run.speed_text;
#else
    return Status::FailedPrecondition("this kestrel was built without LibTorch: val model= is unavailable",
                                      {"", 0, "model"});
#endif
  }
  if (!result.IsOk()) return result.GetStatus();
  ValRun out;
  out.result = std::move(result).Value();
  nlohmann::json& record = out.record;
  record = eval::EvalRecordJson(out.result, prov, Env::Default().UnixSeconds());
  if (!speed_json.is_null()) record["speed"] = speed_json;
  // Everything optional is computed and rendered here, before anything is
  // written: a failure (undecodable image, impossible image_ids) writes nothing.
  std::vector<std::pair<std::string, std::string>> files;  // name, bytes
  std::string coco_text;
  if (o.coco_metrics) {
    KESTREL_ASSIGN_OR_RETURN(auto coco, eval::CocoEvaluateSplit(split, per_image));
    record["coco"] = eval::CocoMetricsToJson(coco);
    coco_text =
        "COCO-style metrics (pycocotools bbox conventions; area = box area):\n" + eval::CocoSummaryText(coco);
  }
  if (o.save_json) {
    KESTREL_ASSIGN_OR_RETURN(auto cj, eval::SplitPredictionsCocoJson(split, per_image, o.image_ids));
    record["predictions_json"] = {{"file", "predictions.json"},
                                  {"image_ids", cj.image_ids},
                                  {"category_id", "class_id + 1"},
                                  {"detections", cj.detections}};
    files.emplace_back("predictions.json", std::move(cj.text));
  }
  if (o.plots) {
    store::ArtifactStore& blobs = *stores.blobs;
    auto grids = eval::RenderValBatch(
        split, per_image, [&blobs](const eval::SplitImage& im) { return blobs.Get(im.image_sha); });
    if (!grids.IsOk()) return grids.GetStatus().WithContext("val_batch0 grid");
    files.emplace_back("val_batch0_labels.jpg", std::move(grids->labels_jpg));
    files.emplace_back("val_batch0_pred.jpg", std::move(grids->pred_jpg));
  }
  const std::string dir = dir_or_empty.empty()
                              ? eval::NextRunDir(Env::Default(), o.project, o.name, "val", o.exist_ok)
                              : dir_or_empty;
  KESTREL_ASSIGN_OR_RETURN(out.written, WriteEvalOutputs(stores, out.result, record, dir, o.plots, files));
  out.text = rec.dataset + "@v" + std::to_string(rec.seq) + " split " + split.split + " (" +
             std::to_string(split.images.size()) + " images), " + prov.source_kind + " " + prov.source +
             "\n" + eval::EvalSummaryText(out.result) + coco_text + speed_text + "results saved to " +
             out.written.dir + "\n";
  if (o.save_json) {
    out.text += "predictions saved to " + JoinPath(out.written.dir, "predictions.json") +
                " (COCO results, image_ids=" + record["predictions_json"]["image_ids"].get<std::string>() +
                ")\n";
  }
  out.text += "result record " + out.written.record_sha + " (" + out.written.record_path + ")\n";
  return out;
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
    *exit_code =
        Fail(ctx, Status::FailedPrecondition("this kestrel was built without LibTorch: val model= is "
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
  auto run = ScoreAndWrite(*stores, o, "");
  if (!run.IsOk()) {
    *exit_code = Fail(ctx, run.GetStatus());
    return;
  }
  nlohmann::json j = {{"ok", true},
                      {"dir", run->written.dir},
                      {"record_sha", run->written.record_sha},
                      {"record_path", run->written.record_path},
                      {"result", run->record}};
  if (o.save_json) j["predictions_json"] = JoinPath(run->written.dir, "predictions.json");
  *exit_code = Emit(ctx, run->text, j);
}

// `kestrel val --job ID --attempt N`: the child a worker runs for a val job
// (docs/jobs.md "Job kinds"). It evaluates the job's model on its dataset
// version into $KESTREL_HOME/jobs/<id>/attempt-<n>/ and reports like `train
// --job`: progress lines, `reason=` and the exit code of core/failure.h on
// failure, `result {json}` at the end (the quality gate reads its map50).
int RunValJob(Context& ctx, int64_t job_id, int64_t attempt) {
  JobChild child(ctx, job_id, attempt);
  Stores stores;
  store::JobRecord job;
  int code = 0;
  if (!child.Begin(&stores, &job, &code)) return code;
  auto kind = jobs::JobKindOf(job);
  if (!kind.IsOk()) return child.Fail(FailureReason::kBadConfig, kind.GetStatus());
  if (*kind != jobs::JobKind::kVal) {
    return child.Fail(FailureReason::kBadConfig,
                      Status::InvalidArgument("job " + std::to_string(job_id) + " is a " +
                                              jobs::JobKindName(*kind) + " job, not a val job (`kestrel " +
                                              jobs::JobKindName(*kind) + " --job` runs it)"));
  }
  ValOptions o;
  {
    OptionSet set;
    o.Bind(set);
    auto cfg = nlohmann::json::parse(job.spec.config_json, nullptr, false);
    if (!cfg.is_object()) {
      return child.Fail(FailureReason::kBadConfig,
                        Status::InvalidArgument("stored config is not a JSON object"));
    }
    // The job's own keys travel in the config; the rest are the val keys.
    cfg.erase(jobs::kJobKindKey);
    cfg.erase("min_map50");
    Status s = set.ApplyJson(cfg, "job " + std::to_string(job_id) + " config");
    if (!s.IsOk()) return child.Fail(FailureReason::kBadConfig, s);
  }
  // Runs a model, never files of the submitting machine; the run folder is the attempt's.
  o.predictions.clear();
  if (o.model.empty())
    return child.Fail(FailureReason::kBadConfig, Status::InvalidArgument("the job names no model="));
  child.Progress().Line("stage=eval model=" + o.model);
  auto run = ScoreAndWrite(stores, o, child.AttemptDir());
  if (!run.IsOk()) return child.Fail(FailureReasonOf(run.GetStatus()), run.GetStatus());
  const eval::EvalResult& r = run->result;
  nlohmann::json result = {{"kind", jobs::JobKindName(jobs::JobKind::kVal)},
                           {"model", o.model},
                           {"data", o.data},
                           {"split", o.split},
                           {"images", r.images},
                           {"instances", r.instances},
                           {"map50", r.map50},
                           {"map50_95", r.map5095},
                           {"precision", r.precision},
                           {"recall", r.recall},
                           {"fitness", r.fitness},
                           {"run_dir", run->written.dir},
                           {"record_sha", run->written.record_sha},
                           {"record_path", run->written.record_path},
                           {"attempt", attempt}};
  (ctx.json ? std::cerr : std::cout) << run->text;
  return child.Succeed(result);
}

}  // namespace

void AddEvalCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct ValState {
    ValOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
    int64_t job = 0;
    int64_t attempt = 0;
  };
  auto st = std::make_shared<ValState>();
  st->opts.Bind(st->set);
  CLI::App* val = app.add_subcommand(
      "val", "Score a model or predictions made elsewhere on a dataset version (mAP, P, R, errors, plots)");
  val->add_option("key=value", st->extras, "e.g. predictions=DIR data=coco128 split=val conf=0.001");
  AddOptionFlags(val, st->set, &st->flags);
  val->add_option("--job", st->job,
                  "run this queued val job's attempt (what `kestrel worker` starts; docs/jobs.md)")
      ->check(IntArg(1));
  val->add_option("--attempt", st->attempt, "the attempt number the worker claimed (with --job)")
      ->check(IntArg(1));
  val->callback([&ctx, exit_code, st] {
    if (st->job > 0 || st->attempt > 0) {
      if (st->job <= 0 || st->attempt <= 0 || !st->extras.empty() || !st->flags.empty()) {
        *exit_code =
            Fail(ctx, Status::InvalidArgument("--job ID --attempt N go together and take no other options",
                                              {"command line", 0, "job"}));
        return;
      }
      *exit_code = RunValJob(ctx, st->job, st->attempt);
      return;
    }
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
