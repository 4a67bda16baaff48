// `kestrel-deploy predict` and `kestrel-deploy val` (docs/deploy.md): the
// LibTorch-free program for a deployment box. The use cases are
// `kestrel predict` / `kestrel val`'s (app::Predict, app::EvaluateModel),
// with only the ONNX backend registered (main.cc): exported ONNX files in
// OpenCV DNN or ONNX Runtime, LibTorch weights refused naming `model`; the
// keys are bound by the same functions, and --json prints the same views.
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/backends.h"
#include "app/evaluate.h"
#include "app/predict.h"
#include "app/val_keys.h"
#include "cli/cli.h"
#include "cli/deploy.h"
#include "cli/predict_console.h"
#include "cli/predict_keys.h"

namespace kestrel::cli {
namespace {

Status Usage(const std::string& msg, const std::string& field) {
  return Status::InvalidArgument(msg, {"command line", 0, field});
}

CommandResult RunDeployPredict(const Context& ctx, const app::PredictRequest& r) {
  if (r.model.empty() || r.source.empty()) {
    return Usage("model=FILE.onnx and source=IMAGE|DIR are required", r.model.empty() ? "model" : "source");
  }
  // The CPU only: this program has no LibTorch backend (app::CheckDevice).
  KESTREL_RETURN_IF_ERROR(app::CheckDevice(r.device));
  PredictConsole console(std::cerr, PredictConsole::IsTerminal(ctx), kPredictProgressEvery, std::cout,
                         r.stream, ctx.json);
  app::PredictRequest req = r;
  req.stop = InstallPredictStopHandlers();
  Result<app::PredictResult> run = app::Predict(Env::Default(), req, {}, console.Sink());
  console.Finish();
  if (!run.IsOk() && req.stop->load())
    return CommandResult::Failed(run.GetStatus(), app::kPredictExitStopped);
  KESTREL_ASSIGN_OR_RETURN(app::PredictResult out, std::move(run));
  // Exit 1 when a file was skipped (kPredictExitHelp).
  return Output{app::PredictResultText(out), app::PredictResultJson(out), app::PredictExitCode(out)};
}

CommandResult RunDeployVal(const Context& ctx, app::ValKeys& o) {
  if (o.data.empty()) return Usage("data=NAME[@VERSION] or a dataset path is required", "data");
  if (o.predictions.empty() == o.model.empty()) {
    return Usage("give exactly one of model=FILE.onnx or predictions=PATH", "model");
  }
  KESTREL_RETURN_IF_ERROR(app::CheckDevice(o.device));
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  // data= may be a dataset path: imported (or its version reused) first; it
  // reports its own failure.
  int data_code = kExitOk;
  if (!ResolveDataOption(ctx, stores, &o.data, nullptr, &data_code))
    return CommandResult::Reported(data_code);
  KESTREL_ASSIGN_OR_RETURN(app::ValRun run,
                           o.model.empty()
                               ? app::EvaluatePredictions(Env::Default(), *stores.meta, *stores.blobs, o)
                               : app::EvaluateModel(Env::Default(), *stores.meta, *stores.blobs, o));
  return Output{run.text, app::ValRunJson(run)};
}

// One command: its keys bound once, --flags and key=value applied, then
// run. Returns the command (for a help footer).
template <class Keys, class RunFn>
CLI::App* AddKeysCommand(CLI::App& app, Context& ctx, int* exit_code, const std::string& name,
                         const std::string& help, const std::string& example, void (*bind)(OptionSet&, Keys*),
                         RunFn run) {
  struct State {
    Keys keys;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto st = std::make_shared<State>();
  bind(st->set, &st->keys);
  CLI::App* cmd = app.add_subcommand(name, help);
  cmd->add_option("key=value", st->extras, example);
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->callback(Callback(ctx, exit_code, [&ctx, st, run]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(ApplyOptions(st->set, st->flags, st->extras));
    return run(ctx, st->keys);
  }));
  return cmd;
}

void BindValKeys(OptionSet& s, app::ValKeys* keys) { keys->Bind(s); }

}  // namespace

void AddDeployCommands(CLI::App& app, Context& ctx, int* exit_code) {
  AddKeysCommand<app::PredictRequest>(
      app, ctx, exit_code, "predict",
      "Run an exported ONNX detector on images: annotated images, YOLO txt, JSON, speed",
      "e.g. model=best.onnx source=images/ conf=0.25", &BindPredictKeys,
      [](const Context& c, const app::PredictRequest& r) { return RunDeployPredict(c, r); })
      ->footer(kPredictExitHelp);
  AddKeysCommand<app::ValKeys>(app, ctx, exit_code, "val",
                               "Score an exported ONNX detector on a dataset (mAP, P, R, errors, plots)",
                               "e.g. model=best.onnx data=path/to/dataset split=val", &BindValKeys,
                               [](const Context& c, app::ValKeys& k) { return RunDeployVal(c, k); });
}

}  // namespace kestrel::cli
