// `kestrel export`: a model written as ONNX and verified (OpenCV DNN against
// LibTorch) before it is reported (docs/export.md). Built only with LibTorch;
// this file includes no torch header. The use case is app::ExportModel
// (app_run/export.h), its keys app::ExportKeys (app/export_keys.h, shared
// with `kestrel submit kind=export`); --json prints its one JSON view, plus "registry": the
// export's record on the model when model= named a registered one
// (app::ModelRegistry::RecordExport), else null.
#include <chrono>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/export_keys.h"
#include "app/models.h"
#include "app_run/export.h"
#include "cli/cli.h"

namespace kestrel::cli {
namespace {

// The registry record of an export of `model`, from ExportResultJson's view.
Result<store::ModelExportRecord> RecordExport(const Context& ctx, const store::ModelRecord& model,
                                              const nlohmann::json& doc) {
  KESTREL_ASSIGN_OR_RETURN(Stores stores, OpenStores(ctx));
  app::ModelRegistry reg(*stores.meta, *stores.blobs, Env::Default());
  app::ExportRecordRequest req;
  req.path = doc.at("path").get<std::string>();
  req.format = doc.at("format").get<std::string>();
  for (const char* key : {"imgsz", "batch", "opset", "dynamic", "half"}) req.options[key] = doc.at(key);
  req.verification = doc.at("verification");
  req.verified = req.verification.at("verified").get<bool>();
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  return reg.RecordExport(model, req, now_ms);
}

void RunExport(Context& ctx, int* exit_code, const app::ExportKeys& keys) {
  Result<app::ExportRequest> parsed = keys.Request();
  if (!parsed.IsOk()) {
    *exit_code = Fail(ctx, parsed.GetStatus());
    return;
  }
  app::ExportRequest& req = *parsed;
  // data= may be a dataset path: imported (or its version reused) first, as
  // for `val` (int8=true calibrates on it).
  if (!req.data.empty()) {
    auto stores = OpenStores(ctx);
    if (!stores.IsOk()) {
      *exit_code = Fail(ctx, stores.GetStatus());
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
    *exit_code = Fail(ctx, stores.GetStatus());
    return;
  }
  app::ModelRegistry registry(*stores->meta, *stores->blobs, Env::Default());
  Result<app::ResolvedWeights> resolved = registry.ResolveWeights(req.model);
  if (!resolved.IsOk()) {
    *exit_code = Fail(ctx, resolved.GetStatus());
    return;
  }
  const std::optional<store::ModelRecord>& registered = resolved->model;
  if (registered) {
    (ctx.json ? std::cerr : std::cout)
        << "model " << registered->name << "@v" << registered->seq << " (" << registered->id.substr(0, 12)
        << "): " << resolved->path << std::endl;
  }
  std::string map_note;  // why a registered model's dataset is not checked
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
  auto r = app::ExportModel(
      Env::Default(), req,
      [&resolved](std::string* weights) -> Status {
        *weights = resolved->path;
        return {};
      },
      calibrate, map);
  if (!r.IsOk()) {
    *exit_code = Fail(ctx, r.GetStatus());
    return;
  }
  nlohmann::json doc = app::ExportResultJson(*r);
  std::string text = app::ExportResultText(*r) + map_note;
  doc["registry"] = nullptr;
  if (!registered) {
    text += "not a registered model: the export is not recorded in the registry\n";
  } else {
    Result<store::ModelExportRecord> rec = RecordExport(ctx, *registered, doc);
    if (!rec.IsOk()) {
      *exit_code = Fail(
          ctx, Status(rec.GetStatus().Code(),
                      r->path + " was written but its registry record failed: " + rec.GetStatus().Message(),
                      rec.GetStatus().Where()));
      return;
    }
    const std::string ref = registered->name + "@v" + std::to_string(registered->seq);
    doc["registry"] = {{"model", ref}, {"model_id", registered->id}, {"export_id", rec->id}};
    text += "recorded on model " + ref + " (export " + rec->id.substr(0, 12) + ")\n";
  }
  *exit_code = Emit(ctx, text, doc);
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
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a model as ONNX, verified in OpenCV DNN and ONNX Runtime against LibTorch");
  cmd->add_option("key=value", st->extras, "e.g. model=best.safetensors format=onnx imgsz=640");
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->callback([&ctx, exit_code, st] {
    Status s = ApplyOptions(st->set, st->flags, st->extras);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    RunExport(ctx, exit_code, st->opts);
  });
}

}  // namespace kestrel::cli
