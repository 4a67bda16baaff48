// kestrel: the command-line entry point. Thin: it parses global flags, sets
// process-wide state (logging, codec log level) and dispatches to the
// subcommand modules.
#include <CLI/CLI.hpp>

#include <malloc.h>

#include <cstdlib>
#include <iostream>

#include "cli/cli.h"
#include "core/log.h"
#include "data/image.h"
#include "store/artifact_store.h"

#ifndef KESTREL_VERSION
#define KESTREL_VERSION "dev"
#endif

int main(int argc, char** argv) {
  using namespace kestrel;
  // Image pipelines allocate and free ~1 MB buffers per image; with glibc's
  // adaptive mmap threshold each one becomes an mmap + page faults + munmap.
  // Keeping them on the heap made the loader ~2x faster (docs/data-pipeline.md).
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  cli::Context ctx;
  ctx.home = store::KestrelHome();
  int exit_code = cli::kExitOk;

  CLI::App app{"kestrel: train object detectors reliably"};
  app.set_version_flag("--version", KESTREL_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  app.add_flag("--json", ctx.json, "print one JSON document on stdout");
  app.add_option("--log-level", ctx.log_level, "trace, debug, info, warn, error, off")->capture_default_str();
  app.add_option("--home", ctx.home, "Kestrel home folder (default $KESTREL_HOME or ./.kestrel)");
  cli::AddDatasetCommands(app, ctx, &exit_code);
#ifdef KESTREL_WITH_TORCH
  cli::AddTrainCommands(app, ctx, &exit_code);
#endif
  cli::AddEvalCommands(app, ctx, &exit_code);
  cli::AddJobCommands(app, ctx, &exit_code);
  cli::AddWebhookCommands(app, ctx, &exit_code);

  app.parse_complete_callback([&] {
    Status s = InitLogging(ctx.log_level);
    if (!s.IsOk()) throw CLI::ValidationError("--log-level", s.Message());
    data::QuietImageCodecLogs();
    data::SetImageCodecThreads(0);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? cli::kExitOk : cli::kExitUsage;
  }
  return exit_code;
}
