#include "app/job_runners.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "app/evaluate.h"
#include "app/export_keys.h"
#include "app/export_record.h"
#include "app/train_job.h"
#include "app/val_keys.h"
#include "core/thread_annotations.h"
#include "store/artifact_store.h"

namespace kestrel::app {

Result<AttemptResult> RunValAttempt(AttemptContext& ctx) {
  ValKeys o;
  {
    OptionSet set;
    o.Bind(set);
    KESTREL_RETURN_IF_ERROR(ctx.ApplyConfig(set));
  }
  // Runs a model, never files of the submitting machine; the run folder is the attempt's.
  o.predictions.clear();
  if (o.model.empty())
    return Status::InvalidArgument("the job names no model=", {"", 0, "model"})
        .WithReason(FailureReason::kBadConfig);
  KESTREL_ASSIGN_OR_RETURN(auto blobs, store::OpenArtifactStore(ctx.home));
  ctx.Progress("stage=eval model=" + o.model);
  KESTREL_ASSIGN_OR_RETURN(ValRun run, EvaluateModel(Env::Default(), *ctx.meta, *blobs, o, ctx.AttemptDir()));
  const eval::EvalResult& r = run.result;
  AttemptResult result;
  result.model = o.model;
  result.map50 = r.map50;
  result.map50_95 = r.map5095;
  result.run_dir = run.dir;
  result.details = {{"data", o.data},
                    {"split", o.split},
                    {"images", r.images},
                    {"instances", r.instances},
                    {"precision", r.precision},
                    {"recall", r.recall},
                    {"fitness", r.fitness},
                    {"record_sha", run.record_sha},
                    {"record_path", run.record_path}};
  ctx.Out() << run.text;
  return result;
}

Result<AttemptResult> RunExportAttempt(AttemptContext& ctx) {
  ExportKeys keys;
  {
    OptionSet set;
    keys.Bind(set);
    KESTREL_RETURN_IF_ERROR(ctx.ApplyConfig(set));
  }
  std::string stem = std::filesystem::path(keys.r.model).filename().replace_extension().string();
  std::replace(stem.begin(), stem.end(), '@', '_');
  if (stem.empty()) stem = "model";
  keys.r.output = JoinPath(ctx.JobDir(), stem + ".onnx");
  // A job's data= was resolved to its version at submit.
  KESTREL_ASSIGN_OR_RETURN(ExportRequest req, keys.Request());
  KESTREL_RETURN_IF_ERROR(Env::Default().CreateDirs(ctx.JobDir()));
  KESTREL_ASSIGN_OR_RETURN(auto blobs, store::OpenArtifactStore(ctx.home));
  ctx.Progress("stage=export model=" + keys.r.model);
  // A progress line every 10 s while the export runs (the supervisor's hang
  // detection reads them), until `finished`.
  struct Ticker {
    Mutex mu;
    CondVar cv;
    bool finished GUARDED_BY(mu) = false;
  } tick;
  std::thread ticker([&] {
    constexpr std::chrono::seconds kEvery{10};
    auto next = std::chrono::steady_clock::now() + kEvery;
    MutexLock l(tick.mu);
    for (int elapsed = 10; !tick.finished;) {
      if (tick.cv.WaitUntil(tick.mu, next)) continue;  // notified (or spurious): look again
      ctx.Progress("stage=export elapsed_s=" + std::to_string(elapsed));
      elapsed += 10;
      next += kEvery;
    }
  });
  std::ostream& out = ctx.Out();
  Result<RegisteredExport> e =
      ExportAndRecord(Env::Default(), *ctx.meta, *blobs, std::move(req),
                      [&out](const store::ModelRecord& m, const std::string& weights) {
                        out << ResolvedModelText(m, weights) << std::endl;
                      });
  {
    MutexLock l(tick.mu);
    tick.finished = true;
  }
  tick.cv.SignalAll();
  ticker.join();
  if (!e.IsOk()) return e.GetStatus();
  // The typed record, never its JSON view read back (STYLE.md 16).
  const ExportResult& r = e->result;
  AttemptResult result;
  result.model = keys.r.model;
  result.path = r.path;
  result.verified = r.verified;
  result.details = {{"format", r.format},
                    {"max_abs_diff", r.max_abs_diff},
                    {"max_abs_diff_boxes", r.max_abs_diff_boxes},
                    {"max_abs_diff_scores", r.max_abs_diff_scores},
                    {"max_rel_diff_boxes", r.max_rel_diff_boxes},
                    {"tolerance", r.tolerance},
                    {"bytes", r.bytes},
                    {"verification", ExportVerificationJson(r)},
                    {"registry", ExportRegistryJson(*e)}};
  out << e->text;
  return result;
}

std::vector<KindRunner> BuiltinKindRunners() {
  return {{"train", RunTrainAttempt}, {"val", RunValAttempt}, {"export", RunExportAttempt}};
}

}  // namespace kestrel::app
