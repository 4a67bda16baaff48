#include "data/version.h"

#include <cstdio>
#include <filesystem>
#include <map>
#include <utility>

#include "core/hash.h"
#include "core/json.h"
#include "core/parallel.h"
#include "core/relabel_paths.h"
#include "core/staged_dir.h"
#include "data/text.h"
#include "data/version_files.h"

namespace kestrel::data {
namespace {

std::string YamlQuote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
    } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      // A raw newline inside a double-quoted scalar folds into a space:
      // the name would not survive export -> import.
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", static_cast<unsigned char>(c));
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string StripExtension(const std::string& path) {
  size_t slash = path.find_last_of('/');
  size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path;
  return path.substr(0, dot);
}

// The export tree of `v` under `out_dir` (deferred writes, no sync).
Status WriteExportTree(const VersionView& v, store::ArtifactStore& blobs, const std::string& format,
                       const std::string& out_dir, Env& env) {
  const Manifest& m = v.manifest;
  std::map<Split, std::vector<const ManifestEntry*>> by_split;
  for (const auto& e : m.entries) by_split[e.split].push_back(&e);
  KESTREL_RETURN_IF_ERROR(env.CreateDirs(out_dir));

  // Images (verified on read from the store) and YOLO labels. Deferred
  // writes: the caller syncs the filesystem once before the rename.
  for (const auto& e : m.entries) {
    std::string split = SplitName(e.split);
    std::string img = JoinPath(out_dir, "images/" + split + "/" + e.path);
    KESTREL_RETURN_IF_ERROR(env.CreateDirs(DirName(img)));
    // A referenced image is its file, checked against the version (size +
    // mtime, else its hash): export never writes bytes the version did not have.
    KESTREL_ASSIGN_OR_RETURN(std::string bytes, ReadEntryImage(e, VersionName(v.record), blobs, env));
    KESTREL_RETURN_IF_ERROR(env.WriteFileDeferred(img, bytes));
    if (format == "yolo") {
      std::string lbl = JoinPath(out_dir, "labels/" + split + "/" + StripExtension(e.path) + ".txt");
      KESTREL_RETURN_IF_ERROR(env.CreateDirs(DirName(lbl)));
      KESTREL_RETURN_IF_ERROR(env.WriteFileDeferred(lbl, CanonicalLabelText(e.boxes)));
    }
  }
  if (format == "yolo") {
    std::string yaml = "# Exported by kestrel from " + v.record.dataset + "@v" +
                       std::to_string(v.record.seq) + " (version " + v.record.version_id + ")\npath: .\n";
    for (Split s : {Split::kTrain, Split::kVal, Split::kTest}) {
      if (by_split.count(s)) yaml += std::string(SplitName(s)) + ": images/" + SplitName(s) + "\n";
    }
    yaml += "nc: " + std::to_string(m.names.size()) + "\nnames:\n";
    for (const auto& n : m.names) yaml += "  - " + YamlQuote(n) + "\n";
    return env.WriteFileDeferred(JoinPath(out_dir, "data.yaml"), yaml);
  }
  KESTREL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(out_dir, "annotations")));
  for (const auto& [split, list] : by_split) {
    nlohmann::json j;
    j["info"] = {{"description", "exported by kestrel from " + v.record.dataset},
                 {"version", v.record.version_id}};
    nlohmann::json cats = nlohmann::json::array();
    for (size_t c = 0; c < m.names.size(); ++c) cats.push_back({{"id", c + 1}, {"name", m.names[c]}});
    nlohmann::json images = nlohmann::json::array(), anns = nlohmann::json::array();
    int64_t ann_id = 1, img_id = 1;
    for (const ManifestEntry* e : list) {
      images.push_back({{"id", img_id}, {"file_name", e->path}, {"width", e->width}, {"height", e->height}});
      for (const auto& b : e->boxes) {
        double w = b.w * e->width, h = b.h * e->height;
        double x = b.cx * e->width - w / 2, y = b.cy * e->height - h / 2;
        anns.push_back({{"id", ann_id++},
                        {"image_id", img_id},
                        {"category_id", b.cls + 1},
                        {"bbox", {x, y, w, h}},
                        {"area", w * h},
                        {"iscrowd", 0}});
      }
      ++img_id;
    }
    j["images"] = images;
    j["annotations"] = anns;
    j["categories"] = cats;
    std::string text;
    try {
      text = DumpJson(j, 1);
    } catch (const nlohmann::json::exception& e) {
      return Status::Internal(std::string("cannot write the COCO JSON: ") + e.what(), {out_dir});
    }
    KESTREL_RETURN_IF_ERROR(env.WriteFileDeferred(
        JoinPath(out_dir, std::string("annotations/instances_") + SplitName(split) + ".json"), text));
  }
  return {};
}

