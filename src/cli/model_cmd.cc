// `kestrel predict` and `kestrel compare`: the commands that run a model.
// Built only with LibTorch; this file includes no torch header. The use
// cases are app::Predict (app/predict.h) and app::CompareModels
// (app/compare.h), run by the backends main() registered; each --json
// prints its app view unchanged.
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "app/backends.h"
#include "app/compare.h"
#include "app/dataset_predict.h"
#include "app/preannotations.h"
#include "app/predict.h"
#include "cli/eval_model.h"
#include "cli/predict_console.h"
#include "cli/predict_keys.h"
#include "cli/torch_commands.h"
#include "train/train_config.h"

namespace kestrel::cli {
namespace {

void BindPreannotationKeys(OptionSet& s, app::PreannotationOptions& pre) {
  s.String("format", &pre.format,
           "also write pre-annotations for a labelling tool: label-studio (tasks JSON + labelling config "
           "XML), cvat (CVAT for images 1.1 XML), yolo (Ultralytics YOLO Detection 1.0 labels folder + "
           "its zip for CVAT) or coco (COCO instances JSON with scores); \"\" = none");
  s.String("out", &pre.out,
           "format=: the file (yolo: the folder, its zip beside it) to write (\"\" = label_studio.json, "
           "cvat_annotations.xml, yolo/ or coco_annotations.json in the run folder)");
  s.String("ls_image_root", &pre.ls_image_root,
           "format=label-studio: data.image = this prefix + the image's path under source= (\"\" = "
           "/data/local-files/?d=ABSOLUTE_PATH, for LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT=/)");
  s.String("ls_from_name", &pre.ls_from_name, "format=label-studio: the RectangleLabels tag's name");
  s.String("ls_to_name", &pre.ls_to_name, "format=label-studio: the Image tag's name");
}

struct PredictOptions {
  app::PredictRequest r;
  app::PreannotationOptions pre;  // format= "": none written
  void Bind(OptionSet& s) {
    BindPredictKeys(s, &r);
    BindPreannotationKeys(s, pre);
  }
};

// `kestrel dataset predict NAME@vN model=... format=...` (app/dataset_predict.h).
struct DatasetPredictOptions {
  app::DatasetPredictRequest r;
  void Bind(OptionSet& s) {
    BindPredictKeys(s, &r.predict);
    BindPreannotationKeys(s, r.pre);
    s.String("split", &r.split, "only this split's images: train, val or test (\"\" = all)");
  }
};

CommandResult RunDatasetPredict(const Context& ctx, const DatasetPredictOptions& o) {
  if (o.r.predict.model.empty())
    return Status::InvalidArgument("model=WEIGHTS is required", {"command line", 0, "model"});
  if (!o.r.predict.source.empty())
    return Status::InvalidArgument("dataset predict reads the version's images: no source=",
                                   {"command line", 0, "source"});
  KESTREL_RETURN_IF_ERROR(app::CheckDevice(o.r.predict.device));
  app::DatasetPredictRequest req = o.r;
  if (req.pre.format.empty())
    return Status::InvalidArgument("format=label-studio|cvat|yolo|coco is required",
                                   {"command line", 0, "format"});
  KESTREL_RETURN_IF_ERROR(app::ValidatePreannotationOptions(req.pre));
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  PredictConsole console(std::cerr, PredictConsole::IsTerminal(ctx), kPredictProgressEvery, std::cout, false,
                         ctx.json);
  Result<app::DatasetPredictResult> run = app::PredictDatasetVersion(
      Env::Default(), *stores.meta, *stores.blobs, req,
      [&ctx](std::string* weights) { return ResolveWeightsOption(ctx, weights); }, app::LoadDetector,
      console.Sink());
  console.Finish();
  KESTREL_ASSIGN_OR_RETURN(app::DatasetPredictResult r, std::move(run));
  std::string text = app::PredictResultText(r.predict);
  for (const std::string& f : r.files) text += req.pre.format + " pre-annotations: " + f + "\n";
  return Output{std::move(text), app::DatasetPredictJson(r, req.split, req.pre.format),
                app::PredictExitCode(r.predict)};
}

// The use case is app::Predict (app/predict.h); --json prints its one
// JSON view unchanged.
CommandResult RunPredict(const Context& ctx, const PredictOptions& o) {
  if (o.r.model.empty() || o.r.source.empty()) {
    return Status::InvalidArgument("model=WEIGHTS and source=IMAGE|DIR are required",
                                   {"command line", 0, o.r.model.empty() ? "model" : "source"});
  }
  // device= this program can run on (the LibTorch backend's CUDA check).
  KESTREL_RETURN_IF_ERROR(app::CheckDevice(o.r.device));
  // format=: checked before anything runs (app/preannotations.h).
  app::PreannotationOptions pre = o.pre;
  if (!pre.format.empty()) {
    KESTREL_RETURN_IF_ERROR(app::ValidatePreannotationOptions(pre));
    if (o.r.stream)
      return Status::InvalidArgument(
          "format=" + pre.format + " needs the predicted images kept: not with stream=true",
          {"command line", 0, "format"});
    if (Env::Default().Stat(o.r.source).is_dir) pre.source_root = o.r.source;
    pre.model_version = o.r.model;
  }
  // model= may name a registered model (NAME@vN, NAME@TAG, id prefix).
  PredictConsole console(std::cerr, PredictConsole::IsTerminal(ctx), kPredictProgressEvery, std::cout,
                         o.r.stream, ctx.json);
  app::PredictRequest req = o.r;
  req.stop = InstallPredictStopHandlers();  // Ctrl-C: the run folder is committed, exit 130
  Result<app::PredictResult> run = app::Predict(
      Env::Default(), req, [&ctx](std::string* weights) { return ResolveWeightsOption(ctx, weights); },
      console.Sink());
  console.Finish();
  if (!run.IsOk() && req.stop->load())
    return CommandResult::Failed(run.GetStatus(), app::kPredictExitStopped);
  KESTREL_ASSIGN_OR_RETURN(app::PredictResult r, std::move(run));
  std::string text = app::PredictResultText(r);
  nlohmann::json json = app::PredictResultJson(r);
  if (!pre.format.empty()) {
    KESTREL_ASSIGN_OR_RETURN(std::vector<std::string> files,
                             app::WritePreannotations(Env::Default(), r, pre));
    json["preannotations"] = {{"format", pre.format}, {"files", files}};
    for (const std::string& f : files) text += pre.format + " pre-annotations: " + f + "\n";
  }
  // Exit 1 when a file was skipped (kPredictExitHelp).
  return Output{std::move(text), std::move(json), app::PredictExitCode(r)};
}

struct CompareOptions {
  app::CompareRequest r;  // model_a, model_b come from the positional arguments
  void Bind(OptionSet& s) {
    s.String("data", &r.data, "dataset NAME or NAME@VERSION");
    s.Choice("split", &r.split, {"train", "val", "test"}, "split to evaluate");
    train::BindInferenceKeys(s, &r.conf, &r.iou, &r.imgsz, &r.max_det, &r.batch);
    train::BindRunFolderKeys(s, &r.project, &r.name, &r.exist_ok);  // name "" = compare, compare2, ...
  }
};

CommandResult RunCompare(const Context& ctx, const CompareOptions& o,
                         const std::vector<std::string>& models) {
  if (models.size() != 2 || o.r.data.empty()) {
    return Status::InvalidArgument("usage: compare A.safetensors B.safetensors data=NAME[@VERSION]",
                                   {"command line", 0, models.size() != 2 ? "model" : "data"});
  }
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  app::CompareRequest req = o.r;
  req.model_a = models[0];
  req.model_b = models[1];
  // data= may be a dataset path: imported (or its version reused) first; it
  // reports its own failure.
  int data_code = kExitOk;
  if (!ResolveDataOption(ctx, stores, &req.data, nullptr, &data_code))
    return CommandResult::Reported(data_code);
  // A and B may name registered models (NAME@vN, NAME@TAG, id prefix).
  KESTREL_ASSIGN_OR_RETURN(
      app::CompareResult r,
      app::CompareModels(Env::Default(), *stores.meta, *stores.blobs, req,
                         [&ctx](std::string* weights) { return ResolveWeightsOption(ctx, weights); }));
  return Output{app::CompareResultText(r), app::CompareResultJson(r)};
}

}  // namespace

void AddModelCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct PredictState {
    PredictOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto st = std::make_shared<PredictState>();
  st->opts.Bind(st->set);
  CLI::App* cmd = app.add_subcommand(kPredictCommand.name, kPredictCommand.help);
  cmd->add_option("key=value", st->extras, "e.g. model=best.safetensors source=images/ conf=0.25");
  cmd->footer(kPredictExitHelp);
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(ApplyOptions(st->set, st->flags, st->extras));
    return RunPredict(ctx, st->opts);
  }));

  // `dataset predict`: a subcommand of `dataset` (dataset_cmd.cc), here
  // because it runs a model; `kestrel` forwards `dataset predict` here (main.cc).
  CLI::App* ds = nullptr;
  try {
    ds = app.get_subcommand("dataset");  // added before this (main.cc)
  } catch (const CLI::OptionNotFound&) {
    ds = nullptr;
  }
  if (ds != nullptr) {
    struct DatasetPredictState {
      DatasetPredictOptions opts;
      OptionSet set;
      FlagValues flags;
      std::string spec;
      std::vector<std::string> extras;
    };
    auto dp = std::make_shared<DatasetPredictState>();
    dp->opts.Bind(dp->set);
    CLI::App* dcmd = ds->add_subcommand(kDatasetPredictCommand.name, kDatasetPredictCommand.help);
    dcmd->add_option("dataset", dp->spec, "NAME@VERSION")->required();
    dcmd->add_option("key=value", dp->extras, "e.g. model=best.safetensors format=label-studio split=val");
    dcmd->footer(kPredictExitHelp);
    AddOptionFlags(dcmd, dp->set, &dp->flags);
    dcmd->callback(Callback(ctx, exit_code, [&ctx, dp]() -> CommandResult {
      KESTREL_RETURN_IF_ERROR(ApplyOptions(dp->set, dp->flags, dp->extras));
      dp->opts.r.spec = dp->spec;
      return RunDatasetPredict(ctx, dp->opts);
    }));
  }

  struct CompareState {
    CompareOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto cs = std::make_shared<CompareState>();
  cs->opts.Bind(cs->set);
  CLI::App* cmp = app.add_subcommand(kCompareCommand.name, kCompareCommand.help);
  cmp->add_option("args", cs->extras, "A.safetensors B.safetensors data=NAME[@VERSION] key=value...");
  AddOptionFlags(cmp, cs->set, &cs->flags);
  cmp->callback(Callback(ctx, exit_code, [&ctx, cs]() -> CommandResult {
    std::vector<std::string> models, kv;
    for (const auto& e : cs->extras) (e.find('=') == std::string::npos ? models : kv).push_back(e);
    KESTREL_RETURN_IF_ERROR(ApplyOptions(cs->set, cs->flags, kv));
    return RunCompare(ctx, cs->opts, models);
  }));
}

}  // namespace kestrel::cli
