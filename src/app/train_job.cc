#include "app/train_job.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <vector>

#include "app/job_checkpoints.h"
#include "app/metric_events.h"
#include "app/train_run.h"
#include "core/env.h"
#include "core/failure_of.h"
#include "core/json.h"
#include "core/options.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"
#include "train/trainer.h"

namespace kestrel::app {

nlohmann::json TrainSummaryJson(const train::TrainSummary& s) {
  // Unvalidated epochs have no metrics: null, never a measured-looking 0.
  auto metric = [&s](double v) { return s.validated ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : s.history) {
    epochs.push_back({{"epoch", e.epoch},
                      {"box", e.box},
                      {"cls", e.cls},
                      {"dfl", e.dfl},
                      {"precision", metric(e.precision)},
                      {"recall", metric(e.recall)},
                      {"map50", metric(e.map50)},
                      {"map50_95", metric(e.map5095)},
                      {"seconds", e.seconds}});
  }
  nlohmann::json best = {{"epoch", s.best_epoch},
                         {"fitness", s.best_fitness},
                         {"map50", metric(s.best_map50)},
                         {"map50_95", metric(s.best_map5095)}};
  if (!s.validated) best["chosen_by"] = "lowest train loss (not validated: " + s.not_validated + ")";
  return {{"ok", s.ExitCode() == 0},
          {"exit_reason", train::ExitReasonName(s.reason)},
          {"message", s.message},
          {"run_dir", s.run_dir},
          {"epochs_completed", s.epochs_completed},
          {"validated", s.validated},
          {"warnings", s.warnings},
          {"best", std::move(best)},
          {"weights",
           {{"best", s.run_dir + "/weights/best.safetensors"},
            {"last", s.run_dir + "/weights/last.safetensors"},
            {"checkpoint", s.run_dir + "/weights/last.ckpt"}}},
          {"rollbacks", s.rollbacks},
          {"nonfinite_iterations", s.nonfinite_iterations},
          {"images_per_second", s.images_per_second},
          {"device", s.device},
          {"amp", s.amp},
          {"batch", s.batch},
          {"oom_retries", s.oom_retries},
          {"micro_batch", s.micro_batch},
          {"epochs", epochs}};
}

Result<AttemptResult> RunTrainAttempt(AttemptContext& ctx) {
  const int64_t job_id = ctx.job_id, attempt = ctx.attempt;
  const std::string& home = ctx.home;
  auto progress = [&ctx](const std::string& line) { ctx.Progress(line); };
  std::ostream& out = ctx.Out();
  auto fail = [](FailureReason failure, const Status& why) -> Status { return why.WithReason(failure); };
  // Live metrics (docs/server.md "Event kinds"): the epochs the job has
  // already reported (a resumed attempt reports only the missing ones), then
  // a writer with its own connection, so training never waits on the store.
  // Metrics are best effort: a store that cannot answer here costs at most a
  // re-reported epoch, which the series route de-duplicates.
  std::set<int> reported;
  if (auto r = ReportedEpochs(*ctx.meta, job_id); r.IsOk()) reported = std::move(r).Value();
  // On a shared artifact store (S3) the newest recorded checkpoint of an
  // earlier attempt is fetched before the resume scan below (which then
  // finds it where this host's own would be), and each epoch's checkpoint is
  // uploaded and recorded (app/job_checkpoints.h). It takes ctx.meta.
  KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<CheckpointUploader> shared,
                           ShareCheckpoints(ctx, Env::Default(), out));
  ctx.meta.reset();  // the trainer opens its own; nothing else needs it
  const std::string url = store::MetadataUrl(home);
  MetricEventWriter events([url] { return store::MetadataStore::Open(url); }, job_id, attempt,
                           [] { return Env::Default().UnixMillis(); });
  // Whatever way this function returns, what is queued gets a few seconds
  // to reach the store (well inside the worker's stop grace).
  struct FinishEvents {
    MetricEventWriter& w;
    ~FinishEvents() { w.Finish(3000); }
  } finish_events{events};

