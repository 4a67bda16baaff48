// Shared plumbing for the `kestrel` subcommands: global flags, exit codes,
// printing a result as text or as one JSON document, and the bridge that
// exposes every typed option both as `--dashed-flag VALUE` and as
// Ultralytics-style `key=value`.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/status.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::cli {

// Documented in docs/cli.md "Exit codes".
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the operation failed (bad data, I/O, ...)
inline constexpr int kExitUsage = 2;    // bad command line or options

struct Context {
  bool json = false;  // print one JSON document on stdout
  std::string home;   // Kestrel home (KESTREL_HOME or ./.kestrel)
  std::string log_level = "info";
};

// Validators for CLI11's numeric --flags: the whole text must parse
// (core/parse.h) and lie in [min, max]. CLI11 alone lets an int64 flag
// saturate silently (--max-jobs 99999999999999999999 becomes 2^63-1) and
// takes nan for a double.
CLI::Validator IntArg(int64_t min = std::numeric_limits<int64_t>::min(),
                      int64_t max = std::numeric_limits<int64_t>::max());
CLI::Validator NumberArg(double min = -std::numeric_limits<double>::max(),
                         double max = std::numeric_limits<double>::max());

// Values given as --flags, keyed by option key (only those the user set).
using FlagValues = std::map<std::string, std::string>;

// Adds `--key-with-dashes` for every key of `set` (bools become flags).
void AddOptionFlags(CLI::App* cmd, const OptionSet& set, FlagValues* values);
// Applies --flags, then the `key=value` extras the command was given. A bare
// word naming a bool key is key=true (`kestrel val ... plots`, as the
// reference framework takes it), a bare `resume` is resume=true; anything
// else in `extras` that is not key=value is a usage error.
Status ApplyOptions(OptionSet& set, const FlagValues& values, const std::vector<std::string>& extras);

struct Stores {
  std::unique_ptr<store::MetadataStore> meta;
  std::unique_ptr<store::ArtifactStore> blobs;
};
Result<Stores> OpenStores(const Context& ctx);

// ---- Command bodies (the contract every callback follows)
//
// A command's callback is a body that returns a CommandResult and one
// wrapper, Callback(), that turns it into the process's exit code and its
// output:
//
//   cmd->callback(Callback(ctx, exit_code, [&ctx, args]() -> CommandResult {
//     KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));  // an error: Fail's report
//     KESTREL_ASSIGN_OR_RETURN(auto page, app::ListJobPage(*stores.meta, *args));
//     return Output{PageText(page), app::JobPageJson(page)};    // Emit's text / JSON document
//   }));
//
// so a body never writes `*exit_code = Fail(...); return;`.

// What a command prints on success (Emit's text, or its JSON document with
// --json) and the exit code it ends with.
struct Output {
  std::string text;
  nlohmann::json json;
  int exit_code = kExitOk;  // nonzero: output that still fails (e.g. a skipped file)
};

// How a command body ended.
class [[nodiscard]] CommandResult {
 public:
  // Done, everything printed already: exit 0.
  CommandResult() = default;
  // OK: as above. An error: reported as Fail(ctx, status) does ("error: ..."
  // on stderr, the error document on stdout with --json; exit kExitUsage for
  // a kInvalidArgument located on the "command line", else kExitFailure).
  // Implicit, so `return status;` and KESTREL_RETURN_IF_ERROR /
  // KESTREL_ASSIGN_OR_RETURN work in a body.
  CommandResult(Status status);  // NOLINT(google-explicit-constructor)
  // Printed as Emit does; exit `out.exit_code`.
  CommandResult(Output out);  // NOLINT(google-explicit-constructor)
  // Its error or its output, as the two constructors above.
  CommandResult(Result<Output> out);  // NOLINT(google-explicit-constructor)
  // The error, reported as Fail(ctx, status, exit_code) does (a usage error
  // whose location is not the command line, e.g. a bad key=value).
  static CommandResult Failed(Status status, int exit_code);
  // The body reported the outcome itself (FailWithReport, ResolveDataOption,
  // a document of its own): nothing more is printed, exit `exit_code`.
  static CommandResult Reported(int exit_code);

  // Prints what is left to print; returns the exit code.
  int Finish(const Context& ctx) const;

 private:
  enum class Kind { kDone, kError, kOutput };
  Kind kind_ = Kind::kDone;
  Status status_;
  Output out_;
  int exit_code_ = kExitOk;  // kDone: the code; kError: -1 = Fail's choice
};

// The CLI11 callback that runs `body` and sets *exit_code from its result.
// `ctx` and `exit_code` must outlive the CLI::App (they live in main's Run).
// An exception from `body` is not caught here (main's FailInternal is).
std::function<void()> Callback(const Context& ctx, int* exit_code, std::function<CommandResult()> body);

