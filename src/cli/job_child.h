// The one attempt command of every job kind (docs/jobs.md "Job attempts"):
// `kestrel <kind> --job ID --attempt N`, the child a worker supervises. It
// is registered once for the whole job-kind table (app/job_kinds.h): a
// command line whose command word is a kind and which names --job or
// --attempt is parsed here (only the global flags and --job/--attempt) and
// runs app::RunAttempt — the shared preamble, the kind's runner, the
// `reason=` / `result {json}` report — with the progress fd and the
// SIGTERM/SIGINT handlers of this process. A program runs the kinds whose
// runners it set (kestrel-torch: train, val, export).
#pragma once

#include <string>

#include "cli/cli.h"

namespace kestrel::cli {

// Whole lines to the fd named by KESTREL_PROGRESS_FD (nothing without one).
// A gone supervisor never kills the child (SIGPIPE is ignored).
class ProgressPipe {
 public:
  ProgressPipe();
  void Line(const std::string& line);

 private:
  int fd_ = -1;
};

// The footer a kind's command shows in its --help.
inline constexpr const char* kJobAttemptHelp =
    "Job attempt (what `kestrel worker` starts; docs/jobs.md): --job ID --attempt N, and no other "
    "options, runs that attempt of a queued job of this kind.";

// Whether argv is a job attempt: its command word names a kind of
// app::JobKinds() and --job or --attempt follows.
bool IsJobAttemptCommandLine(int argc, char** argv);

// Parses and runs it (exit code of core/failure.h's table; a bad command
// line is a usage error, exit 2). With --json one document on stdout:
// app::AttemptOutcomeJson.
int RunJobAttemptCommand(Context& ctx, int argc, char** argv);

}  // namespace kestrel::cli
