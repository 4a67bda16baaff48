// `kestrel train key=value ...`: binds TrainOptions, installs the SIGTERM /
// SIGINT handlers that raise the trainer's stop flag, runs train::Train and
// prints the summary (text, or one JSON document with --json).
//
// `kestrel train --job ID --attempt N` is the child a worker supervises: it
// trains the stored job in $KESTREL_HOME/jobs/<id>/attempt-<n>/, resuming
// from the newest checkpoint an earlier attempt left, and reports on the
// progress fd (KESTREL_PROGRESS_FD): progress lines, `reason=<token>` on
// failure, `result {json}` at the end. Exit codes: the one table in
// core/failure.h.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>

#include "cli/cli.h"
#include "core/json.h"
#include "core/parse.h"
#include "core/failure.h"
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

// ---- train --job

// Writes whole lines to the progress fd (nothing when there is none).
class ProgressPipe {
 public:
  ProgressPipe() {
    const char* v = std::getenv("KESTREL_PROGRESS_FD");
    if (v != nullptr && *v != '\0') {
      auto fd = ParseInt64(v, {"", 0, "KESTREL_PROGRESS_FD"}, 0, std::numeric_limits<int>::max());
      fd_ = fd.IsOk() ? static_cast<int>(*fd) : -1;
    }
    if (fd_ >= 0) signal(SIGPIPE, SIG_IGN);  // a gone supervisor must not kill the run
  }
  void Line(const std::string& line) {
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

 private:
  int fd_ = -1;
};

// The failure reason of a setup error from Train(): the subcode set where the
// error started (the loader's unreadable-images limit, a torch OOM, no CUDA),
// else what its status code says. Never read from the message.
FailureReason TrainErrorReason(const Status& s) {
  if (s.Reason() != FailureReason::kNone) return s.Reason();
  switch (s.Code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      return FailureReason::kBadConfig;
    case StatusCode::kCorruption:
      // A corrupted resume checkpoint never gets here (RunJob falls back to
      // an older one, then to scratch): this is a stored dataset blob.
      return FailureReason::kDatasetErrors;
    case StatusCode::kIoError:
    case StatusCode::kResourceExhausted:
      return FailureReason::kIoError;
    default:
      return FailureReason::kError;
  }
}

int RunJob(Context& ctx, int64_t job_id, int64_t attempt) {
  ProgressPipe progress;
  // Human output; with --json it goes to stderr and stdout gets one document.
  std::ostream& out = ctx.json ? std::cerr : std::cout;
  auto fail = [&](FailureReason failure, const Status& why) {
    const int code = ExitCodeFor(failure);
    const std::string reason = FailureReasonToken(failure);
    progress.Line("reason=" + reason);
    std::cerr << "error: job " << job_id << " attempt " << attempt << ": " << why.ToString() << std::endl;
    if (ctx.json) {
      const auto& w = why.Where();
      PrintJsonDocument({{"ok", false},
                         {"job_id", job_id},
                         {"attempt", attempt},
                         {"reason", reason},
                         {"error",
                          {{"code", code == kExitUsage ? "usage" : StatusCodeName(why.Code())},
                           {"message", why.Message()},
                           {"file", w.file},
                           {"line", w.line},
                           {"field", w.field}}}});
    }
    return code;
  };
  progress.Line("stage=data job=" + std::to_string(job_id) + " attempt=" + std::to_string(attempt));
  const std::string home = std::filesystem::absolute(ctx.home).lexically_normal().string();
  Context abs_ctx = ctx;
  abs_ctx.home = home;
  auto stores = OpenStores(abs_ctx);
  if (!stores.IsOk()) return fail(FailureReason::kStoreUnavailable, stores.GetStatus());
  auto job = stores->meta->GetJob(job_id);
  if (!job.IsOk()) {
    if (job.GetStatus().Code() == StatusCode::kNotFound) return fail(FailureReason::kBadConfig, job.GetStatus());
    return fail(FailureReason::kStoreUnavailable, job.GetStatus());
  }
  if (job->attempt != attempt || job->state != store::JobState::kRunning) {
    return fail(FailureReason::kLeaseLost,
                Status::Aborted("attempt " + std::to_string(attempt) + " is not current (job is " +
                                store::JobStateName(job->state) + " at attempt " + std::to_string(job->attempt) + ")"));
  }
  stores->meta.reset();  // the trainer opens its own; nothing else needs it

  // Options from the stored effective config (job-level keys removed).
  train::TrainOptions opts;
  {
    OptionSet set;
    opts.Bind(set);
    auto cfg = nlohmann::json::parse(job->spec.config_json, nullptr, false);
    if (!cfg.is_object()) {
      return fail(FailureReason::kBadConfig, Status::InvalidArgument("stored config is not a JSON object"));
    }
    cfg.erase("min_map50");
    Status s = set.ApplyJson(cfg, "job " + std::to_string(job_id) + " config");
    if (!s.IsOk()) return fail(FailureReason::kBadConfig, s);
  }
  opts.home = home;
  // Each attempt runs in its own folder, which is the child's working
  // directory: run_dir "." is what the checkpoint stores, so a later attempt
  // that resumes from it writes into *its* folder, never an older one
  // (fencing: a stale attempt and the current one never share files).
  const std::string job_dir = JoinPath(JoinPath(home, "jobs"), std::to_string(job_id));
  const std::string run_dir = JoinPath(job_dir, "attempt-" + std::to_string(attempt));
  Env& env = Env::Default();
  Status made = env.CreateDirs(run_dir);
  if (!made.IsOk()) return fail(FailureReason::kIoError, made);
  if (::chdir(run_dir.c_str()) != 0) return fail(FailureReason::kIoError, Status::IoError("cannot enter " + run_dir));
  opts.run_dir = ".";
  opts.exist_ok = true;
  opts.resume.clear();
  // Earlier attempts' checkpoints, newest first.
  std::vector<std::string> checkpoints;
  for (int64_t k = attempt - 1; k >= 1; --k) {
    std::string c = JoinPath(JoinPath(job_dir, "attempt-" + std::to_string(k)), "weights/last.ckpt");
    if (env.Stat(c).is_regular) checkpoints.push_back(c);
  }

  InstallStopHandlers();
  train::TrainHooks hooks;
  hooks.stop = &g_stop_requested;
  hooks.out = &out;
  // Every line resets the supervisor's hang timer, so each phase that can
  // outlast it reports as it advances; at most 4 lines a second, plus the
  // first and last of each phase and every setup step (few, and the step a
  // hung child was in is what `last progress:` should name).
  auto last_line = std::chrono::steady_clock::now() - std::chrono::seconds(10);
  auto due = [&](bool always) {
    auto now = std::chrono::steady_clock::now();
    if (!always && now - last_line < std::chrono::milliseconds(250)) return false;
    last_line = now;
    return true;
  };
  hooks.on_iteration = [&](int epoch, int64_t it, int64_t total) {
    const int64_t per_epoch = opts.epochs > 0 ? std::max<int64_t>(1, total / opts.epochs) : total;
    const bool epoch_end = (it + 1) % per_epoch == 0;
    if (due(epoch_end)) {
      progress.Line("stage=train epoch=" + std::to_string(epoch) + " iter=" + std::to_string(it + 1) +
                    " total=" + std::to_string(total));
    }
  };
  hooks.on_phase_progress = [&](const train::PhaseProgress& p) {
    if (!due(p.phase == train::Phase::kSetup || p.done == 0 || p.done == p.total)) return;
    const std::string count = std::to_string(p.done) + "/" + std::to_string(p.total);
    switch (p.phase) {
      case train::Phase::kSetup:
        progress.Line("stage=data setup=" + count + (p.step.empty() ? "" : " step=" + std::string(p.step)));
        break;
      case train::Phase::kVal:
        progress.Line("stage=eval epoch=" + std::to_string(p.epoch) + " val=" + count);
        break;
      case train::Phase::kPlots:
        progress.Line("stage=eval plots=" + count);
        break;
    }
  };
  hooks.on_epoch = [&](const train::EpochRecord& e) {
    progress.Line("stage=train epoch=" + std::to_string(e.epoch) + " done map50=" + std::to_string(e.map50) +
                  " map50_95=" + std::to_string(e.map5095));
  };

  Result<train::TrainSummary> r = Status::Internal("not run");
  bool tried = false;
  for (const auto& c : checkpoints) {
    opts.resume = c;
    out << "job " << job_id << " attempt " << attempt << ": resuming from " << c << std::endl;
    progress.Line("stage=data resume=" + c);
    r = train::Train(opts, hooks);
    tried = true;
    // A corrupted checkpoint is refused before anything runs: fall back to
    // the next older one rather than to scratch.
    if (r.IsOk() || r.GetStatus().Code() != StatusCode::kCorruption) break;
    out << "checkpoint " << c << " refused: " << r.GetStatus().ToString() << std::endl;
  }
  if (!tried || (!r.IsOk() && r.GetStatus().Code() == StatusCode::kCorruption && !checkpoints.empty())) {
    if (tried) out << "no usable checkpoint left; starting from scratch" << std::endl;
    opts.resume.clear();
    // Checked at submit too; the file may have gone or changed since. A bad
    // weights file is the job's config, named by its key, not a dataset error.
    Status files = opts.ValidateFiles();
    if (!files.IsOk()) return fail(FailureReason::kBadConfig, files);
    progress.Line("stage=data");
    r = train::Train(opts, hooks);
  }
  if (!r.IsOk()) return fail(TrainErrorReason(r.GetStatus()), r.GetStatus());
  const train::TrainSummary& sum = *r;
  // diverged (4), stopped (8: checkpoint written), halted (error, 1).
  if (sum.Failure() != FailureReason::kNone) return fail(sum.Failure(), Status::Aborted(sum.message));
  // A resumed attempt that never improved on the best epoch has no best.*
  // of its own: carry the newest earlier one over, so the result's files
  // all live under this attempt.
  const std::string weights = JoinPath(run_dir, "weights");
  const std::string best = JoinPath(weights, "best.safetensors");
  double map50 = sum.best_map50, map5095 = sum.best_map5095;
  int best_epoch = sum.best_epoch;
  std::string note;
  auto copy = [&](const std::string& from) {
    auto bytes = env.ReadFile(from);
    return bytes.IsOk() ? env.WriteFileAtomic(best, *bytes) : bytes.GetStatus();
  };
  if (!env.Stat(best).is_regular) {
    bool found = false;
    for (int64_t k = attempt - 1; k >= 1 && !found; --k) {
      std::string b = JoinPath(JoinPath(job_dir, "attempt-" + std::to_string(k)), "weights/best.safetensors");
      if (!env.Stat(b).is_regular) continue;
      Status w = copy(b);
      if (!w.IsOk()) return fail(FailureReason::kIoError, w);
      found = true;
    }
    // The trainer writes last.ckpt before best.*: a kill in between leaves a
    // checkpoint that names a best epoch whose weights were never written.
    // Commit the last epoch's weights with the last epoch's metrics instead
    // (the gate then judges the model that is actually there).
    if (!found && env.Stat(JoinPath(weights, "last.safetensors")).is_regular) {
      Status w = copy(JoinPath(weights, "last.safetensors"));
      if (!w.IsOk()) return fail(FailureReason::kIoError, w);
      if (!sum.history.empty()) {
        map50 = sum.history.back().map50;
        map5095 = sum.history.back().map5095;
        best_epoch = sum.history.back().epoch;
      }
      note = "the best epoch's weights were lost in a crash; best = the last epoch";
      out << "job " << job_id << " attempt " << attempt << ": " << note << std::endl;
    }
  }
  nlohmann::json result = {{"best", best},
                           {"last", JoinPath(weights, "last.safetensors")},
                           {"checkpoint", JoinPath(weights, "last.ckpt")},
                           {"map50", map50},
                           {"map50_95", map5095},
                           {"best_epoch", best_epoch},
                           {"epochs", sum.epochs_completed},
                           {"run_dir", run_dir},
                           {"attempt", attempt},
                           {"exit_reason", train::ExitReasonName(sum.reason)}};
  if (!note.empty()) result["note"] = note;
  progress.Line("result " + DumpJson(result));
  out << "job " << job_id << " attempt " << attempt << ": " << sum.message << "; best mAP50 " << sum.best_map50
      << std::endl;
  if (ctx.json) PrintJsonDocument({{"ok", true}, {"job_id", job_id}, {"result", result}});
  return kTrainExitOk;
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
  CLI::App* cmd = app.add_subcommand("train", "Train a YOLOv8 detector on a registry dataset (docs/training.md)");
  cmd->add_option("key=value", st->extras, "options Ultralytics-style, e.g. data=shapes model=n epochs=10 imgsz=320");
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->add_option("--job", st->job, "run this queued job's attempt (what `kestrel worker` starts; docs/jobs.md)")
      ->check(IntArg(1));
  cmd->add_option("--attempt", st->attempt, "the attempt number the worker claimed (with --job)")->check(IntArg(1));
  cmd->callback([&ctx, exit_code, st] {
    if (st->job > 0 || st->attempt > 0) {
      if (st->job <= 0 || st->attempt <= 0 || !st->extras.empty() || !st->flags.empty()) {
        *exit_code = Fail(ctx, Status::InvalidArgument("--job ID --attempt N go together and take no other options",
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
    } else {
      train::TrainConfig only_resume;
      only_resume.resume = st->opts.resume;
      s = only_resume.ValidateFiles();
    }
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, Status::InvalidArgument(s.Message(), {"command line", 0, s.Where().field}), kExitUsage);
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
                       "run directory: " + sum.run_dir + "\n" +
                       "best epoch " + std::to_string(sum.best_epoch) + ": mAP50 " + std::to_string(sum.best_map50) +
                       ", mAP50-95 " + std::to_string(sum.best_map5095) + "\n" +
                       "weights: " + sum.run_dir + "/weights/best.safetensors, " + sum.run_dir +
                       "/weights/last.safetensors (resume: " + sum.run_dir + "/weights/last.ckpt)\n";
    nlohmann::json doc = SummaryJson(sum);
    if (!data_info.is_null()) doc["data"] = data_info;
    Emit(ctx, text, doc);
    *exit_code = sum.ExitCode();
  });
}

}  // namespace kestrel::cli
