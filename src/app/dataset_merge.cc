#include "app/dataset_merge.h"

#include <map>
#include <optional>
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

void MergeOptions::Bind(OptionSet& s) {
  s.String("corrections", &corrections,
           "a Label Studio JSON export or a CVAT for images 1.1 XML file of corrected labels")
      .String(
          "images", &images,
          "folder new images (not in the version) are found under; default: the corrections file's folder")
      .Int("seed", &seed,
           "the split seed the version was imported with (splits new images without a split folder)", 0);
}

Result<DatasetMerge> MergeCorrections(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                      const std::string& spec, const MergeOptions& opts, Env& env,
                                      data::ValidationReport* report_out) {
  const std::string& corrections_path = opts.corrections;
  if (corrections_path.empty())
    return Status::InvalidArgument("corrections=FILE is required", {"", 0, "corrections"});
  const std::string images_dir = opts.images.empty() ? DirName(corrections_path) : opts.images;
  KESTREL_ASSIGN_OR_RETURN(data::VersionView v, data::LoadVersion(meta, blobs, spec, env));
  KESTREL_ASSIGN_OR_RETURN(data::Corrections c, data::ReadCorrections(corrections_path, env));
  return MergeReadCorrections(meta, blobs, spec, std::move(v), c, images_dir, opts.seed, env, report_out);
}

Result<DatasetMerge> MergeReadCorrections(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                          const std::string& spec, data::VersionView v,
                                          const data::Corrections& c, const std::string& images_dir,
                                          int64_t seed, Env& env, data::ValidationReport* report_out) {
  const std::string& corrections_path = c.file;
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
  std::vector<std::string> new_bytes;        // the new images' files, stored only when all is well
  for (const data::CorrectedImage& im : c.images) {
    const std::string image_field = im.field + (c.format == "cvat" ? ".name" : ".data.image");
    int64_t idx = data::MatchCorrectedImage(m, im.ref);
    if (idx == -1) {
      std::optional<data::ImageFile> file;
      if (!images_dir.empty()) file = data::ResolveImageFile(images_dir, im.ref, env);
      if (!file) {
        Error(report, "corrections.unmatched_image", image_field,
              "'" + im.ref + "' matches no image of " + spec + " (as <split>/<path> or <path>)" +
                  (images_dir.empty() ? std::string(" (no folder for new images)")
                                      : " and no file under " + images_dir));
        continue;
      }
      std::string check;
      Result<data::NewImage> added = data::ReadNewImage(*file, env, &check);
      if (!added.IsOk()) {
        Error(report, check, image_field, added.GetStatus().Message() + " (" + file->path + ")");
        continue;
      }
      if (added->entry.split == data::Split::kUnassigned) {
        Result<data::Split> split = data::AssignedSplitOf(v.manifest, added->entry, uint64_t(seed));
        if (!split.IsOk()) {
          Error(report, "corrections.no_split", image_field,
                "new image '" + im.ref + "' names no split folder and " + spec + " " +
                    split.GetStatus().Message() + "; put it under train/ or val/ (or give seed=)");
          continue;
        }
        added->entry.split = *split;
      }
      idx = int64_t(m.entries.size());
      new_bytes.push_back(std::move(added->bytes));
      m.entries.push_back(std::move(added->entry));
      ++out.images_added;
    }
    const bool is_new = idx >= int64_t(v.manifest.entries.size());
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
    if (!is_new) {
      ++out.images_corrected;
      if (canonical != e.boxes) ++out.images_changed;
    }
    e.boxes = std::move(canonical);
  }
  if (report_out != nullptr) *report_out = report;
  if (const int64_t errors = report.Count(data::Severity::kError); errors > 0)
    return Status::InvalidArgument(
        std::to_string(errors) + " error(s) in the corrections; nothing stored\n" + report.ToText(),
        {corrections_path, 0, "corrections"});
  // Two references to one new file, or a new file under a key vN has in
  // another form: one key twice is refused like an image corrected twice.
  {
    std::map<std::pair<std::string, int>, size_t> keys;
    for (size_t i = 0; i < m.entries.size(); ++i) {
      auto [it, fresh] = keys.emplace(std::make_pair(m.entries[i].path, int(m.entries[i].split)), i);
      if (!fresh) {
        Error(report, "corrections.duplicate_image", "",
              "'" + std::string(data::SplitName(m.entries[i].split)) + "/" + m.entries[i].path +
                  "' would be in the version twice");
      }
    }
    if (report_out != nullptr) *report_out = report;
    if (const int64_t errors = report.Count(data::Severity::kError); errors > 0)
      return Status::InvalidArgument(
          std::to_string(errors) + " error(s) in the corrections; nothing stored\n" + report.ToText(),
          {corrections_path, 0, "corrections"});
  }

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
  // New images first, then the manifest and report, the record last
  // (data/version.h's order), so a crash leaves no half version; vN's
  // images are its blobs already.
  for (const std::string& bytes : new_bytes) KESTREL_RETURN_IF_ERROR(blobs.Put(bytes).GetStatus());
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
  // vN's images keep their data_mode=reference files (ManifestEntry::file);
  // images the merge adds are blobs. The record says whether any file is
  // referenced, as an import would.
  rec.data_mode = m.HasReferences() ? "reference" : "copy";
  KESTREL_ASSIGN_OR_RETURN(out.record, meta.AddDatasetVersion(rec, &out.created));
  return out;
}

nlohmann::json DatasetMergeJson(const DatasetMerge& m) {
  return {{"base", DatasetVersionJson(m.base)},
          {"version", DatasetVersionJson(m.record)},
          {"created", m.created},
          {"images_corrected", m.images_corrected},
          {"images_changed", m.images_changed},
          {"images_added", m.images_added},
          {"boxes_before", m.boxes_before},
          {"boxes_after", m.boxes_after},
          {"report", m.report.ToJson()}};
}

}  // namespace kestrel::app