// `a.manifest` with each entry's image file recorded (absolute path, size,
// mtime). The stat taken before analysis read the file must still hold:
// otherwise the file changed after it was hashed (kAborted, as a copy
// import whose re-read bytes differ).
Result<Manifest> ReferenceFiles(const Analysis& a, Env& env) {
  Manifest m = a.manifest;
  if (a.image_files.size() != m.entries.size() || a.image_paths.size() != m.entries.size()) {
    return Status::Internal("analysis has no file record per manifest entry");
  }
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const std::string& path = a.image_paths[i];
    const FileInfo& before = a.image_files[i];
    const FileInfo now = env.Stat(path);
    if (!now.exists || !now.is_regular || now.size != before.size || now.mtime_ns != before.mtime_ns) {
      return Status::Aborted("image changed while importing; run the import again", {path});
    }
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(path, ec).lexically_normal();
    if (ec) return Status::IoError("cannot make the path absolute: " + ec.message(), {path});
    m.entries[i].file = {abs.string(), now.size, now.mtime_ns};
  }
  return m;
}

}  // namespace

Result<CommittedVersion> CommitVersion(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                       const std::string& name, const std::string& path, const Analysis& a,
                                       const ImportOptions& opts, Env& env) {
  const std::string version_id = VersionId(a.manifest);
  const bool by_reference = opts.data_mode == "reference";
  if (!by_reference && opts.data_mode != "copy") {
    return Status::InvalidArgument("data_mode must be copy or reference, got '" + opts.data_mode + "'",
                                   {"", 0, "data_mode"});
  }
  // data_mode=reference: the manifest names each image file as analyzed
  // (its stat before the read that hashed it) instead of storing its bytes.
  Manifest referenced;
  if (by_reference) {
    KESTREL_ASSIGN_OR_RETURN(referenced, ReferenceFiles(a, env));
  }
  const Manifest& manifest = by_reference ? referenced : a.manifest;
  // Everything that can still fail is done before the first write, so a
  // failing import leaves no unreferenced blobs behind: serializing (a JSON
  // dump throws on invalid UTF-8) and the metadata record.
  std::string manifest_json, report_json, summary_json;
  try {
    manifest_json = ManifestToJson(manifest);
    nlohmann::json report = a.report.ToJson();
    nlohmann::json summary = SummarizeVersion(a.manifest, a.report);
    if (!opts.source_label.empty()) {
      RelabelPaths(report, EscapeInvalidUtf8(path), EscapeInvalidUtf8(opts.source_label));
      RelabelPaths(summary, EscapeInvalidUtf8(path), EscapeInvalidUtf8(opts.source_label));
    }
    report_json = DumpJson(report);
    summary_json = DumpJson(summary);
  } catch (const nlohmann::json::exception& e) {
    return Status::Internal(std::string("cannot serialize the version: ") + e.what(),
                            {EscapeInvalidUtf8(path)});
  }

  // Phase 2: blobs first (none for the images of a referenced version).
  const auto& entries = a.manifest.entries;
  KESTREL_RETURN_IF_ERROR(
      ParallelFor(by_reference ? 0 : entries.size(), opts.threads, [&](size_t i) -> Status {
        const auto& e = entries[i];
        std::string reread;
        if (a.image_bytes[i].empty()) {
          // Not kept in memory: read again and check it did not change since
          // analysis, so the manifest never names bytes we did not store.
          KESTREL_ASSIGN_OR_RETURN(reread, env.ReadFile(a.image_paths[i], uint64_t{2} << 30));
          if (Sha256Hex(reread) != e.image_sha) {
            return Status::Aborted("image changed while importing; run the import again", {a.image_paths[i]});
          }
        }
        const std::string& bytes = a.image_bytes[i].empty() ? reread : a.image_bytes[i];
        // Deferred: one syncfs below instead of an fsync per image (~15 ms each
        // here), still before the version that refers to the blobs is committed.
        return blobs.PutWithHash(bytes, e.image_sha, store::ArtifactStore::Durability::kDeferred).GetStatus();
      }));
  KESTREL_RETURN_IF_ERROR(blobs.SyncDeferred());
  KESTREL_ASSIGN_OR_RETURN(std::string manifest_sha, blobs.Put(manifest_json));
  KESTREL_ASSIGN_OR_RETURN(std::string report_sha, blobs.Put(report_json));

  store::DatasetVersionRecord rec;
  rec.dataset = name;
  rec.version_id = version_id;
  rec.manifest_sha = manifest_sha;
  rec.report_sha = report_sha;
  rec.created_at = env.UnixSeconds();
  rec.num_images = static_cast<int64_t>(entries.size());
  rec.num_boxes = a.report.boxes;
  rec.num_classes = static_cast<int>(a.manifest.names.size());
  rec.source =
      a.report.format + ":" + EscapeInvalidUtf8(opts.source_label.empty() ? path : opts.source_label);
  rec.summary_json = std::move(summary_json);
  rec.data_mode = by_reference ? "reference" : "copy";
  CommittedVersion out;
  KESTREL_ASSIGN_OR_RETURN(out.record, meta.AddDatasetVersion(rec, &out.created));
  return out;
}

