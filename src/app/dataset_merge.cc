#include "app/dataset_merge.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "app/datasets.h"
#include "core/json.h"
#include "data/corrections.h"
#include "data/manifest.h"
#include "data/version.h"

namespace kestrel::app {
namespace {

void Error(data::ValidationReport& r, const std::string& check, const std::string& field,
           const std::string& message) {
  r.findings.Add(
      data::MakeFinding(data::Severity::kError, check, r.source, 0, field, message, "nothing stored"));
}

int64_t CountBoxes(const data::Manifest& m) {
  int64_t n = 0;
  for (const data::ManifestEntry& e : m.entries) n += int64_t(e.boxes.size());
  return n;
}

}  // namespace

Result<DatasetMerge> MergeCorrections(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                      const std::string& spec, const std::string& corrections_path, Env& env,
                                      data::ValidationReport* report_out) {
  KESTREL_ASSIGN_OR_RETURN(data::VersionView v, data::LoadVersion(meta, blobs, spec, env));
  KESTREL_ASSIGN_OR_RETURN(data::Corrections c, data::ReadCorrections(corrections_path, env));
  DatasetMerge out;
  out.base = v.record;
  data::ValidationReport& report = out.report;
  report.source = corrections_path;
  report.format = c.format;
  report.names = v.manifest.names;
  report.findings.Merge(c.findings);
  std::map<std::string, int> class_of;
  for (size_t i = 0; i < v.manifest.names.size(); ++i) class_of.emplace(v.manifest.names[i], int(i));

  data::Manifest m = v.manifest;
  std::map<int64_t, std::string> corrected;  // manifest index -> the export's field that corrected it
  for (const data::CorrectedImage& im : c.images) {
    const std::string image_field = im.field + (c.format == "cvat" ? ".name" : ".data.image");
    const int64_t idx = data::MatchCorrectedImage(m, im.ref);
    if (idx == -1) {
      Error(report, "corrections.unmatched_image", image_field,
            "'" + im.ref + "' matches no image of " + spec + " (as <split>/<path> or <path>)");
      continue;
    }
    if (idx == -2) {
      Error(report, "corrections.ambiguous_image", image_field,
            "'" + im.ref + "' matches several images of " + spec + "; name it as <split>/<path>");
      continue;
    }
    auto [it, fresh] = corrected.emplace(idx, im.field);
    if (!fresh) {
      Error(report, "corrections.duplicate_image", image_field,
            "'" + im.ref + "' is corrected twice (also by " + it->second + ")");
      continue;
    }
    std::vector<data::Box> boxes;
    bool ok = true;
    for (const data::CorrectionBox& b : im.boxes) {
      auto cls = class_of.find(b.label);
      if (cls == class_of.end()) {
        std::string known;
        for (const std::string& n : v.manifest.names) known += (known.empty() ? "" : ", ") + n;
        Error(report, "corrections.unknown_label", b.field,
              "label '" + b.label + "' is not a class of " + spec + " (" + known + ")");
        ok = false;
        continue;
      }
      boxes.push_back({cls->second, b.cx, b.cy, b.w, b.h});
    }
    if (!ok) continue;
    data::ManifestEntry& e = m.entries[size_t(idx)];
    std::vector<data::Box> canonical = data::CanonicalBoxes(std::move(boxes));
    ++out.images_corrected;
    if (canonical != e.boxes) ++out.images_changed;
    e.boxes = std::move(canonical);
  }
  if (report_out != nullptr) *report_out = report;
  if (const int64_t errors = report.Count(data::Severity::kError); errors > 0)
    return Status::InvalidArgument(
        std::to_string(errors) + " error(s) in the corrections; nothing stored\n" + report.ToText(),
        {corrections_path, 0, "corrections"});

  data::Canonicalize(m);
  out.boxes_before = CountBoxes(v.manifest);
  out.boxes_after = CountBoxes(m);
  report.images_total = int64_t(m.entries.size());
  report.boxes = out.boxes_after;
  report.class_counts.assign(m.names.size(), 0);
  report.tiny_counts.assign(m.names.size(), 0);
  for (const data::ManifestEntry& e : m.entries)
    for (const data::Box& b : e.boxes)
      if (b.cls >= 0 && size_t(b.cls) < m.names.size()) ++report.class_counts[size_t(b.cls)];
  if (report_out != nullptr) *report_out = report;

  const std::string id = data::VersionId(m);
  if (auto same = meta.GetVersion(v.record.dataset, id); same.IsOk()) {
    out.record = std::move(same).Value();
    return out;
  }
  std::string manifest_json, report_json, summary_json;
  try {
    manifest_json = data::ManifestToJson(m);
    report_json = DumpJson(report.ToJson());
    summary_json = DumpJson(data::SummarizeVersion(m, report));
  } catch (const nlohmann::json::exception& e) {
    return Status::Internal(std::string("cannot serialize the merged version: ") + e.what(),
                            {corrections_path});
  }
  // The images are vN's blobs; the manifest and report first, the record
  // last (data/version.h's order), so a crash leaves no half version.
  KESTREL_ASSIGN_OR_RETURN(std::string manifest_sha, blobs.Put(manifest_json));
  KESTREL_ASSIGN_OR_RETURN(std::string report_sha, blobs.Put(report_json));
  store::DatasetVersionRecord rec;
  rec.dataset = v.record.dataset;
  rec.version_id = id;
  rec.manifest_sha = manifest_sha;
  rec.report_sha = report_sha;
  rec.created_at = env.UnixSeconds();
  rec.num_images = int64_t(m.entries.size());
  rec.num_boxes = out.boxes_after;
  rec.num_classes = int(m.names.size());
  rec.source = "merge:" + v.record.dataset + "@v" + std::to_string(v.record.seq) + "+" + c.format + ":" +
               corrections_path;
  rec.summary_json = std::move(summary_json);
  KESTREL_ASSIGN_OR_RETURN(out.record, meta.AddDatasetVersion(rec, &out.created));
  return out;
}

nlohmann::json DatasetMergeJson(const DatasetMerge& m) {
  return {{"base", DatasetVersionJson(m.base)},
          {"version", DatasetVersionJson(m.record)},
          {"created", m.created},
          {"images_corrected", m.images_corrected},
          {"images_changed", m.images_changed},
          {"boxes_before", m.boxes_before},
          {"boxes_after", m.boxes_after},
          {"report", m.report.ToJson()}};
}

}  // namespace kestrel::app
