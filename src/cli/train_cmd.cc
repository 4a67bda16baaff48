// `kestrel train key=value ...`: binds TrainOptions, installs the SIGTERM /
// SIGINT handlers that raise the trainer's stop flag, runs train::Train and
// prints the summary (text, or one JSON document with --json).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>

#include "cli/cli.h"
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

nlohmann::json SummaryJson(const train::TrainSummary& s) {
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : s.history) {
    epochs.push_back({{"epoch", e.epoch}, {"box", e.box}, {"cls", e.cls}, {"dfl", e.dfl}, {"precision", e.precision},
                      {"recall", e.recall}, {"map50", e.map50}, {"map50_95", e.map5095}, {"seconds", e.seconds}});
  }
  return {{"ok", s.ExitCode() == 0},
          {"exit_reason", train::ExitReasonName(s.reason)},
          {"message", s.message},
          {"run_dir", s.run_dir},
          {"epochs_completed", s.epochs_completed},
          {"best", {{"epoch", s.best_epoch}, {"fitness", s.best_fitness}, {"map50", s.best_map50}, {"map50_95", s.best_map5095}}},
          {"weights", {{"best", s.run_dir + "/weights/best.safetensors"}, {"last", s.run_dir + "/weights/last.safetensors"},
                       {"checkpoint", s.run_dir + "/weights/last.ckpt"}}},
          {"rollbacks", s.rollbacks},
          {"nonfinite_iterations", s.nonfinite_iterations},
          {"images_per_second", s.images_per_second},
          {"epochs", epochs}};
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
  CLI::App* cmd = app.add_subcommand("train", "Train a YOLOv8 detector on a registry dataset (docs/training.md)");
  cmd->add_option("key=value", st->extras, "options Ultralytics-style, e.g. data=shapes model=n epochs=10 imgsz=320");
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->callback([&ctx, exit_code, st] {
    Status s = ApplyOptions(st->set, st->flags, st->extras);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    st->opts.home = ctx.home;
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
                       "run directory: " + sum.run_dir + "\n" +
                       "best epoch " + std::to_string(sum.best_epoch) + ": mAP50 " + std::to_string(sum.best_map50) +
                       ", mAP50-95 " + std::to_string(sum.best_map5095) + "\n" +
                       "weights: " + sum.run_dir + "/weights/best.safetensors, " + sum.run_dir +
                       "/weights/last.safetensors (resume: " + sum.run_dir + "/weights/last.ckpt)\n";
    Emit(ctx, text, SummaryJson(sum));
    *exit_code = sum.ExitCode();
  });
}

}  // namespace kestrel::cli
