// `kestrel train key=value ...`: binds TrainOptions, installs the SIGTERM /
// SIGINT handlers that raise the trainer's stop flag, trains through
// app::RunTraining (app/train_run.h: the program's train backend) and prints
// the summary (text, or one JSON document with --json).
//
// `kestrel train --job ID --attempt N` is the child a worker supervises:
// job_child.h's one attempt command runs the train kind's runner,
// app::RunTrainAttempt (app/train_job.h, set by main()), which trains the
// stored job in $KESTREL_HOME/jobs/<id>/attempt-<n>/, resuming from the
// newest checkpoint an earlier attempt left. Exit codes: the one table in
// core/failure.h.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/fingerprint.h"
#include "app/train_job.h"
#include "app/train_run.h"
#include "cli/cli.h"
#include "cli/job_child.h"
#include "cli/torch_commands.h"
#include "model/device_selftest.h"
#include "model/torch_compat.h"
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

// The checks `kestrel submit` makes, with the same messages, as a usage
// error located on the command line (exit 2). With resume= the
// checkpoint's stored config wins: only the file counts.
Status CheckTrainCommandLine(const train::TrainOptions& o) {
  Status s = train::CheckBeforeStart(o);
  if (s.IsOk()) return s;
  return Status::InvalidArgument(s.Message(), {"command line", 0, s.Where().field});
}

// `kestrel train` after its keys are parsed: pretrained= and data= resolved
// (a registered model, a dataset path imported), the checks, then the one
// call, app::RunTraining (the program's train backend: train::Train), whose
// summary is printed (exit code: its reason's).
CommandResult RunTrain(const Context& ctx, train::TrainOptions& opts, const std::string& data_mode) {
  // resume=true / a bare `resume`: the newest last.ckpt under project.
  auto resume = train::ResolveResume(opts.resume, opts.project);
  if (!resume.IsOk()) {
    return Status::InvalidArgument(resume.GetStatus().Message(), {"command line", 0, "resume"});
  }
  if (*resume != opts.resume && !resume->empty()) {
    (ctx.json ? std::cerr : std::cout) << "resume=" << opts.resume << ": " << *resume << std::endl;
  }
  opts.resume = *resume;
  // pretrained= may name a registered model (NAME@vN, NAME@TAG, id prefix);
  // true/false are the reference's flags (TrainConfig::PretrainedWeights).
  if (!train::IsBoolText(opts.pretrained))
    KESTREL_RETURN_IF_ERROR(ResolveWeightsOption(ctx, &opts.pretrained));
  KESTREL_RETURN_IF_ERROR(CheckTrainCommandLine(opts));
  opts.home = ctx.home;
  // data= may be a dataset path: imported (or its version reused) first.
  nlohmann::json data_info;
  if (opts.resume.empty()) {
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    int exit_code = kExitOk;
    if (!ResolveDataOption(ctx, stores, &opts.data, &data_info, &exit_code, data_mode)) {
      return CommandResult::Reported(exit_code);
    }
  }
  InstallStopHandlers();
  train::TrainHooks hooks;
  hooks.stop = &g_stop_requested;
  // Human output goes to stderr with --json so stdout stays one document.
  hooks.out = ctx.json ? &std::cerr : &std::cout;
  hooks.tty = !ctx.json && isatty(STDOUT_FILENO) != 0;
  KESTREL_ASSIGN_OR_RETURN(train::TrainSummary sum, app::RunTraining(opts, hooks));
  nlohmann::json doc = app::TrainSummaryJson(sum);
  if (!data_info.is_null()) doc["data"] = data_info;
  return Output{app::TrainSummaryText(sum), std::move(doc), sum.ExitCode()};
}

}  // namespace

// `kestrel fingerprint` (kestrel-torch): the host's fingerprint with
// LibTorch's facts merged in (app/fingerprint.h); `kestrel worker` runs it
// at start and records its "fingerprint" object and "hash".
// With --selftest DEVICES it also runs model/device_selftest.h's forward
// and backward pass on each device ("selftest": [{"device", "ok", "ms",
// "error"}]): `kestrel doctor` and a starting worker ask for it.
void AddFingerprintCommand(CLI::App& app, Context& ctx, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(kFingerprintCommand.name, kFingerprintCommand.help);
  auto selftest = std::make_shared<std::string>();
  cmd->add_option("--selftest", *selftest,
                  "also run a tiny forward and backward pass on these devices: auto (cpu and every CUDA "
                  "device) or a list of cpu, cuda:N, gpu:N:MB");
  cmd->callback(Callback(ctx, exit_code, [selftest]() -> CommandResult {
    const model::TorchFacts t = model::ReadTorchFacts();
    const nlohmann::json torch = {
        {"libtorch", t.version},
        {"torch_cuda_build", t.cuda_build.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.cuda_build)},
        {"cudnn", t.cudnn_build.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.cudnn_build)},
        {"cuda_available", t.cuda_available},
        {"cuda_devices", t.cuda_devices},
        {"torch_threads", t.threads}};
    const nlohmann::json f = app::MergeFingerprint(app::HostFingerprint(), torch, "");
    std::string text;
    for (const auto& [k, v] : f.items())
      text += k + ": " + (v.is_string() ? v.get<std::string>() : v.dump()) + "\n";
    text += "hash: " + app::FingerprintHash(f);
    nlohmann::json doc = {{"ok", true}, {"hash", app::FingerprintHash(f)}, {"fingerprint", f}};
    if (!selftest->empty()) {
      const std::vector<std::string> devices = model::SelfTestDevices(*selftest);
      for (const std::string& device : devices) {
        const std::string index = device.rfind("cuda:", 0) == 0 ? device.substr(5) : "";
        if (device != "cpu" && (index.empty() || index.size() > 6 ||
                                index.find_first_not_of("0123456789") != std::string::npos)) {
          return Status::InvalidArgument("--selftest: '" + device.substr(0, 40) +
                                             "' is not a device (auto, or a list of cpu, cuda:N, gpu:N:MB)",
                                         {"command line", 0, "selftest"});
        }
      }
      nlohmann::json runs = nlohmann::json::array();
      for (const std::string& device : devices) {
        const model::DeviceSelfTest r = model::RunDeviceSelfTest(device);
        runs.push_back({{"device", r.device}, {"ok", r.ok}, {"ms", r.ms}, {"error", r.error}});
        text += "\nselftest " + r.device + ": " + (r.ok ? "ok" : "FAILED: " + r.error);
      }
      doc["selftest"] = std::move(runs);
    }
    return Output{text, std::move(doc)};
  }));
}

void AddTrainCommands(CLI::App& app, Context& ctx, int* exit_code) {
  AddFingerprintCommand(app, ctx, exit_code);
  struct TrainState {
    train::TrainOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
    std::string data_mode = "copy";  // how data=PATH is imported; not a training setting
  };
  auto st = std::make_shared<TrainState>();
  st->opts.Bind(st->set);
  BindDataModeKey(st->set, &st->data_mode);
  CLI::App* cmd = app.add_subcommand(kTrainCommand.name, kTrainCommand.help);
  cmd->add_option("key=value", st->extras,
                  "options Ultralytics-style, e.g. data=shapes model=n epochs=10 imgsz=320");
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->footer(kJobAttemptHelp);
  cmd->callback(Callback(ctx, exit_code, [&ctx, st]() -> CommandResult {
    KESTREL_RETURN_IF_ERROR(ApplyOptions(st->set, st->flags, st->extras));
    return RunTrain(ctx, st->opts, st->data_mode);
  }));
}

}  // namespace kestrel::cli
