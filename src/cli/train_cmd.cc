// `kestrel train key=value ...`: binds TrainOptions, installs the SIGTERM /
// SIGINT handlers that raise the trainer's stop flag, runs train::Train and
// prints the summary (text, or one JSON document with --json).
//
// `kestrel train --job ID --attempt N` is the child a worker supervises:
// app::RunJobAttempt (app_run/train_job.h) trains the stored job in
// $KESTREL_HOME/jobs/<id>/attempt-<n>/, resuming from the newest checkpoint an
// earlier attempt left; this file connects it to the progress fd
// (KESTREL_PROGRESS_FD: progress lines, `reason=<token>` on failure,
// `result {json}` at the end) and the signal handlers. Exit codes: the one
// table in core/failure.h.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>

#include "app_run/train_job.h"
#include "cli/cli.h"
#include "cli/job_child.h"
#include "cli/torch_commands.h"
#include "core/failure.h"
#include "core/json.h"
#include "model/device.h"
#include "train/trainer.h"

namespace kestrel::cli {
namespace {

std::atomic<bool> g_stop_requested{false};

extern "C" void OnStopSignal(int /*sig*/) { g_stop_requested.store(true); }

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

// ---- train --job

// The attempt itself is the application layer's (app_run/train_job.h); this
// adapter owns the process: the progress fd (job_child.h's ProgressPipe, as
// `val --job` uses it), the signal handlers, stdout.
int RunJob(Context& ctx, int64_t job_id, int64_t attempt) {
  ProgressPipe progress;
  app::AttemptIo io;
  io.progress = [&progress](const std::string& line) { progress.Line(line); };
  // Human output; with --json it goes to stderr and stdout gets one document.
  io.out = ctx.json ? &std::cerr : &std::cout;
  io.stop = &g_stop_requested;
  io.before_training = InstallStopHandlers;
  const app::AttemptOutcome o = app::RunJobAttempt(ctx.home, job_id, attempt, io);
  if (o.failure != FailureReason::kNone) {
    std::cerr << "error: job " << job_id << " attempt " << attempt << ": " << o.error.ToString() << std::endl;
  }
  if (ctx.json) PrintJsonDocument(app::AttemptOutcomeJson(job_id, attempt, o));
  return o.exit_code;
}

}  // namespace

void AddTrainCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct TrainState {
    train::TrainOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
    int64_t job = 0;
    int64_t attempt = 0;
  };
  auto st = std::make_shared<TrainState>();
  st->opts.Bind(st->set);
  CLI::App* cmd = app.add_subcommand(kTrainCommand.name, kTrainCommand.help);
  cmd->add_option("key=value", st->extras,
                  "options Ultralytics-style, e.g. data=shapes model=n epochs=10 imgsz=320");
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->add_option("--job", st->job,
                  "run this queued job's attempt (what `kestrel worker` starts; docs/jobs.md)")
      ->check(IntArg(1));
  cmd->add_option("--attempt", st->attempt, "the attempt number the worker claimed (with --job)")
      ->check(IntArg(1));
  cmd->callback([&ctx, exit_code, st] {
    if (st->job > 0 || st->attempt > 0) {
      if (st->job <= 0 || st->attempt <= 0 || !st->extras.empty() || !st->flags.empty()) {
        *exit_code =
            Fail(ctx, Status::InvalidArgument("--job ID --attempt N go together and take no other options",
                                              {"command line", 0, "job"}));
        return;
      }
      *exit_code = RunJob(ctx, st->job, st->attempt);
      return;
    }
    Status s = ApplyOptions(st->set, st->flags, st->extras);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    // pretrained= may name a registered model (NAME@vN, NAME@TAG, id prefix).
    s = ResolveWeightsOption(ctx, &st->opts.pretrained);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    // The checks `kestrel submit` makes, with the same messages and exit 2.
    // With resume= the checkpoint's stored config wins: only the file counts.
    if (st->opts.resume.empty()) {
      s = st->opts.Validate();
      if (s.IsOk()) s = st->opts.ValidateFiles();
      // Whether this machine has the device (submit cannot know: a worker may).
      if (s.IsOk()) s = model::ResolveDevice(st->opts.device).GetStatus();
    } else {
      train::TrainConfig only_resume;
      only_resume.resume = st->opts.resume;
      s = only_resume.ValidateFiles();
    }
    if (!s.IsOk()) {
      *exit_code =
          Fail(ctx, Status::InvalidArgument(s.Message(), {"command line", 0, s.Where().field}), kExitUsage);
      return;
    }
    st->opts.home = ctx.home;
    // data= may be a dataset path: imported (or its version reused) first.
    nlohmann::json data_info;
    if (st->opts.resume.empty()) {
      auto stores = OpenStores(ctx);
      if (!stores.IsOk()) {
        *exit_code = Fail(ctx, stores.GetStatus());
        return;
      }
      if (!ResolveDataOption(ctx, *stores, &st->opts.data, &data_info, exit_code)) return;
    }
    InstallStopHandlers();
    train::TrainHooks hooks;
    hooks.stop = &g_stop_requested;
    // Human output goes to stderr with --json so stdout stays one document.
    hooks.out = ctx.json ? &std::cerr : &std::cout;
    hooks.tty = !ctx.json && isatty(STDOUT_FILENO) != 0;
    auto r = train::Train(st->opts, hooks);
    if (!r.IsOk()) {
      *exit_code = Fail(ctx, r.GetStatus());
      return;
    }
    const train::TrainSummary& sum = *r;
    std::string text = std::string("\n") + train::ExitReasonName(sum.reason) + ": " + sum.message + "\n" +
                       "run directory: " + sum.run_dir + "\n";
    if (sum.validated) {
      text += "best epoch " + std::to_string(sum.best_epoch) + ": mAP50 " + std::to_string(sum.best_map50) +
              ", mAP50-95 " + std::to_string(sum.best_map5095) + "\n";
    } else {
      // No mAP was measured: never print one (docs/training.md "val=false").
      text += "best epoch: not validated (" + sum.not_validated +
              "); best.safetensors is the epoch with the "
              "lowest train loss (" +
              std::to_string(sum.best_epoch) + "), last.safetensors the final weights\n";
    }
    for (const auto& w : sum.warnings) text += "warning: " + w + "\n";
    text += "weights: " + sum.run_dir + "/weights/best.safetensors, " + sum.run_dir +
            "/weights/last.safetensors (resume: " + sum.run_dir + "/weights/last.ckpt)\n";
    nlohmann::json doc = app::TrainSummaryJson(sum);
    if (!data_info.is_null()) doc["data"] = data_info;
    Emit(ctx, text, doc);
    *exit_code = sum.ExitCode();
  });
}

}  // namespace kestrel::cli
