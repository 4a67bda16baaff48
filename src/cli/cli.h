// Shared plumbing for the `kestrel` subcommands: global flags, exit codes,
// printing a result as text or as one JSON document, and the bridge that
// exposes every typed option both as `--dashed-flag VALUE` and as
// Ultralytics-style `key=value`.
#pragma once

#include <CLI/CLI.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/options.h"
#include "core/status.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::cli {

// Documented in README "Exit codes".
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the operation failed (bad data, I/O, ...)
inline constexpr int kExitUsage = 2;    // bad command line or options

struct Context {
  bool json = false;           // print one JSON document on stdout
  std::string home;            // Kestrel home (KESTREL_HOME or ./.kestrel)
  std::string log_level = "info";
};

// Values given as --flags, keyed by option key (only those the user set).
using FlagValues = std::map<std::string, std::string>;

// Adds `--key-with-dashes` for every key of `set` (bools become flags).
void AddOptionFlags(CLI::App* cmd, const OptionSet& set, FlagValues* values);
// Applies --flags, then the `key=value` extras the command was given.
// Anything in `extras` that is not key=value is a usage error.
Status ApplyOptions(OptionSet& set, const FlagValues& values, const std::vector<std::string>& extras);

struct Stores {
  std::unique_ptr<store::MetadataStore> meta;
  std::unique_ptr<store::ArtifactStore> blobs;
};
Result<Stores> OpenStores(const Context& ctx);

// Prints `text` (human mode) or `json` (with --json) on stdout; returns 0.
int Emit(const Context& ctx, const std::string& text, const nlohmann::json& json);
// Prints the error on stderr (and {"ok": false, "error": ...} on stdout with
// --json); returns kExitUsage for kInvalidArgument errors located on the
// command line, else kExitFailure.
int Fail(const Context& ctx, const Status& status, int exit_code = -1);

// Subcommand registration; each adds its commands under `app`.
void AddDatasetCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel train` (only built with LibTorch, KESTREL_WITH_TORCH).
void AddTrainCommands(CLI::App& app, Context& ctx, int* exit_code);
// val (always), predict and compare (with LibTorch).
void AddEvalCommands(CLI::App& app, Context& ctx, int* exit_code);
// submit, worker, jobs list|show|logs|cancel|retry, stats, breaker reset
// (torch-free; docs/jobs.md).
void AddJobCommands(CLI::App& app, Context& ctx, int* exit_code);
// `kestrel webhooks add|list|remove|test` (docs/webhooks.md).
void AddWebhookCommands(CLI::App& app, Context& ctx, int* exit_code);

}  // namespace kestrel::cli
