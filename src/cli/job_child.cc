#include "cli/job_child.h"

#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>

#include "app/job_kinds.h"
#include "core/log.h"
#include "core/parse.h"
#include "data/image.h"

namespace kestrel::cli {
namespace {

std::atomic<bool> g_attempt_stop{false};

extern "C" void OnAttemptStop(int /*sig*/) { g_attempt_stop.store(true); }

// Armed by a runner right before its long work (AttemptIo::before_training):
// a signal before that still ends the process as a default one does.
void InstallAttemptStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnAttemptStop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

// The command word (the first argument that is not an option or a global
// option's value) and whether --job / --attempt follow it.
std::string AttemptKind(int argc, char** argv) {
  std::string word;
  for (int i = 1; i < argc; ++i) {
    const std::string tok = argv[i];
    if (tok == "--") break;
    if (word.empty()) {
      if (tok == "--home" || tok == "--log-level") {
        ++i;
        continue;
      }
      if (!tok.empty() && tok[0] == '-') continue;
      word = tok;
      if (app::JobKinds().Find(word) == nullptr) return "";
      continue;
    }
    if (tok == "--job" || tok == "--attempt" || tok.rfind("--job=", 0) == 0 ||
        tok.rfind("--attempt=", 0) == 0)
      return word;
  }
  return "";
}

}  // namespace

ProgressPipe::ProgressPipe() {
  const char* v = std::getenv("KESTREL_PROGRESS_FD");
  if (v != nullptr && *v != '\0') {
    auto fd = ParseInt64(v, {"", 0, "KESTREL_PROGRESS_FD"}, 0, std::numeric_limits<int>::max());
    fd_ = fd.IsOk() ? static_cast<int>(*fd) : -1;
  }
  if (fd_ >= 0) signal(SIGPIPE, SIG_IGN);
}

void ProgressPipe::Line(const std::string& line) {
  if (fd_ < 0) return;
  std::string buf = line + "\n";
  const char* p = buf.data();
  size_t left = buf.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

bool IsJobAttemptCommandLine(int argc, char** argv) { return !AttemptKind(argc, argv).empty(); }

int RunJobAttemptCommand(Context& ctx, int argc, char** argv) {
  const std::string kind = AttemptKind(argc, argv);
  int64_t job = 0, attempt = 0;
  CLI::App app{"kestrel: a job attempt"};
  app.require_subcommand(1);
  app.fallthrough();
  app.add_flag("--json", ctx.json, "print one JSON document on stdout");
  app.add_option("--log-level", ctx.log_level, "trace, debug, info, warn, error, off");
  app.add_option("--home", ctx.home, "Kestrel home folder");
  CLI::App* cmd = app.add_subcommand(kind, "run an attempt of a " + kind + " job");
  cmd->add_option("--job", job, "the job")->required()->check(IntArg(1));
  cmd->add_option("--attempt", attempt, "the attempt number the worker claimed")
      ->required()
      ->check(IntArg(1));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return Fail(ctx,
                Status::InvalidArgument(
                    std::string(e.what()) + " (a job attempt is --job ID --attempt N and no other options)",
                    {"command line", 0, "job"}),
                kExitUsage);
  }
  if (Status s = InitLogging(ctx.log_level); !s.IsOk())
    return Fail(ctx, Status::InvalidArgument(s.Message(), {"command line", 0, "log-level"}), kExitUsage);
  data::QuietImageCodecLogs();
  data::SetImageCodecThreads(0);
  ProgressPipe progress;
  app::AttemptIo io;
  io.progress = [&progress](const std::string& line) { progress.Line(line); };
  // Human output; with --json it goes to stderr and stdout gets one document.
  io.out = ctx.json ? &std::cerr : &std::cout;
  io.stop = &g_attempt_stop;
  io.before_training = InstallAttemptStopHandlers;
  const app::AttemptOutcome o = app::RunAttempt(app::JobKinds(), kind, ctx.home, job, attempt, io);
  if (o.failure != FailureReason::kNone)
    std::cerr << "error: job " << job << " attempt " << attempt << ": " << o.error.ToString() << std::endl;
  if (ctx.json) PrintJsonDocument(app::AttemptOutcomeJson(job, attempt, o));
  return o.exit_code;
}

}  // namespace kestrel::cli