// Prints `text` (human mode) or `json` (with --json) on stdout; returns 0.
int Emit(const Context& ctx, const std::string& text, const nlohmann::json& json);
// Prints the error on stderr (and {"ok": false, "error": {code, message,
// file, line, field}} on stdout with --json; code is "usage" when the exit
// code is kExitUsage, else the status code name); returns kExitUsage for
// kInvalidArgument errors located on the command line, else kExitFailure.
[[nodiscard]] int Fail(const Context& ctx, const Status& status, int exit_code = -1);
// `dataset import`'s failure report: like Fail, but with --json the document
// also carries the validation report ({"ok": false, "error": {...}, "report":
// {...}}, the error message cut to its first line); `report` may be null
// (the source could not be read at all: plain Fail). Returns the exit code.
[[nodiscard]] int FailWithReport(const Context& ctx, const Status& status, const nlohmann::json* report);
// `data=` of train, submit, val and compare (app::Datasets::Resolve): a registry
// reference is left as is; a dataset path is imported (or its identical
// version reused) and *data becomes "NAME@<version id>", with one line on
// stdout (stderr with --json) saying which version; `info` (optional) gets
// {"source", "dataset", "version", "version_id", "created"} for the JSON
// document. On error reports it as `dataset import` does, sets *exit_code
// and returns false. `data_mode` (train's and val's data_mode= key): how a
// path is imported, copy or reference (docs/datasets.md "Copy or reference").
[[nodiscard]] bool ResolveDataOption(const Context& ctx, Stores& stores, std::string* data,
                                     nlohmann::json* info, int* exit_code,
                                     const std::string& data_mode = "copy");
// Binds data_mode= (copy|reference) into `set`: train's and val's key for data=PATH.
void BindDataModeKey(OptionSet& set, std::string* data_mode);
// Prints `doc` as the process's JSON document on stdout (core DumpJson: never
// throws on invalid UTF-8). Emit and Fail print through it; a command that
// builds its own document (an error with a report) calls it directly.
void PrintJsonDocument(const nlohmann::json& doc);
// Whether a JSON document was printed on stdout already (so the last-resort
// error paths below never add a second one).
bool JsonDocumentPrinted();

// This program (/proc/self/exe) and kestrel-torch, the LibTorch half of
// kestrel, beside it (docs/ARCHITECTURE.md "Two programs"): the `kestrel`
// front execv's it for torch_commands.h, a worker starts attempts with it.
struct ProgramPaths {
  std::string self;
  std::string torch;  // in self's folder; it may not exist
};
// kIoError naming /proc/self/exe when this program's path cannot be read.
Result<ProgramPaths> ThisProgramAndTorch();

// Last-resort error handling (main.cc). An exception that escaped a command:
// "error: internal error: <what>" on stderr and, with --json when no document
// was printed yet, the JSON error document; returns kExitFailure.
[[nodiscard]] int FailInternal(const Context& ctx, const std::string& what);
// std::set_terminate handler for exceptions that escape a thread (or any
// other std::terminate): reports like FailInternal (`json`: the --json
// mode) and ends the process with _exit(1), never abort() (exit 134).
void InstallTerminateHandler(bool json);

// Subcommand registration; each adds its commands under `app`.
void AddDatasetCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel train` (only built with LibTorch, KESTREL_WITH_TORCH).
void AddTrainCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel export` (docs/export.md; only with LibTorch).
void AddExportCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel dataset audit` (app/dataset_audit.h; only with LibTorch).
void AddDatasetAuditCommand(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel dataset select pool=DIR` (app/dataset_select.h; only with LibTorch).
void AddDatasetSelectCommand(CLI::App& app, Context& ctx, int* exit_code);
// val (always), predict and compare (with LibTorch).
void AddEvalCommands(CLI::App& app, Context& ctx, int* exit_code);
// submit, worker, jobs list|show|logs|cancel|retry, stats, breaker reset
// (torch-free; docs/jobs.md).
void AddJobCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel jobs samples ID [--epoch E]` under `jobs` (app/job_media.h).
void AddJobSamplesCommand(CLI::App& jobs, Context& ctx, int* exit_code);
// `kestrel jobs rename|tag|note ID ...` under `jobs` (app/job_labels.h).
void AddJobLabelCommands(CLI::App& jobs, Context& ctx, int* exit_code);
// `kestrel gc` and `kestrel du` (torch-free; docs/disk.md).
void AddDiskCommands(CLI::App& app, Context& ctx, int* exit_code);
// The worker's success hook `then`, followed by the job's checkpoint
// retention (its keep_ckpts, app::ApplyJobRetention); failures are logged.
std::function<void(store::MetadataStore&, const store::JobRecord&, int64_t)> WithCheckpointRetention(
    std::function<void(store::MetadataStore&, const store::JobRecord&, int64_t)> then,
    const std::string& home);
// `kestrel webhooks add|list|remove|test` (docs/webhooks.md).
void AddWebhookCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel models list|show|tag|untag|promote|delete|register` (docs/models.md).
void AddModelRegistryCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel template save|show|list|diff` (docs/templates.md).
void AddTemplateCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel tune` and tune show|best|stop|list (tune_cmd.cc; docs/tune.md).
void AddTuneCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel serve`: the HTTP API (docs/server.md).
void AddServeCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel token create|list|revoke`: the server's API tokens (docs/server.md "Auth").
void AddTokenCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel evaluations list|show|images|confusion|compare` (evaluations_cmd.cc, app/evaluations.h).
void AddEvaluationCommands(CLI::App& app, Context& ctx, int* exit_code);
// The worker's success hook: what the job's kind registers
// (app::RegisterSucceededJob: a training job's model, blobs under `home`);
// failures are logged, never fatal to the worker.
std::function<void(store::MetadataStore&, const store::JobRecord&, int64_t)> JobModelRegistrar(
    const std::string& home);
// A weights argument (model=, pretrained=, compare's models): an existing
// file stays a path; a model reference (NAME@vN, NAME@TAG, id prefix)
// becomes its hash-verified blob path, with one line saying which model.
Status ResolveWeightsOption(const Context& ctx, std::string* weights);

}  // namespace kestrel::cli
