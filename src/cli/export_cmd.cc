// `kestrel export`: a model written as ONNX and verified (OpenCV DNN against
// LibTorch) before it is reported (docs/export.md). Built only with LibTorch;
// this file includes no torch header. The use case is app::ExportModel
// (app_run/export.h); --json prints its one JSON view unchanged.
#include <memory>
#include <string>
#include <vector>

#include "app_run/export.h"
#include "cli/cli.h"

namespace kestrel::cli {
namespace {

struct ExportOptions {
  app::ExportRequest r;
  void Bind(OptionSet& s) {
    s.String("model", &r.model, "weights file (.safetensors, .pt) or a registered model NAME[@vN|@TAG]");
    s.String("format", &r.format, "export format: onnx");
    s.Int("imgsz", &r.imgsz, "square input side, a multiple of 32");
    s.Int("batch", &r.batch, "fixed batch dimension of the exported graph");
    s.Int("opset", &r.opset, "ONNX opset, 13..17");
    s.Bool("dynamic", &r.dynamic, "dynamic axes (not supported yet)");
    s.String("output", &r.output, "where to write (default: beside the weights, <stem>.onnx)");
    s.Int("verify_images", &r.verify_images, "synthetic images the verification runs, 1..64");
    s.Bool("force", &r.force, "keep a file that failed verification, marked unverified in its metadata");
  }
};

void RunExport(Context& ctx, int* exit_code, const ExportOptions& o) {
  auto r = app::ExportModel(Env::Default(), o.r,
                            [&ctx](std::string* weights) { return ResolveWeightsOption(ctx, weights); });
  if (!r.IsOk()) {
    *exit_code = Fail(ctx, r.GetStatus());
    return;
  }
  *exit_code = Emit(ctx, app::ExportResultText(*r), app::ExportResultJson(*r));
}

}  // namespace

void AddExportCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct ExportState {
    ExportOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto st = std::make_shared<ExportState>();
  st->opts.Bind(st->set);
  CLI::App* cmd =
      app.add_subcommand("export", "Write a model as ONNX, verified in OpenCV DNN against LibTorch");
  cmd->add_option("key=value", st->extras, "e.g. model=best.safetensors format=onnx imgsz=640");
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->callback([&ctx, exit_code, st] {
    Status s = ApplyOptions(st->set, st->flags, st->extras);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    RunExport(ctx, exit_code, st->opts);
  });
}

}  // namespace kestrel::cli
