// `kestrel dataset audit NAME@vN model=…` (app/dataset_audit.h,
// docs/label-audit.md): a subcommand of the torch-free `dataset`
// group that runs a model, so it lives in kestrel-torch; the `kestrel` front
// hands it over (main.cc, torch_commands.h kTorchDatasetCommands).
#include "app/backends.h"
#include "app/dataset_audit.h"
#include "cli/cli.h"
#include "cli/torch_commands.h"

namespace kestrel::cli {

namespace {

CommandResult RunAudit(const Context& ctx, app::AuditKeys& keys) {
  if (Status d = app::CheckDevice(keys.device); !d.IsOk()) return CommandResult::Failed(d, kExitUsage);
  if (Status v = keys.Validate(); !v.IsOk()) return CommandResult::Failed(v, kExitUsage);
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  int data_code = kExitOk;
  if (!ResolveDataOption(ctx, stores, &keys.data, nullptr, &data_code))
    return CommandResult::Reported(data_code);
  KESTREL_RETURN_IF_ERROR(ResolveWeightsOption(ctx, &keys.model));
  KESTREL_ASSIGN_OR_RETURN(
      app::AuditReport report,
      app::AuditDatasetAndWrite(Env::Default(), *stores.meta, *stores.blobs, keys, app::LoadDetector));
  std::string text = app::AuditReportText(report, size_t(keys.top));
  if (report.stored > 0)
    text += "stored as audit " + std::to_string(report.stored) + " of " + report.data +
            " (the web UI's audit page: #/datasets/" + report.data + "/audit)\n";
  return Output{text, app::AuditReportJson(report, size_t(keys.top))};
}

}  // namespace

void AddDatasetAuditCommand(CLI::App& app, Context& ctx, int* exit_code) {
  struct AuditState {
    app::AuditKeys keys;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto st = std::make_shared<AuditState>();
  st->keys.Bind(st->set);
  CLI::App* dataset = app.get_subcommand("dataset");
  CLI::App* audit = dataset->add_subcommand(kDatasetAuditCommand.name, kDatasetAuditCommand.help);
  audit->add_option(
      "NAME@vN key=value", st->extras,
      "the version (or data=), e.g. shapes@v2 model=best.safetensors split=all conf=0.25 top=20");
  AddOptionFlags(audit, st->set, &st->flags);
  audit->footer(
      "Ranks every label and every confident prediction no label explains: missing, spurious, wrong_class,\n"
      "localisation (docs/datasets.md \"Label audit\"). Use a model that did not train on these labels.\n"
      "Writes audit.csv and audit.json (every item) to runs/detect/audit (or out=).\n" +
      st->set.HelpText());
  audit->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    // The first bare word that is not a flag key is the version (NAME@vN);
    // any other is ApplyOptions' usage error.
    std::vector<std::string> keyed;
    std::string version;
    for (const std::string& a : st->extras) {
      if (version.empty() && a.find('=') == std::string::npos && !st->set.IsBool(a)) {
        version = a;
      } else {
        keyed.push_back(a);
      }
    }
    KESTREL_RETURN_IF_ERROR(ApplyOptions(st->set, st->flags, keyed));
    if (!version.empty()) {
      if (!st->keys.data.empty() && st->keys.data != version) {
        return CommandResult::Failed(
            Status::InvalidArgument("give the version once: " + version + " or data=" + st->keys.data,
                                    {"command line", 0, "data"}),
            kExitUsage);
      }
      st->keys.data = version;
    }
    return RunAudit(ctx, st->keys);
  }));
}

}  // namespace kestrel::cli
