// `kestrel dataset select pool=DIR model=… strategy=… budget=N`
// (app/dataset_select.h, docs/label-audit.md "Which images to label
// next"): a subcommand of the torch-free `dataset` group that runs a model,
// so it lives in kestrel-torch; the `kestrel` front hands it over (main.cc,
// torch_commands.h kTorchDatasetCommands). This file includes no torch header.
#include "app/backends.h"
#include "app/dataset_select.h"
#include "cli/cli.h"
#include "cli/torch_commands.h"

namespace kestrel::cli {

namespace {

constexpr size_t kShownPicks = 20;

CommandResult RunSelect(const Context& ctx, const app::SelectKeys& keys) {
  if (Status d = app::CheckDevice(keys.device); !d.IsOk()) return CommandResult::Failed(d, kExitUsage);
  if (Status v = keys.Validate(); !v.IsOk()) return CommandResult::Failed(v, kExitUsage);
  // model= may name a registered model (NAME@vN, NAME@TAG, id prefix).
  KESTREL_ASSIGN_OR_RETURN(
      app::SelectReport report,
      app::SelectFromPool(
          Env::Default(), keys, [&ctx](std::string* weights) { return ResolveWeightsOption(ctx, weights); },
          app::LoadDetector));
  return Output{app::SelectReportText(report, kShownPicks), app::SelectReportJson(report)};
}

}  // namespace

void AddDatasetSelectCommand(CLI::App& app, Context& ctx, int* exit_code) {
  struct SelectState {
    app::SelectKeys keys;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto st = std::make_shared<SelectState>();
  st->keys.Bind(st->set);
  CLI::App* dataset = app.get_subcommand("dataset");
  CLI::App* select = dataset->add_subcommand(kDatasetSelectCommand.name, kDatasetSelectCommand.help);
  select->add_option("key=value", st->extras,
                     "e.g. pool=unlabelled/ model=best.safetensors strategy=uncertainty budget=50");
  AddOptionFlags(select, st->set, &st->flags);
  select->footer(
      "Predicts every image under pool=, picks budget= of them by strategy= and writes them as tasks with\n"
      "pre-annotations (format=) plus selection.csv / selection.json (each pick's score and why) to\n"
      "runs/detect/select (or out=). docs/label-audit.md \"Which images to label next\".\n" +
      st->set.HelpText());
  select->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(ApplyOptions(st->set, st->flags, st->extras));
    return RunSelect(ctx, st->keys);
  }));
}

}  // namespace kestrel::cli
