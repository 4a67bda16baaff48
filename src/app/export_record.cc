#include "app/export_record.h"

#include "app/calibration.h"
#include "app/datasets.h"
#include "app/evaluate.h"
#include "app/models.h"
#include "core/env.h"

namespace kestrel::app {
namespace {

// The registry record of an export of `model`, from the typed result.
// Idempotent per file (ModelRegistry::RecordExport): a retried export job's
// second record of the same file updates the first (*created false).
Result<store::ModelExportRecord> RecordExport(Env& env, ModelRegistry& reg, const store::ModelRecord& model,
                                              const ExportResult& r, bool* created) {
  ExportRecordRequest req;
  req.path = r.path;
  req.format = r.format;
  req.options = ExportOptionsJson(r);
  req.verified = r.verified;
  req.verification = ExportVerificationJson(r);
  return reg.RecordExport(model, req, env.UnixMillis(), created);
}

}  // namespace

Result<RegisteredExport> ExportAndRecord(
    Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs, ExportRequest req,
    const std::function<void(const store::ModelRecord& model, const std::string& weights)>& on_resolved) {
  // int8=true: calibration images of data= from the stores (app/calibration.h).
  const ExportCalibrationLoader calibrate = [&meta, &blobs](const std::string& data, int count,
                                                            double fraction, int h,
                                                            int w) -> Result<CalibrationSet> {
    return LoadCalibrationImages(meta, blobs, data, count, fraction, h, w);
  };
  // A registered model (model=NAME@vN, NAME@TAG, id prefix) is remembered so
  // the export is recorded on it; a plain weights file gets no record. It is
  // resolved first: its dataset version is data='s default (the mAP check).
  ModelRegistry registry(meta, blobs, env);
  KESTREL_ASSIGN_OR_RETURN(ResolvedWeights resolved, registry.ResolveWeights(req.model));
  RegisteredExport out;
  out.registered = resolved.model;
  const std::optional<store::ModelRecord>& registered = out.registered;
  if (registered && on_resolved) on_resolved(*registered, resolved.path);
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
  ExportMapSource map;
  map.load = [&meta, &blobs](const std::string& data) { return LoadSplit(meta, blobs, data, "val"); };
  map.blobs = &blobs;
  map.names = [&meta, &blobs](const std::string& data) -> Result<DatasetClassNames> {
    KESTREL_ASSIGN_OR_RETURN(data::VersionView v, Datasets(meta, blobs).Show(data));
    return DatasetClassNames{v.record.dataset + "@v" + std::to_string(v.record.seq), v.manifest.names};
  };
  KESTREL_ASSIGN_OR_RETURN(out.result, ExportModel(
                                           env, req,
                                           [&resolved](std::string* weights) -> Status {
                                             *weights = resolved.path;
                                             return {};
                                           },
                                           calibrate, map));
  const ExportResult& r = out.result;
  out.doc = ExportResultJson(r);
  out.text = ExportResultText(r) + map_note;
  if (!registered) {
    out.doc["registry"] = nullptr;
    out.text += "not a registered model: the export is not recorded in the registry\n";
    return out;
  }
  bool created = true;
  Result<store::ModelExportRecord> rec = RecordExport(env, registry, *registered, r, &created);
  if (!rec.IsOk()) {
    return Status(rec.GetStatus().Code(),
                  r.path + " was written but its registry record failed: " + rec.GetStatus().Message(),
                  rec.GetStatus().Where());
  }
  out.record = std::move(*rec);
  out.record_created = created;
  const std::string ref = registered->name + "@v" + std::to_string(registered->seq);
  out.doc["registry"] = ExportRegistryJson(out);
  out.text += "recorded on model " + ref + " (export " + out.record->id.substr(0, 12) +
              (created ? ")\n" : ": this file's earlier record, updated)\n");
  return out;
}

std::string ResolvedModelText(const store::ModelRecord& m, const std::string& weights) {
  return "model " + m.name + "@v" + std::to_string(m.seq) + " (" + m.id.substr(0, 12) + "): " + weights;
}

nlohmann::json ExportRegistryJson(const RegisteredExport& e) {
  if (!e.registered || !e.record) return nullptr;
  return {{"model", e.registered->name + "@v" + std::to_string(e.registered->seq)},
          {"model_id", e.registered->id},
          {"export_id", e.record->id},
          {"created", e.record_created}};
}

}  // namespace kestrel::app
