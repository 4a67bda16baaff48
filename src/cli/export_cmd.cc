// `kestrel export`: a model written as ONNX and verified (OpenCV DNN against
// LibTorch) before it is reported (docs/export.md). Built only with LibTorch;
// this file includes no torch header. The use case is app::ExportModel
// (app_run/export.h); --json prints its one JSON view unchanged.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app_run/export.h"
#include "cli/cli.h"

namespace kestrel::cli {
namespace {

struct ExportOptions {
  app::ExportRequest r;
  std::string imgsz = "640";  // parsed by app::ParseExportImgsz
  void Bind(OptionSet& s) {
    s.String("model", &r.model, "weights file (.safetensors, .pt) or a registered model NAME[@vN|@TAG]");
    s.String("format", &r.format, "export format: onnx");
    s.String("imgsz", &imgsz, "input side (640) or height,width (320,256 or [320,256]), multiples of 32");
    s.Int("batch", &r.batch, "batch dimension of the exported graph (the nominal one when dynamic)");
    s.Int("opset", &r.opset, "ONNX opset, 13..17");
    s.Bool("dynamic", &r.dynamic, "dynamic batch, height and width axes");
    s.Bool("half", &r.half, "FP16 weights and compute, float32 input/output (verified in ONNX Runtime)");
    s.String("output", &r.output, "where to write (default: beside the weights, <stem>.onnx)");
    s.Int("verify_images", &r.verify_images, "synthetic images the verification runs, 1..64");
    s.Bool("force", &r.force, "keep a file that failed verification, marked unverified in its metadata");
  }
};

void RunExport(Context& ctx, int* exit_code, const ExportOptions& o) {
  Result<std::pair<int, int>> imgsz = app::ParseExportImgsz(o.imgsz);
  if (!imgsz.IsOk()) {
    *exit_code = Fail(ctx, imgsz.GetStatus());
    return;
  }
  app::ExportRequest req = o.r;
  req.imgsz_h = imgsz->first;
  req.imgsz_w = imgsz->second;
  auto r = app::ExportModel(Env::Default(), req,
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
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a model as ONNX, verified in OpenCV DNN and ONNX Runtime against LibTorch");
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
