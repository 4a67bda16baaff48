// `kestrel-deploy predict` and `kestrel-deploy val` (docs/deploy.md): the
// LibTorch-free program for a deployment box. The use cases are the same as
// `kestrel predict` / `kestrel val`'s, restricted to exported ONNX files run
// by OpenCV DNN (app::PredictOnnx, app::EvaluateOnnxModel of
// kestrel_onnx_run); the keys are bound by the same functions, and --json
// prints the same views.
#include <memory>
#include <string>
#include <vector>

#include "app/evaluate.h"
#include "app/val_keys.h"
#include "app_run/predict.h"
#include "app_run/score_split.h"
#include "cli/cli.h"
#include "cli/deploy.h"
#include "cli/predict_keys.h"
#include "core/device_spec.h"

namespace kestrel::cli {
namespace {

Status Usage(const std::string& msg, const std::string& field) {
  return Status::InvalidArgument(msg, {"command line", 0, field});
}

// device= keeps `kestrel`'s form; this program has no CUDA runtime.
Status CheckCpuDevice(const std::string& device) {
  auto d = ParseDeviceSpec(device);
  if (!d.IsOk()) return Usage(d.GetStatus().Message(), "device");
  if (d->IsCuda()) {
    return Usage(
        "device=" + device + ": kestrel-deploy runs ONNX files on the CPU (OpenCV DNN); use device=cpu",
        "device");
  }
  return {};
}

void RunDeployPredict(Context& ctx, int* exit_code, const app::PredictRequest& r) {
  if (r.model.empty() || r.source.empty()) {
    *exit_code = Fail(ctx, Usage("model=FILE.onnx and source=IMAGE|DIR are required",
                                 r.model.empty() ? "model" : "source"));
    return;
  }
  if (Status d = CheckCpuDevice(r.device); !d.IsOk()) {
    *exit_code = Fail(ctx, d);
    return;
  }
  auto out = app::PredictOnnx(Env::Default(), r);
  if (!out.IsOk()) {
    *exit_code = Fail(ctx, out.GetStatus());
    return;
  }
  Emit(ctx, app::PredictResultText(*out), app::PredictResultJson(*out));
  *exit_code = app::PredictExitCode(*out);  // 1 when a file was skipped (kPredictExitHelp)
}

void RunDeployVal(Context& ctx, int* exit_code, app::ValKeys& o) {
  if (o.data.empty()) {
    *exit_code = Fail(ctx, Usage("data=NAME[@VERSION] or a dataset path is required", "data"));
    return;
  }
  if (o.predictions.empty() == o.model.empty()) {
    *exit_code = Fail(ctx, Usage("give exactly one of model=FILE.onnx or predictions=PATH", "model"));
    return;
  }
  if (Status d = CheckCpuDevice(o.device); !d.IsOk()) {
    *exit_code = Fail(ctx, d);
    return;
  }
  auto stores = OpenStores(ctx);
  if (!stores.IsOk()) {
    *exit_code = Fail(ctx, stores.GetStatus());
    return;
  }
  // data= may be a dataset path: imported (or its version reused) first.
  if (!ResolveDataOption(ctx, *stores, &o.data, nullptr, exit_code)) return;
  auto run = o.model.empty() ? app::EvaluatePredictions(Env::Default(), *stores->meta, *stores->blobs, o)
                             : app::EvaluateOnnxModel(Env::Default(), *stores->meta, *stores->blobs, o);
  if (!run.IsOk()) {
    *exit_code = Fail(ctx, run.GetStatus());
    return;
  }
  *exit_code = Emit(ctx, run->text, app::ValRunJson(*run));
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
  cmd->callback([&ctx, exit_code, st, run] {
    Status s = ApplyOptions(st->set, st->flags, st->extras);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    run(ctx, exit_code, st->keys);
  });
  return cmd;
}

void BindValKeys(OptionSet& s, app::ValKeys* keys) { keys->Bind(s); }

}  // namespace

void AddDeployCommands(CLI::App& app, Context& ctx, int* exit_code) {
  AddKeysCommand<app::PredictRequest>(
      app, ctx, exit_code, "predict",
      "Run an exported ONNX detector on images: annotated images, YOLO txt, JSON, speed",
      "e.g. model=best.onnx source=images/ conf=0.25", &BindPredictKeys,
      [](Context& c, int* code, const app::PredictRequest& r) { RunDeployPredict(c, code, r); })
      ->footer(kPredictExitHelp);
  AddKeysCommand<app::ValKeys>(app, ctx, exit_code, "val",
                               "Score an exported ONNX detector on a dataset (mAP, P, R, errors, plots)",
                               "e.g. model=best.onnx data=path/to/dataset split=val", &BindValKeys,
                               [](Context& c, int* code, app::ValKeys& k) { RunDeployVal(c, code, k); });
}

}  // namespace kestrel::cli
