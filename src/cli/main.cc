// kestrel: the command-line entry point. Thin: it parses global flags, sets
// process-wide state (logging, codec log level) and dispatches to the
// subcommand modules. Built three times: `kestrel-torch` (every command),
// `kestrel` with KESTREL_FORWARD_TORCH (every command that needs no
// LibTorch runs in process; a command line whose command is one of
// torch_commands.h is handed to kestrel-torch beside it by execv, so the
// process, its pid, streams and exit code are kestrel-torch's: `kestrel
// jobs list` starts without loading LibTorch, about 1 s less), and with
// KESTREL_DEPLOY the LibTorch-free `kestrel-deploy` (predict and val of
// ONNX files only).
//
// Whatever happens, the process ends with an exit code below 128 and, with
// --json, exactly one JSON document on stdout: usage errors (CLI11's and the
// unknown-command check below) are reported as {"ok": false, "error":
// {"code": "usage", ...}} with exit 2; an exception that escapes a command is
// an internal error with exit 1 (cli::FailInternal), and one that escapes a
// thread ends the process through the terminate handler with exit 1.
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>

#include "cli/cli.h"
#ifndef KESTREL_DEPLOY
#include "cli/doctor_cmd.h"
#include "cli/job_child.h"
#endif
#if defined(KESTREL_WITH_TORCH) && !defined(KESTREL_FORWARD_TORCH) && !defined(KESTREL_DEPLOY)
#define KESTREL_TORCH_PROGRAM 1
#include "backend_torch/torch_backend.h"
#endif
// KESTREL_FRONT_ONNX: the torch-free `kestrel` with the ONNX backend, for
// `kestrel serve --ls-model` (the Label Studio ML backend runs a verified
// ONNX export in OpenCV DNN, server/api_ls.h).
#if defined(KESTREL_TORCH_PROGRAM) || defined(KESTREL_DEPLOY) || defined(KESTREL_FRONT_ONNX)
#include "app/backends.h"
#include "app/job_kinds.h"
#include "backend_onnx/onnx_backend.h"
#endif
#if defined(KESTREL_TORCH_PROGRAM) || defined(KESTREL_DEPLOY)
#include "backend_video/video_backend.h"
#endif
#include "cli/torch_commands.h"
#ifdef KESTREL_DEPLOY
#include "cli/deploy.h"
#endif
#include "core/log.h"
#include "core/options.h"
#include "core/terminate.h"
#include "core/thread_policy.h"
#include "data/image.h"
#include "store/artifact_store.h"

#ifndef KESTREL_VERSION
#define KESTREL_VERSION "dev"
#endif

namespace kestrel::cli {
namespace {

// --json anywhere on the command line (global flags fall through from
// subcommands), known before CLI11 parses, so even a parse error is JSON.
bool HasJsonFlag(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) break;
    if (std::strcmp(argv[i], "--json") == 0) return true;
  }
  return false;
}

#ifdef KESTREL_FORWARD_TORCH
// The first command word: the first argument that is not an option or a
// global option's value ("" when there is none).
std::string FirstCommandWord(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string tok = argv[i];
    if (tok == "--") break;
    if (tok == "--home" || tok == "--log-level") {
      ++i;  // the global option's value
      continue;
    }
    if (!tok.empty() && tok[0] == '-') continue;
    return tok;
  }
  return "";
}

// The word after the first command word ("" when there is none).
std::string SecondCommandWord(int argc, char** argv) {
  bool first = false;
  for (int i = 1; i < argc; ++i) {
    const std::string tok = argv[i];
    if (tok == "--") break;
    if (tok == "--home" || tok == "--log-level") {
      ++i;
      continue;
    }
    if (!tok.empty() && tok[0] == '-') continue;
    if (first) return tok;
    first = true;
  }
  return "";
}

// A command of torch_commands.h: execv kestrel-torch (beside this program)
// with the same arguments. Returns only when that fails (exit 1, saying why).
int ForwardToTorchProgram(const Context& ctx, int argc, char** argv) {
  auto programs = ThisProgramAndTorch();
  if (programs.IsOk()) {
    std::vector<char*> args(argv, argv + argc);
    args.push_back(nullptr);
    // OpenMP reads its wait policy once, as kestrel-torch loads it: now or
    // never (OMP_WAIT_POLICY=PASSIVE; a user's own OMP_WAIT_POLICY or
    // GOMP_SPINCOUNT is kept).
    ApplyOpenMpEnvDefaults();
    ::execv(programs->torch.c_str(), args.data());
  }
  const std::string why = programs.IsOk() ? programs->torch + ": " + std::strerror(errno)
                                          : "kestrel-torch: " + programs.GetStatus().Message();
  return Fail(ctx, Status::FailedPrecondition("`" + FirstCommandWord(argc, argv) +
                                              "` runs in kestrel-torch (the LibTorch half of kestrel), which "
                                              "could not be started: " +
                                              why));
}
#endif