  // Options from the stored effective config (the train keys; the job keys are the spec's).
  train::TrainOptions opts;
  {
    OptionSet set;
    opts.Bind(set);
    KESTREL_RETURN_IF_ERROR(ctx.ApplyConfig(set));
  }
  opts.home = home;
  // Each attempt runs in its own folder, which is the process's working
  // directory: run_dir "." is what the checkpoint stores, so a later attempt
  // that resumes from it writes into *its* folder, never an older one
  // (fencing: a stale attempt and the current one never share files).
  const std::string job_dir = ctx.JobDir();
  const std::string run_dir = ctx.AttemptDir();
  Env& env = Env::Default();
  Status made = env.CreateDirs(run_dir);
  if (!made.IsOk()) return fail(FailureReason::kIoError, made);
  if (::chdir(run_dir.c_str()) != 0)
    return fail(FailureReason::kIoError, Status::IoError("cannot enter " + run_dir));
  opts.run_dir = ".";
  opts.exist_ok = true;
  opts.resume.clear();
  // Earlier attempts' checkpoints, newest first.
  std::vector<std::string> checkpoints;
  for (int64_t k = attempt - 1; k >= 1; --k) {
    std::string c = JoinPath(JoinPath(job_dir, "attempt-" + std::to_string(k)), "weights/last.ckpt");
    if (env.Stat(c).is_regular) checkpoints.push_back(c);
  }