Result<VersionView> ReadVersion(const store::DatasetVersionRecord& record, store::ArtifactStore& blobs,
                                Env& env) {
  VersionView v;
  v.record = record;
  KESTREL_ASSIGN_OR_RETURN(std::string mtext, blobs.Get(v.record.manifest_sha));
  KESTREL_ASSIGN_OR_RETURN(v.manifest, ManifestFromJson(mtext, blobs.PathFor(v.record.manifest_sha)));
  if (VersionId(v.manifest) != v.record.version_id) {
    return Status::Corruption("manifest of " + v.record.dataset + "@v" + std::to_string(v.record.seq) +
                                  " does not hash to its version id",
                              {blobs.PathFor(v.record.manifest_sha)});
  }
  // Reports are small since findings are capped, but versions imported
  // before that can hold a report of hundreds of MB (issue 10: 544 MB, 26 s
  // and 6.9 GB to parse for every `dataset show`). Those are not loaded.
  const Result<uint64_t> rsize = blobs.Size(v.record.report_sha);
  if (rsize.IsOk() && *rsize > kMaxReportBytesLoaded) {
    v.report = {{"omitted", true},
                {"bytes", *rsize},
                {"reason", "stored report is larger than " + std::to_string(kMaxReportBytesLoaded) +
                               " bytes (imported before findings were capped); the summary has the counts"}};
    return v;
  }
  KESTREL_ASSIGN_OR_RETURN(std::string rtext, blobs.Get(v.record.report_sha));
  v.report = nlohmann::json::parse(rtext, nullptr, false);
  return v;
}

Result<VersionView> LoadVersion(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                const std::string& spec, Env& env) {
  std::string name, ref;
  store::SplitDatasetRef(spec, &name, &ref);
  KESTREL_ASSIGN_OR_RETURN(store::DatasetVersionRecord record, meta.GetVersion(name, ref));
  return ReadVersion(record, blobs, env);
}

Status CheckExportTarget(const std::string& format, const std::string& out_dir, Env& env) {
  if (format != "yolo" && format != "coco") {
    return Status::InvalidArgument("export format must be yolo or coco, got '" + format + "'",
                                   {"", 0, "format"});
  }
  return RequireEmptyOrAbsent(env, out_dir);
}

Status ExportVersion(const VersionView& v, store::ArtifactStore& blobs, const std::string& format,
                     const std::string& out_dir, Env& env) {
  KESTREL_RETURN_IF_ERROR(CheckExportTarget(format, out_dir, env));
  // Built beside the target and moved into place only when every file is
  // written: a failure half-way used to leave images without data.yaml that
  // import accepted.
  KESTREL_ASSIGN_OR_RETURN(StagedDir out, StagedDir::Create(env, out_dir));
  KESTREL_RETURN_IF_ERROR(WriteExportTree(v, blobs, format, out.Path(), env));
  return out.CommitFresh();
}

}  // namespace kestrel::data
