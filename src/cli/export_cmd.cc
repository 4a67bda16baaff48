// `kestrel export`: a model written as ONNX and verified (OpenCV DNN against
// LibTorch) before it is reported (docs/export.md). Built only with LibTorch;
// this file includes no torch header. The use case is app::ExportModel
// (app_run/export.h), its keys app::ExportKeys (app/export_keys.h, shared
// with `kestrel submit kind=export`); --json prints its one JSON view, plus "registry": the
// export's record on the model when model= named a registered one
// (app::ModelRegistry::RecordExport), else null. RunExportAttempt is the
// export kind's attempt runner (`export --job ID --attempt N`).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "app/export_keys.h"
#include "app/job_kinds.h"
#include "app/models.h"
#include "app_run/export.h"
#include "cli/cli.h"
#include "cli/job_child.h"
#include "cli/torch_commands.h"
#include "core/failure_of.h"
#include "data/registry.h"

namespace kestrel::cli {
namespace {

// The registry record of an export of `model`, from ExportResultJson's view.
// Idempotent per file (ModelRegistry::RecordExport): a retried export job's
// second record of the same file updates the first (*created false).
Result<store::ModelExportRecord> RecordExport(const Context& ctx, const store::ModelRecord& model,
                                              const nlohmann::json& doc, bool* created) {
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  app::ModelRegistry reg(*stores.meta, *stores.blobs, Env::Default());
  app::ExportRecordRequest req;
  req.path = doc.at("path").get<std::string>();
  req.format = doc.at("format").get<std::string>();
  for (const char* key : {"imgsz", "batch", "opset", "dynamic", "half", "int8", "nms"})
    req.options[key] = doc.at(key);
  req.options["simplify"] = doc.at("simplify").at("enabled");  // simplify=true|false
  req.verification = doc.at("verification");
  req.verified = req.verification.at("verified").get<bool>();
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  return reg.RecordExport(model, req, now_ms, created);
}

// Where RunExport reports: the command's (Fail/Emit on this process) or,
// for `export --job`, the job child's (reason line, exit code, result line).
struct ExportReport {
  std::function<int(const Status&)> fail;
  std::function<int(const std::string& text, const nlohmann::json& doc)> done;
  bool job = false;
};

void RunExport(Context& ctx, int* exit_code, const app::ExportKeys& keys, const ExportReport& report) {
  Result<app::ExportRequest> parsed = keys.Request();
  if (!parsed.IsOk()) {
    *exit_code = report.fail(parsed.GetStatus());
    return;
  }
  app::ExportRequest& req = *parsed;
  // data= may be a dataset path: imported (or its version reused) first, as
  // for `val` (int8=true calibrates on it).
  // (A job's data= was resolved to its version at submit.)
  if (!req.data.empty() && !report.job) {
    auto stores = OpenStores(ctx);
    if (!stores.IsOk()) {
      *exit_code = report.fail(stores.GetStatus());
      return;
    }
    if (!ResolveDataOption(ctx, *stores, &req.data, nullptr, exit_code)) return;
  }
  // int8=true: calibration images of data= from the stores (app_run/calibration.h).
  const app::ExportCalibrationLoader calibrate = [&ctx](const std::string& data, int count, double fraction,
                                                        int h, int w) -> Result<app::CalibrationSet> {
    KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
    return app::LoadCalibrationImages(*stores.meta, *stores.blobs, data, count, fraction, h, w);
  };
  // A registered model (model=NAME@vN, NAME@TAG, id prefix) is remembered so
  // the export is recorded on it; a plain weights file gets no record. It is
  // resolved first: its dataset version is data='s default (the mAP check).
  Result<Stores> stores = OpenStores(ctx);
  if (!stores.IsOk()) {
    *exit_code = report.fail(stores.GetStatus());
    return;
  }
  app::ModelRegistry registry(*stores->meta, *stores->blobs, Env::Default());
  Result<app::ResolvedWeights> resolved = registry.ResolveWeights(req.model);
  if (!resolved.IsOk()) {
    *exit_code = report.fail(resolved.GetStatus());
    return;
  }
  const std::optional<store::ModelRecord>& registered = resolved->model;
  if (registered) {
    (ctx.json ? std::cerr : std::cout)
        << "model " << registered->name << "@v" << registered->seq << " (" << registered->id.substr(0, 12)
        << "): " << resolved->path << std::endl;
  }
  std::string map_note;  // why a registered model's dataset is not checked
  // Its dataset version: the file's class names when the weights record
  // none, int8's calibration set when data= is empty.
  if (registered && !registered->dataset_version.empty()) {
    req.model_data = registered->dataset + "@" + registered->dataset_version;
  }
  // The file says which registered model (and dataset version) it came from.
  if (registered) {
    req.provenance["model"] = registered->name + "@v" + std::to_string(registered->seq);
    req.provenance["model_id"] = registered->id;
    if (!registered->dataset_version.empty()) {
      req.provenance["dataset"] = registered->dataset;
      req.provenance["dataset_version_id"] = registered->dataset_version;
    }
  }
  if (req.data.empty() && registered && !registered->dataset_version.empty()) {
    if (req.dynamic || req.imgsz_h == req.imgsz_w) {
      req.data = registered->dataset + "@" + registered->dataset_version;
    } else {
      map_note =
          "mAP not checked: a non-square fixed imgsz (the check letterboxes into a square; give "
          "dynamic=true or a square imgsz)\n";
    }
  }
  app::ExportMapSource map;
  map.load = [&stores](const std::string& data) {
    return app::LoadSplit(*stores->meta, *stores->blobs, data, "val");
  };
  map.blobs = stores->blobs.get();
  map.names = [&stores](const std::string& data) -> Result<app::DatasetClassNames> {
    data::Registry datasets(*stores->meta, *stores->blobs);
    KESTREL_ASSIGN_OR_RETURN(data::VersionView v, datasets.Load(data));
    return app::DatasetClassNames{v.record.dataset + "@v" + std::to_string(v.record.seq), v.manifest.names};
  };
  auto r = app::ExportModel(
      Env::Default(), req,
      [&resolved](std::string* weights) -> Status {
        *weights = resolved->path;
        return {};
      },
      calibrate, map);
  if (!r.IsOk()) {
    *exit_code = report.fail(r.GetStatus());
    return;
  }
  nlohmann::json doc = app::ExportResultJson(*r);
  std::string text = app::ExportResultText(*r) + map_note;
  doc["registry"] = nullptr;
  if (!registered) {
    text += "not a registered model: the export is not recorded in the registry\n";
  } else {
    bool created = true;
    Result<store::ModelExportRecord> rec = RecordExport(ctx, *registered, doc, &created);
    if (!rec.IsOk()) {
      *exit_code = report.fail(
          Status(rec.GetStatus().Code(),
                 r->path + " was written but its registry record failed: " + rec.GetStatus().Message(),
                 rec.GetStatus().Where()));
      return;
    }
    const std::string ref = registered->name + "@v" + std::to_string(registered->seq);
    doc["registry"] = {
        {"model", ref}, {"model_id", registered->id}, {"export_id", rec->id}, {"created", created}};
    text += "recorded on model " + ref + " (export " + rec->id.substr(0, 12) +
            (created ? ")\n" : ": this file's earlier record, updated)\n");
  }
  *exit_code = report.done(text, doc);
}

// `kestrel export --job ID --attempt N`: the child a worker runs for an export
// job (docs/jobs.md "Job kinds"). It applies the stored export keys, writes
// $KESTREL_HOME/jobs/<id>/<model>.onnx — the same path for every attempt, so
// a retry after a crash exports again and the verified temp file is renamed
// over whatever an earlier attempt left — verifies it and records it on the
// registered model exactly as `kestrel export` does, then ends with `result
// {"kind": "export", "model", "path", "format", "verified", "max_abs_diff",
// "max_abs_diff_boxes", "max_abs_diff_scores", "max_rel_diff_boxes",
// "tolerance", "bytes", "verification", "registry", "attempt"}`. A line
// `stage=export elapsed_s=N` every 10 s keeps the supervisor's hang timer
// from taking a long verification for a hung child.
Result<app::AttemptResult> RunExportAttempt(Context& ctx, app::AttemptContext& a) {
  app::ExportKeys keys;
  {
    OptionSet set;
    keys.Bind(set);
    KESTREL_RETURN_IF_ERROR(a.ApplyConfig(set));
  }
  a.meta.reset();  // RunExport opens its own stores
  std::string stem = std::filesystem::path(keys.r.model).filename().replace_extension().string();
  std::replace(stem.begin(), stem.end(), '@', '_');
  if (stem.empty()) stem = "model";
  keys.r.output = JoinPath(a.JobDir(), stem + ".onnx");
  KESTREL_RETURN_IF_ERROR(Env::Default().CreateDirs(a.JobDir()));
  a.Progress("stage=export model=" + keys.r.model);
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::thread ticker([&] {
    std::unique_lock<std::mutex> l(mu);
    for (int elapsed = 10; !cv.wait_for(l, std::chrono::seconds(10), [&] { return finished; });
         elapsed += 10) {
      a.Progress("stage=export elapsed_s=" + std::to_string(elapsed));
    }
  });
  Context abs_ctx = ctx;
  abs_ctx.home = a.home;
  ExportReport report;
  report.job = true;
  Status failed;
  app::AttemptResult result;
  report.fail = [&failed](const Status& why) {
    failed = why;
    return 1;
  };
  report.done = [&](const std::string& text, const nlohmann::json& doc) {
    const nlohmann::json& v = doc.at("verification");
    result.model = keys.r.model;
    result.path = doc.at("path").get<std::string>();
    result.verified = v.at("verified").get<bool>();
    result.details = {{"format", doc.at("format")},
                      {"max_abs_diff", v.at("max_abs_diff")},
                      {"max_abs_diff_boxes", v.at("max_abs_diff_boxes")},
                      {"max_abs_diff_scores", v.at("max_abs_diff_scores")},
                      {"max_rel_diff_boxes", v.at("max_rel_diff_boxes")},
                      {"tolerance", v.at("tolerance")},
                      {"bytes", doc.at("bytes")},
                      {"verification", v},
                      {"registry", doc.at("registry")}};
    (ctx.json ? std::cerr : std::cout) << text;
    return 0;
  };
  int exit_code = 0;
  RunExport(abs_ctx, &exit_code, keys, report);
  {
    std::lock_guard<std::mutex> l(mu);
    finished = true;
  }
  cv.notify_all();
  ticker.join();
  if (!failed.IsOk()) return failed;
  if (exit_code != 0) return Status::Internal("the export ended with exit code " + std::to_string(exit_code));
  return result;
}

}  // namespace

void AddExportCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct ExportState {
    app::ExportKeys opts;  // the schema shared with export jobs (app/export_keys.h)
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto st = std::make_shared<ExportState>();
  st->opts.Bind(st->set);
  CLI::App* cmd = app.add_subcommand(kExportCommand.name, kExportCommand.help);
  cmd->add_option("key=value", st->extras, "e.g. model=best.safetensors format=onnx imgsz=640");
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->footer(kJobAttemptHelp);
  // This program runs export jobs' attempts (`export --job ID --attempt N`, job_child.h).
  (void)app::JobKinds().SetRunner("export",
                                  [&ctx](app::AttemptContext& a) { return RunExportAttempt(ctx, a); });
  cmd->callback([&ctx, exit_code, st] {
    Status s = ApplyOptions(st->set, st->flags, st->extras);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    ExportReport report;
    report.fail = [&ctx](const Status& why) { return Fail(ctx, why); };
    report.done = [&ctx](const std::string& text, const nlohmann::json& doc) { return Emit(ctx, text, doc); };
    RunExport(ctx, exit_code, st->opts, report);
  });
}

}  // namespace kestrel::cli
