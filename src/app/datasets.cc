#include "app/datasets.h"

#include "data/preview.h"

namespace kestrel::app {

Result<data::ImportResult> Datasets::Import(const std::string& path, const std::string& name,
                                            const data::ImportOptions& opts,
                                            data::ValidationReport* report_out) {
  return registry_.Import(path, name, opts, report_out);
}

Result<DatasetValidation> ValidateDataset(const std::string& path, const data::ImportOptions& opts,
                                          Env& env) {
  KESTREL_ASSIGN_OR_RETURN(auto a, data::AnalyzeDataset(path, opts, env));
  DatasetValidation v;
  v.version_id = data::VersionId(a.manifest);
  v.report = std::move(a.report);
  return v;
}

Result<std::vector<store::DatasetSummary>> Datasets::List() { return meta_.ListDatasets(); }

Result<data::VersionView> Datasets::Show(const std::string& spec) { return registry_.Load(spec); }

Result<DatasetDiff> Datasets::Diff(const std::string& a, const std::string& b) {
  KESTREL_ASSIGN_OR_RETURN(auto va, registry_.Load(a));
  KESTREL_ASSIGN_OR_RETURN(auto vb, registry_.Load(b));
  DatasetDiff d;
  d.diff = data::DiffManifests(va.manifest, vb.manifest);
  d.a = std::move(va.record);
  d.b = std::move(vb.record);
  return d;
}

Result<DatasetExport> Datasets::Export(const std::string& spec, const std::string& format,
                                       const std::string& out) {
  KESTREL_RETURN_IF_ERROR(registry_.Export(spec, format, out));
  return DatasetExport{spec, format, out};
}

Result<DatasetPreview> Datasets::Preview(const PreviewRequest& req) {
  if (Status s = req.augment.Validate(); !s.IsOk()) {
    return Status::InvalidArgument(s.Message(), {"command line", 0, s.Where().field});
  }
  KESTREL_ASSIGN_OR_RETURN(auto v, registry_.Load(req.spec));
  data::LoaderOptions lo = req.loader;
  lo.augment = req.aug;
  lo.shuffle = req.aug;
  lo.batch = req.images;
  KESTREL_RETURN_IF_ERROR(data::WriteAugmentedPreview(
      v.manifest, data::ArtifactImageSource(blobs_), req.augment, lo, v.manifest.names, req.out, req.images));
  return DatasetPreview{req.spec, req.out, req.images, req.aug};
}

nlohmann::json DatasetVersionJson(const store::DatasetVersionRecord& r) {
  return {{"dataset", r.dataset},           {"version", "v" + std::to_string(r.seq)},
          {"version_id", r.version_id},     {"created_at", r.created_at},
          {"num_images", r.num_images},     {"num_boxes", r.num_boxes},
          {"num_classes", r.num_classes},   {"source", r.source},
          {"manifest_sha", r.manifest_sha}, {"report_sha", r.report_sha}};
}

nlohmann::json DatasetSummaryJson(const store::DatasetSummary& s) {
  nlohmann::json j = DatasetVersionJson(s.latest);
  j["num_versions"] = s.num_versions;
  return j;
}

nlohmann::json DatasetImportJson(const data::ImportResult& r) {
  return {{"created", r.created},
          {"version", DatasetVersionJson(r.record)},
          {"report", r.analysis.report.ToJson()}};
}

nlohmann::json DatasetValidationJson(const DatasetValidation& v) {
  return {{"ok", v.Ok()}, {"version_id", v.version_id}, {"report", v.report.ToJson()}};
}

nlohmann::json DatasetShowJson(const data::VersionView& v) {
  return {{"version", DatasetVersionJson(v.record)},
          {"names", v.manifest.names},
          {"summary", nlohmann::json::parse(v.record.summary_json, nullptr, false)},
          {"report", v.report}};
}

nlohmann::json DatasetDiffJson(const DatasetDiff& d) {
  nlohmann::json j = d.diff.ToJson();
  j["a"] = DatasetVersionJson(d.a);
  j["b"] = DatasetVersionJson(d.b);
  return j;
}

nlohmann::json DatasetExportJson(const DatasetExport& e) { return {{"out", e.out}, {"format", e.format}}; }

nlohmann::json DatasetPreviewJson(const DatasetPreview& p) {
  return {{"out", p.out}, {"augmented", p.augmented}};
}

}  // namespace kestrel::app