// The reference framework's task word before the command (`yolo detect
// train ...`): `detect`, the one task Kestrel has, is dropped from argv;
// another task is a usage error naming it. Only the first command word is
// looked at, so a dataset named `pose` (data=pose) is never touched.
Status StripTaskPrefix(int* argc, char** argv) {
  for (int i = 1; i < *argc; ++i) {
    const std::string tok = argv[i];
    if (tok == "--") break;
    if (tok == "--home" || tok == "--log-level") {
      ++i;  // the global option's value (as CheckCommandWords skips it)
      continue;
    }
    if (!tok.empty() && tok[0] == '-') continue;
    if (tok == "detect") {
      for (int j = i; j + 1 < *argc; ++j) argv[j] = argv[j + 1];
      argv[--*argc] = nullptr;
      return {};
    }
    for (const char* task : {"segment", "classify", "pose", "obb"}) {
      if (tok == task) {
        return Status::InvalidArgument(
            "task '" + tok +
                "' is not supported: Kestrel trains and runs object detectors only "
                "(task detect; `kestrel detect train ...` or `kestrel train ...`)",
            {"command line", 0, "task"});
      }
    }
    return {};
  }
  return {};
}

#if defined(KESTREL_TORCH_PROGRAM) || defined(KESTREL_DEPLOY) || defined(KESTREL_FRONT_ONNX)
// The engines this program lends the use cases (app/backends.h):
// kestrel-torch LibTorch (with the runners of the train, val and export
// jobs) and ONNX, kestrel-deploy ONNX only; `kestrel` ONNX only, for
// `kestrel serve --ls-model` (the commands that need LibTorch run in
// kestrel-torch).
Status InstallProgramBackends() {
  app::Backends backends;
#if defined(KESTREL_DEPLOY)
  backends.program = "kestrel-deploy";
#elif !defined(KESTREL_TORCH_PROGRAM)
  backends.program = "kestrel";
#else
  backends.program = "kestrel-torch";
  backend_torch::RegisterTorchBackend(backends);
#endif
  backend_onnx::RegisterOnnxBackend(backends);
#if defined(KESTREL_TORCH_PROGRAM) || defined(KESTREL_DEPLOY)
  // predict's videos, cameras and streams: not in `kestrel` (it hands predict
  // to kestrel-torch), whose every start would load FFmpeg's libraries.
  app::InstallVideoBackend(backend_video::OpenCvVideoBackend());
#endif
  return app::InstallBackends(std::move(backends), app::JobKinds());
}
#endif

std::vector<std::string> CommandNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App* a) { return !a->get_name().empty(); })) {
    names.push_back(sub->get_name());
  }
  return names;
}

// The command words on the command line, checked against the command tree
// before CLI11 parses (CLI11 reports an unknown one as "A subcommand is
// required" or an extra argument, without saying it is not a command).
Status CheckCommandWords(const CLI::App& app, int argc, char** argv) {
  const CLI::App* group = &app;
  std::string path;  // "kestrel dataset"
  bool asked_help = false;
  for (int i = 1; i < argc; ++i) {
    const std::string tok = argv[i];
    if (tok == "--") break;
    if (tok == "--home" || tok == "--log-level") {
      ++i;  // the global option's value (as FirstCommandWord skips it)
      continue;
    }
    if (tok == "-h" || tok == "--help" || tok == "--help-all" || tok == "--version") asked_help = true;
    if (!tok.empty() && tok[0] == '-') continue;
    const std::vector<std::string> names = CommandNames(*group);
    if (names.empty()) return {};  // a command: the rest are its arguments
    // A key=value argument of a group that is also a command (`kestrel tune
    // data=…` beside `tune show`): the command words end here.
    if (tok.find('=') != std::string::npos && group != &app) return {};
    for (const CLI::App* sub :
         group->get_subcommands([&](const CLI::App* a) { return a->get_name() == tok; })) {
      group = sub;
    }
    if (group->get_name() == tok) {
      path += (path.empty() ? "" : " ") + tok;
      continue;
    }
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    std::string msg = "unknown command '" + tok + "'" + (path.empty() ? "" : " for '" + path + "'");
    const std::string hint = ClosestMatch(tok, names);
    if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
    msg += "; commands: " + list;
    return Status::InvalidArgument(msg, {"command line", 0, "command"});
  }
  const std::vector<std::string> names = CommandNames(*group);
  if (!names.empty() && !asked_help && group->get_require_subcommand_min() > 0) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return Status::InvalidArgument(
        "missing command" + (path.empty() ? std::string() : " after '" + path + "'") + "; one of: " + list,
        {"command line", 0, "command"});
  }
  return {};
}

