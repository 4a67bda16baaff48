// `kestrel train key=value ...`: binds TrainOptions, installs the SIGTERM /
// SIGINT handlers that raise the trainer's stop flag, runs train::Train and
// prints the summary (text, or one JSON document with --json).
//
// `kestrel train --job ID --attempt N` is the child a worker supervises:
// job_child.h's one attempt command runs the train kind's runner,
// app::RunTrainAttempt (app_run/train_job.h, set by main()), which trains the
// stored job in $KESTREL_HOME/jobs/<id>/attempt-<n>/, resuming from the
// newest checkpoint an earlier attempt left. Exit codes: the one table in
// core/failure.h.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>

#include "app_run/train_job.h"
#include "cli/cli.h"
#include "cli/job_child.h"
#include "cli/torch_commands.h"
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

}  // namespace

void AddTrainCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct TrainState {
    train::TrainOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto st = std::make_shared<TrainState>();
  st->opts.Bind(st->set);
  CLI::App* cmd = app.add_subcommand(kTrainCommand.name, kTrainCommand.help);
  cmd->add_option("key=value", st->extras,
                  "options Ultralytics-style, e.g. data=shapes model=n epochs=10 imgsz=320");
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->footer(kJobAttemptHelp);
  cmd->callback([&ctx, exit_code, st] {
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
