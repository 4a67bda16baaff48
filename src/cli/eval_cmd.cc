// `kestrel val`, `kestrel predict`, `kestrel compare` (docs/evaluation.md).
// `val predictions=` is torch-free and always built; everything that runs a
// model needs KESTREL_CLI_WITH_TORCH (the cli target defines it when the
// model module is built).
#include <cstdio>
#include <iostream>

#include "app/backends.h"
#include "app/evaluate.h"
#include "app/val_keys.h"
#ifdef KESTREL_CLI_WITH_TORCH
#endif
#include "cli/cli.h"
#include "cli/eval_model.h"  // AddModelCommands (only with LibTorch)
#include "cli/job_child.h"
#include "cli/torch_commands.h"
#include "core/device_spec.h"
#include "core/failure_of.h"
#include "core/json.h"
#include "eval/dataset_eval.h"

namespace kestrel::cli {

namespace {

// `kestrel val`'s keys: the same binding val jobs are validated with.
using ValOptions = app::ValKeys;

Status Usage(const std::string& msg, const std::string& field) {
  return Status::InvalidArgument(msg, {"command line", 0, field});
}

// `kestrel val` runs it: o.predictions or
// o.model (both already resolved: data= a registry reference, model= a file)
// scored on o.data's split, into `dir`, or with "" the next free
// project/name (app/evaluate.h).
Result<app::ValRun> ScoreAndWrite(Stores& stores, const ValOptions& o, const std::string& dir_or_empty) {
  if (!o.predictions.empty()) {
    return app::EvaluatePredictions(Env::Default(), *stores.meta, *stores.blobs, o, dir_or_empty);
  }
#ifdef KESTREL_CLI_WITH_TORCH
  return app::EvaluateModel(Env::Default(), *stores.meta, *stores.blobs, o, dir_or_empty);
#else
  return Status::FailedPrecondition("this kestrel was built without LibTorch: val model= is unavailable",
                                    {"", 0, "model"});
#endif
}

// device= (core/device_spec.h): its form always; with model= also that this
// program can run on it (app::CheckDevice: the LibTorch backend's CUDA
// check), so a missing GPU is a usage error (exit 2) before anything is read.
Status CheckValDevice(const ValOptions& o) {
  if (!o.model.empty()) return app::CheckDevice(o.device);
  auto d = ParseDeviceSpec(o.device);
  return d.IsOk() ? Status() : d.GetStatus();
}

CommandResult RunVal(const Context& ctx, ValOptions& o, const std::string& data_mode) {
  if (o.data.empty()) return Usage("data=NAME[@VERSION] is required", "data");
  if (o.predictions.empty() == o.model.empty()) {
    return Usage("give exactly one of predictions=PATH or model=WEIGHTS", "predictions");
  }
#ifndef KESTREL_CLI_WITH_TORCH
  if (!o.model.empty()) {
    return Status::FailedPrecondition(
        "this kestrel was built without LibTorch: val model= is unavailable (val predictions= works)",
        {"", 0, "model"});
  }
#endif
  if (Status d = CheckValDevice(o); !d.IsOk()) return Usage(d.Message(), "device");
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  // data= may be a dataset path: imported (or its version reused) first; it
  // reports its own failure.
  int data_code = kExitOk;
  if (!ResolveDataOption(ctx, stores, &o.data, nullptr, &data_code, data_mode))
    return CommandResult::Reported(data_code);
  // model= may name a registered model (NAME@vN, NAME@TAG, id prefix).
  KESTREL_RETURN_IF_ERROR(ResolveWeightsOption(ctx, &o.model));
  KESTREL_ASSIGN_OR_RETURN(app::ValRun run, ScoreAndWrite(stores, o, ""));
  return Output{run.text, app::ValRunJson(run)};
}

}  // namespace

void AddEvalCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct ValState {
    ValOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
    std::string data_mode = "copy";  // how data=PATH is imported
  };
  auto st = std::make_shared<ValState>();
  st->opts.Bind(st->set);
  BindDataModeKey(st->set, &st->data_mode);
  CLI::App* val = app.add_subcommand(kValCommand.name, kValCommand.help);
  val->add_option("key=value", st->extras, "e.g. predictions=DIR data=coco128 split=val conf=0.001");
  AddOptionFlags(val, st->set, &st->flags);
  val->footer(kJobAttemptHelp);
  val->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(ApplyOptions(st->set, st->flags, st->extras));
    return RunVal(ctx, st->opts, st->data_mode);
  }));
#ifdef KESTREL_CLI_WITH_TORCH
  AddModelCommands(app, ctx, exit_code);
#endif
}

}  // namespace kestrel::cli
