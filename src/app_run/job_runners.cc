#include "app_run/job_runners.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "app/export_keys.h"
#include "app/val_keys.h"
#include "app_run/evaluate.h"
#include "app_run/export_record.h"
#include "app_run/train_job.h"
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
  store::ArtifactStore blobs(ctx.home);
  ctx.Progress("stage=eval model=" + o.model);
  KESTREL_ASSIGN_OR_RETURN(ValRun run, EvaluateModel(Env::Default(), *ctx.meta, blobs, o, ctx.AttemptDir()));
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
  ctx.Progress("stage=export model=" + keys.r.model);
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::thread ticker([&] {
    std::unique_lock<std::mutex> l(mu);
    for (int elapsed = 10; !cv.wait_for(l, std::chrono::seconds(10), [&] { return finished; });
         elapsed += 10) {
      ctx.Progress("stage=export elapsed_s=" + std::to_string(elapsed));
    }
  });
  store::ArtifactStore blobs(ctx.home);
  std::ostream& out = ctx.Out();
  Result<RegisteredExport> e =
      ExportAndRecord(Env::Default(), *ctx.meta, blobs, std::move(req),
                      [&out](const store::ModelRecord& m, const std::string& weights) {
                        out << "model " << m.name << "@v" << m.seq << " (" << m.id.substr(0, 12)
                            << "): " << weights << std::endl;
                      });
  {
    std::lock_guard<std::mutex> l(mu);
    finished = true;
  }
  cv.notify_all();
  ticker.join();
  if (!e.IsOk()) return e.GetStatus();
  const nlohmann::json& v = e->doc.at("verification");
  AttemptResult result;
  result.model = keys.r.model;
  result.path = e->result.path;
  result.verified = v.at("verified").get<bool>();
  result.details = {{"format", e->doc.at("format")},
                    {"max_abs_diff", v.at("max_abs_diff")},
                    {"max_abs_diff_boxes", v.at("max_abs_diff_boxes")},
                    {"max_abs_diff_scores", v.at("max_abs_diff_scores")},
                    {"max_rel_diff_boxes", v.at("max_rel_diff_boxes")},
                    {"tolerance", v.at("tolerance")},
                    {"bytes", e->doc.at("bytes")},
                    {"verification", v},
                    {"registry", e->doc.at("registry")}};
  out << e->text;
  return result;
}

Status SetLibTorchRunners(JobKindTable& kinds) {
  KESTREL_RETURN_IF_ERROR(kinds.SetRunner("train", RunTrainAttempt));
  KESTREL_RETURN_IF_ERROR(kinds.SetRunner("val", RunValAttempt));
  return kinds.SetRunner("export", RunExportAttempt);
}

}  // namespace kestrel::app