  if (ctx.io != nullptr && ctx.io->before_training) ctx.io->before_training();
  train::TrainHooks hooks;
  hooks.stop = ctx.io != nullptr ? ctx.io->stop : nullptr;
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
      progress("stage=train epoch=" + std::to_string(epoch) + " iter=" + std::to_string(it + 1) +
               " total=" + std::to_string(total));
    }
  };
  hooks.on_phase_progress = [&](const train::PhaseProgress& p) {
    if (!due(p.phase == train::Phase::kSetup || p.done == 0 || p.done == p.total)) return;
    const std::string count = std::to_string(p.done) + "/" + std::to_string(p.total);
    switch (p.phase) {
      case train::Phase::kSetup:
        progress("stage=data setup=" + count + (p.step.empty() ? "" : " step=" + std::string(p.step)));
        break;
      case train::Phase::kVal:
        progress("stage=eval epoch=" + std::to_string(p.epoch) + " val=" + count);
        break;
      case train::Phase::kPlots:
        progress("stage=eval plots=" + count);
        break;
    }
  };
  // The run's wall seconds up to the epoch being posted: results.csv's
  // cumulative `time` (train/progress.h), continued over restored epochs.
  double run_seconds = 0;
  auto post_epoch = [&](const train::EpochRecord& e) {
    EpochMetrics m;
    m.epoch = e.epoch;
    m.box = e.box;
    m.cls = e.cls;
    m.dfl = e.dfl;
    m.precision = e.precision;
    m.recall = e.recall;
    m.map50 = e.map50;
    m.map5095 = e.map5095;
    m.val_box = e.val_box;
    m.val_cls = e.val_cls;
    m.val_dfl = e.val_dfl;
    m.lr = e.lr;
    m.time = run_seconds;
    nlohmann::json payload = EpochMetricsPayload(m);
    if (!opts.val) {
      // Nothing was validated: no metric or val-loss series, rather than
      // zeros a chart would draw as measurements.
      for (const char* k : {"metrics/precision(B)", "metrics/recall(B)", "metrics/mAP50(B)",
                            "metrics/mAP50-95(B)", "val/box_loss", "val/cls_loss", "val/dfl_loss"})
        payload["values"].erase(k);
    }
    events.Post(kMetricEventKind, payload, /*droppable=*/false);
    reported.insert(e.epoch);
  };
  hooks.on_resumed = [&](const std::vector<train::EpochRecord>& restored) {
    for (const auto& e : restored) {
      run_seconds += e.seconds;
      if (reported.count(e.epoch) == 0) post_epoch(e);
    }
  };
  // A loss sample and a progress event about once a second (and at the end
  // of every epoch): bounded, and fresh enough for a live chart.
  auto last_sample = std::chrono::steady_clock::now() - std::chrono::seconds(10);
  hooks.on_iteration_report = [&](const train::IterationReport& it) {
    const auto now = std::chrono::steady_clock::now();
    if (it.batch != it.batches && now - last_sample < std::chrono::seconds(1)) return;
    last_sample = now;
    if (it.finite) {
      events.Post(kMetricEventKind,
                  StepMetricsPayload({it.epoch, it.iteration + 1, it.loss[0], it.loss[1], it.loss[2]}),
                  /*droppable=*/true);
    }
    events.Post(kProgressEventKind,
                ProgressPayload({it.epoch, it.epochs, it.batch, it.batches, it.iteration + 1,
                                 it.total_iterations, it.it_per_s, it.eta_s}),
                /*droppable=*/true);
  };
  // A CUDA out-of-memory the trainer absorbed (halved micro-batch): a job
  // event, kept under backlog, and a progress line for the log.
  hooks.on_oom = [&](const train::OomReport& o) {
    events.Post("oom",
                nlohmann::json{{"epoch", o.epoch},
                               {"iteration", o.iteration + 1},
                               {"batch", o.batch},
                               {"micro_batch_from", o.from},
                               {"micro_batch_to", o.to},
                               {"message", o.message}},
                /*droppable=*/false);
    progress("stage=train oom iteration=" + std::to_string(o.iteration + 1) +
             " micro_batch=" + std::to_string(o.to));
  };
  hooks.on_epoch = [&](const train::EpochRecord& e) {
    run_seconds += e.seconds;
    post_epoch(e);
    if (shared) {
      Status s = shared->AfterEpoch(e.epoch);
      if (!s.IsOk())
        out << "job " << job_id << " attempt " << attempt << ": epoch " << e.epoch
            << "'s checkpoint not shared: " << s.ToString() << std::endl;
    }
    progress("stage=train epoch=" + std::to_string(e.epoch) + " done " +
             (opts.val ? "map50=" + std::to_string(e.map50) + " map50_95=" + std::to_string(e.map5095)
                       : std::string("not_validated")));
  };

  Result<train::TrainSummary> r = Status::Internal("not run");
  bool tried = false;
  for (const auto& c : checkpoints) {
    opts.resume = c;
    // The checkpoint's best epoch may be an earlier attempt's: its weights
    // come along, so the trainer's final validation of weights/best.* (and
    // a run that never beats that epoch) finds them in this attempt's folder.
    const std::string from_best =
        JoinPath(std::filesystem::path(c).parent_path().string(), "best.safetensors");
    const std::string own_best = JoinPath(JoinPath(run_dir, "weights"), "best.safetensors");
    bool carried = false;
    if (env.Stat(from_best).is_regular && !env.Stat(own_best).is_regular) {
      auto bytes = env.ReadFile(from_best);
      Status copied = bytes.IsOk() ? env.CreateDirs(JoinPath(run_dir, "weights")) : bytes.GetStatus();
      if (copied.IsOk()) copied = env.WriteFileAtomic(own_best, *bytes);
      if (!copied.IsOk()) return fail(FailureReason::kIoError, copied);
      carried = true;
    }
    out << "job " << job_id << " attempt " << attempt << ": resuming from " << c << std::endl;
    progress("stage=data resume=" + c);
    r = RunTraining(opts, hooks);
    tried = true;
    // A corrupted checkpoint is refused before anything runs: fall back to
    // the next older one rather than to scratch.
    if (r.IsOk() || r.GetStatus().Code() != StatusCode::kCorruption) break;
    out << "checkpoint " << c << " refused: " << r.GetStatus().ToString() << std::endl;
    if (carried) (void)env.RemoveFile(own_best);  // not the best of the next (older) checkpoint; best effort
  }
  if (!tried || (!r.IsOk() && r.GetStatus().Code() == StatusCode::kCorruption && !checkpoints.empty())) {
    if (tried) out << "no usable checkpoint left; starting from scratch" << std::endl;
    opts.resume.clear();
    // Checked at submit too; the file may have gone or changed since. A bad
    // weights file is the job's config, named by its key, not a dataset error.
    Status files = opts.ValidateFiles();
    if (!files.IsOk()) return fail(FailureReason::kBadConfig, files);
    progress("stage=data");
    r = RunTraining(opts, hooks);
  }
  if (!r.IsOk()) return fail(FailureReasonOf(r.GetStatus()), r.GetStatus());
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
  AttemptResult o;
  o.best = best;
  o.last = JoinPath(weights, "last.safetensors");
  o.checkpoint = JoinPath(weights, "last.ckpt");
  o.validated = sum.validated;
  o.run_dir = run_dir;
  o.details = {{"best_epoch", best_epoch},
               {"epochs", sum.epochs_completed},
               {"exit_reason", train::ExitReasonName(sum.reason)}};
  // An unvalidated run has no mAP: the result carries none (the gate and
  // the model registry read its absence, docs/jobs.md).
  if (sum.validated) {
    o.map50 = map50;
    o.map50_95 = map5095;
  } else {
    o.not_validated = sum.not_validated;
  }
  if (!sum.warnings.empty()) o.details["warnings"] = sum.warnings;
  if (!note.empty()) o.details["note"] = note;
  out << "job " << job_id << " attempt " << attempt << ": " << sum.message;
  if (sum.validated) {
    out << "; best mAP50 " << map50;
  } else {
    out << "; not validated (" << sum.not_validated << ")";
  }
  out << std::endl;
  return o;
}

}  // namespace kestrel::app