int Run(Context& ctx, int argc, char** argv) {
  int exit_code = kExitOk;
#ifdef KESTREL_DEPLOY
  CLI::App app{"kestrel-deploy: run exported ONNX detectors without LibTorch (docs/deploy.md)"};
#else
  CLI::App app{"kestrel: train object detectors reliably"};
#endif
  app.set_version_flag("--version", KESTREL_VERSION);
  app.require_subcommand(1);
  app.fallthrough();
  app.add_flag("--json", ctx.json, "print one JSON document on stdout");
  app.add_option("--log-level", ctx.log_level, "trace, debug, info, warn, error, off")->capture_default_str();
  app.add_option("--home", ctx.home, "Kestrel home folder (default $KESTREL_HOME or ./.kestrel)");
#ifdef KESTREL_DEPLOY
  AddDeployCommands(app, ctx, &exit_code);
#else
  AddDatasetCommands(app, ctx, &exit_code);
#if defined(KESTREL_FORWARD_TORCH)
  // Listed in the help and known to the command-word check; a command line
  // naming one never gets here (main hands it to kestrel-torch).
  for (const TorchCommand& c : kTorchCommands) app.add_subcommand(c.name, c.help)->allow_extras();
  for (const TorchCommand& c : kTorchDatasetCommands) {
    app.get_subcommand("dataset")->add_subcommand(c.name, c.help)->allow_extras();
  }
#else
#ifdef KESTREL_WITH_TORCH
  AddTrainCommands(app, ctx, &exit_code);
  AddExportCommands(app, ctx, &exit_code);
  AddDatasetAuditCommand(app, ctx, &exit_code);
  AddDatasetSelectCommand(app, ctx, &exit_code);
#endif
  AddEvalCommands(app, ctx, &exit_code);
#endif
  AddJobCommands(app, ctx, &exit_code);
  AddDoctorCommand(app, ctx, &exit_code);
  AddDiskCommands(app, ctx, &exit_code);
  AddWebhookCommands(app, ctx, &exit_code);
  AddModelRegistryCommands(app, ctx, &exit_code);
  AddTemplateCommands(app, ctx, &exit_code);
  AddTuneCommands(app, ctx, &exit_code);
  AddServeCommands(app, ctx, &exit_code);
  AddTokenCommands(app, ctx, &exit_code);
  AddEvaluationCommands(app, ctx, &exit_code);
#endif

  app.parse_complete_callback([&] {
    Status s = InitLogging(ctx.log_level);
    if (!s.IsOk()) throw CLI::ValidationError("--log-level", s.Message());
    data::QuietImageCodecLogs();
    data::SetImageCodecThreads(0);
  });
  // `<kind> --job ID --attempt N`: the one attempt command of every job kind
  // whose runner this program set (job_child.h).
#ifndef KESTREL_DEPLOY
  if (IsJobAttemptCommandLine(argc, argv)) return RunJobAttemptCommand(ctx, argc, argv);
#endif
  Status words = CheckCommandWords(app, argc, argv);
  if (!words.IsOk()) return Fail(ctx, words, kExitUsage);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) {  // --help or --version
      if (!ctx.json) return app.exit(e) == 0 ? kExitOk : kExitUsage;
      std::ostringstream out, err;
      app.exit(e, out, err);
      std::string text = out.str();
      while (!text.empty() && text.back() == '\n') text.pop_back();
      nlohmann::json doc = {{"ok", true}};
      doc[e.get_name() == "CallForVersion" ? "version" : "help"] = text;
      return Emit(ctx, text, doc);
    }
    // CLI11's messages name the option or words ("--name is required",
    // "The following arguments were not expected: x").
    return Fail(ctx, Status::InvalidArgument(e.what(), {"command line", 0, ""}), kExitUsage);
  }
  return exit_code;
}

}  // namespace
}  // namespace kestrel::cli

int main(int argc, char** argv) {
  using namespace kestrel;
  // Image pipelines allocate and free ~1 MB buffers per image; with glibc's
  // adaptive mmap threshold each one becomes an mmap + page faults + munmap.
  // Keeping them on the heap made the loader ~2x faster (docs/data-pipeline.md).
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  cli::Context ctx;
  ctx.json = cli::HasJsonFlag(argc, argv);
  cli::InstallTerminateHandler(ctx.json);
  try {
    if (Status s = cli::StripTaskPrefix(&argc, argv); !s.IsOk()) return cli::Fail(ctx, s, cli::kExitUsage);
#ifdef KESTREL_FORWARD_TORCH
    const std::string command = cli::FirstCommandWord(argc, argv);
    for (const cli::TorchCommand& c : cli::kTorchCommands) {
      if (command == c.name) return cli::ForwardToTorchProgram(ctx, argc, argv);
    }
    if (command == "dataset") {
      const std::string sub = cli::SecondCommandWord(argc, argv);
      for (const cli::TorchCommand& c : cli::kTorchDatasetCommands) {
        if (sub == c.name) return cli::ForwardToTorchProgram(ctx, argc, argv);
      }
    }
#endif
#if defined(KESTREL_TORCH_PROGRAM) || defined(KESTREL_DEPLOY) || defined(KESTREL_FRONT_ONNX)
    // Before any thread starts (app/backends.h).
    if (Status s = cli::InstallProgramBackends(); !s.IsOk()) return cli::FailInternal(ctx, s.Message());
#endif
    ctx.home = store::KestrelHome();
    return cli::Run(ctx, argc, argv);
  } catch (const std::exception& e) {
    return cli::FailInternal(ctx, e.what());
  } catch (...) {
    return cli::FailInternal(ctx, kestrel::DescribeException(std::current_exception()));
  }
}
