// `kestrel export`: a model written as ONNX and verified (OpenCV DNN against
// LibTorch) before it is reported (docs/export.md). Built only with LibTorch;
// this file includes no torch header. The use case is app::ExportAndRecord
// (app/export_record.h over app::ExportModel), its keys app::ExportKeys
// (app/export_keys.h, shared with `kestrel submit kind=export`); --json
// prints its one JSON view, plus "registry": the export's record on the model
// when model= named a registered one (app::ModelRegistry::RecordExport), else
// null. An export job's attempt (`export --job ID --attempt N`) is the export
// kind's runner, app::RunExportAttempt (app/job_runners.h).
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/export_keys.h"
#include "app/export_record.h"
#include "cli/cli.h"
#include "cli/job_child.h"
#include "cli/torch_commands.h"

namespace kestrel::cli {
namespace {

// `kestrel export`: data= may be a dataset path (imported, or its version
// reused, first, as for `val`: int8=true calibrates on it); then the one use
// case (app/export_record.h): model= resolved, the file exported,
// verified and recorded on its registered model.
CommandResult RunExport(Context& ctx, const app::ExportKeys& keys) {
  KESTREL_ASSIGN_OR_RETURN(app::ExportRequest req, keys.Request());
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  int exit_code = kExitOk;
  if (!req.data.empty() && !ResolveDataOption(ctx, stores, &req.data, nullptr, &exit_code)) {
    return CommandResult::Reported(exit_code);
  }
  std::ostream& out = ctx.json ? std::cerr : std::cout;
  KESTREL_ASSIGN_OR_RETURN(
      app::RegisteredExport e,
      app::ExportAndRecord(Env::Default(), *stores.meta, *stores.blobs, std::move(req),
                           [&out](const store::ModelRecord& m, const std::string& weights) {
                             out << app::ResolvedModelText(m, weights) << std::endl;
                           }));
  return Output{e.text, e.doc};
}

}  // namespace

void AddExportCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct ExportState {
    app::ExportKeys opts;  // the schema shared with export jobs (app/export_keys.h)
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto st = std::make_shared<ExportState>();
  st->opts.Bind(st->set);
  CLI::App* cmd = app.add_subcommand(kExportCommand.name, kExportCommand.help);
  cmd->add_option("key=value", st->extras, "e.g. model=best.safetensors format=onnx imgsz=640");
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->footer(kJobAttemptHelp);
  cmd->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(ApplyOptions(st->set, st->flags, st->extras));
    return RunExport(ctx, st->opts);
  }));
}

}  // namespace kestrel::cli
