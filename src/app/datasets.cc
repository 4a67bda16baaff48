#include "app/datasets.h"

#include <algorithm>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "app/dataset_box_stats.h"
#include "app/jobs.h"
#include "core/hash.h"
#include "core/names.h"
#include "core/thread_annotations.h"
#include "core/utf8.h"
#include "data/dataset_ref.h"
#include "data/preview.h"
#include "data/version_files.h"

namespace kestrel::app {
namespace {

ErrorLocation At(const std::string& field) { return {kRequestFile, 0, field}; }

Status CheckPage(int64_t offset, int64_t limit, int64_t max_limit) {
  if (offset < 0)
    return Status::InvalidArgument("offset must be >= 0, got " + std::to_string(offset), At("offset"));
  if (limit < 1 || limit > max_limit) {
    return Status::InvalidArgument(
        "limit must be in [1, " + std::to_string(max_limit) + "], got " + std::to_string(limit), At("limit"));
  }
  return {};
}

// The class a request names: a name of the version, or an id in range.
Result<int> ParseClass(const std::string& text, const std::vector<std::string>& names) {
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<int>(i);
  const bool numeric =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (numeric && text.size() <= 9 && std::stoll(text) < static_cast<int64_t>(names.size()))
    return static_cast<int>(std::stoll(text));
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) list += (i ? ", " : "") + std::to_string(i) + " " + names[i];
  return Status::InvalidArgument("unknown class '" + text + "'; this version's classes are: " + list,
                                 At("class"));
}

// Parsed manifests of the versions asked for last, by manifest blob: the
// gallery asks for one page and then each of its images, and a stored
// manifest never changes (its blob is named by its hash). Not by version
// id: a copy and a data_mode=reference import of the same content share it. Two entries: a
// manifest with boxes of 100k images is tens of MB.
class ManifestCache {
 public:
  std::shared_ptr<const data::Manifest> Find(const std::string& version_id) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
      if (it->first != version_id) continue;
      lru_.splice(lru_.begin(), lru_, it);
      return lru_.front().second;
    }
    return nullptr;
  }
  void Put(const std::string& version_id, std::shared_ptr<const data::Manifest> m) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    lru_.emplace_front(version_id, std::move(m));
    if (lru_.size() > kEntries) lru_.pop_back();
  }

 private:
  static constexpr size_t kEntries = 2;
  Mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<const data::Manifest>>> lru_
      GUARDED_BY(mu_);  // newest first
};

ManifestCache& Manifests() {
  static ManifestCache cache;
  return cache;
}

struct LoadedManifest {
  store::DatasetVersionRecord record;
  std::shared_ptr<const data::Manifest> manifest;
};

// The version's record (always from the store) and its manifest (cached).
Result<LoadedManifest> LoadManifest(store::MetadataStore& meta, store::ArtifactStore& blobs, Env& env,
                                    const std::string& spec) {
  std::string name, ref;
  store::SplitDatasetRef(spec, &name, &ref);
  LoadedManifest out;
  KESTREL_ASSIGN_OR_RETURN(out.record, meta.GetVersion(name, ref));
  out.manifest = Manifests().Find(out.record.manifest_sha);
  if (out.manifest == nullptr) {
    KESTREL_ASSIGN_OR_RETURN(auto v, data::ReadVersion(out.record, blobs, env));
    out.manifest = std::make_shared<const data::Manifest>(std::move(v.manifest));
    Manifests().Put(out.record.manifest_sha, out.manifest);
  }
  return out;
}

std::string StripExtension(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path;
  return path.substr(0, dot);
}

// Manifest paths (with and without extension) -> entry indices, built once
// per request and asked for each finding on the page.
class FindingImageIndex {
 public:
  explicit FindingImageIndex(const data::Manifest& m) : m_(m) {
    for (size_t i = 0; i < m.entries.size(); ++i) {
      by_path_[m.entries[i].path].push_back(static_cast<int64_t>(i));
      by_stem_[StripExtension(m.entries[i].path)].push_back(static_cast<int64_t>(i));
    }
  }

  // The entry a finding is about: its typed image when it has one, else an
  // entry whose path ends its file (an image), else whose stem ends its
  // file's stem (a YOLO/VOC label). Never from the message: a report stored
  // before findings had an image resolves by its file alone.
  int64_t Resolve(const data::Finding& f) const {
    if (!f.image.path.empty()) return ResolveImage(f.image);
    if (f.file.empty()) return -1;
    if (int64_t i = BySuffix(by_path_, f.file, f.file); i >= 0) return i;
    return BySuffix(by_stem_, StripExtension(f.file), f.file);
  }

  // The entry at exactly `r.path`: the one in `r.split`, else the first
  // (the importer may assign splits after the finding was made).
  int64_t ResolveImage(const data::ImageRef& r) const {
    auto it = by_path_.find(r.path);
    if (it == by_path_.end()) return -1;
    for (int64_t i : it->second)
      if (m_.entries[static_cast<size_t>(i)].split == r.split) return i;
    return it->second.front();
  }

 private:
  using Index = std::map<std::string, std::vector<int64_t>, std::less<>>;

  // The longest '/'-bounded suffix of `key` that is in `index`.
  int64_t BySuffix(const Index& index, const std::string& key, const std::string& file) const {
    size_t start = 0;
    for (;;) {
      if (auto it = index.find(std::string_view(key).substr(start)); it != index.end())
        return Pick(it->second, file);
      const size_t slash = key.find('/', start);
      if (slash == std::string::npos) return -1;
      start = slash + 1;
    }
  }

  // Entries of one path differ by split: the one whose split is a folder of `file`.
  int64_t Pick(const std::vector<int64_t>& candidates, const std::string& file) const {
    for (int64_t i : candidates) {
      const std::string folder =
          std::string("/") + data::SplitName(m_.entries[static_cast<size_t>(i)].split) + "/";
      if (("/" + file).find(folder) != std::string::npos) return i;
    }
    return candidates.front();
  }

  const data::Manifest& m_;
  Index by_path_, by_stem_;
};

// The per-class instance counts of a version's stored summary (all splits),
// by class name; empty for a record without a readable summary.
std::vector<std::pair<std::string, int64_t>> ClassCounts(const store::DatasetVersionRecord& r) {
  std::vector<std::pair<std::string, int64_t>> out;
  auto summary = nlohmann::json::parse(r.summary_json, nullptr, false);
  if (!summary.is_object() || !summary.contains("classes") || !summary["classes"].is_array()) return out;
  for (const auto& c : summary["classes"]) {
    if (!c.is_object() || !c.contains("name") || !c["name"].is_string()) continue;
    int64_t n = 0;
    for (const char* split : {"train", "val", "test"})
      if (c.contains(split) && c[split].is_number_integer()) n += c[split].get<int64_t>();
    out.emplace_back(c["name"].get<std::string>(), n);
  }
  return out;
}

}  // namespace

Result<DatasetImport> Datasets::Import(const std::string& path, const std::string& name,
                                       const data::ImportOptions& opts, data::ValidationReport* report_out) {
  KESTREL_RETURN_IF_ERROR(CheckName(NameKind::kDataset, name, {"", 0, "name"}));
  KESTREL_ASSIGN_OR_RETURN(data::Analysis a, data::AnalyzeDataset(path, opts, env_));
  if (report_out != nullptr) *report_out = a.report;
  return ImportAnalyzed(path, name, std::move(a), opts);
}

Result<DatasetImport> Datasets::ImportAnalyzed(const std::string& path, const std::string& name,
                                               data::Analysis a, const data::ImportOptions& opts) {
  KESTREL_RETURN_IF_ERROR(CheckName(NameKind::kDataset, name, {"", 0, "name"}));
  if (a.manifest.entries.empty()) {
    return Status::InvalidArgument("no usable images in " + path + "; nothing imported\n" + a.report.ToText(),
                                   {path});
  }
  if (const int64_t errors = a.report.Count(data::Severity::kError); errors > 0 && !opts.allow_errors) {
    return Status::InvalidArgument(std::to_string(errors) +
                                       " validation error(s); nothing imported (use --allow-errors to import "
                                       "without the bad samples)\n" +
                                       a.report.ToText(),
                                   {path});
  }
  DatasetImport out;
  // Identical content already registered under this name: nothing to write.
  if (auto existing = meta_.GetVersion(name, data::VersionId(a.manifest)); existing.IsOk()) {
    out.record = std::move(existing).Value();
  } else {
    KESTREL_ASSIGN_OR_RETURN(data::CommittedVersion c,
                             data::CommitVersion(meta_, blobs_, name, path, a, opts, env_));
    out.record = std::move(c.record);
    out.created = c.created;
  }
  out.analysis = std::move(a);
  return out;
}

Result<ResolvedDataset> Datasets::Resolve(const std::string& given, data::ValidationReport* report_out,
                                          const std::string& data_mode) {
  ResolvedDataset out;
  if (!data::IsDatasetPath(given)) {
    out.spec = given;
    // `data=shapes` meant for a folder in the current directory: say how to
    // write it rather than only "no dataset named 'shapes'".
    std::string name, ref;
    store::SplitDatasetRef(given, &name, &ref);
    auto v = meta_.GetVersion(name, ref);
    if (!v.IsOk() && v.GetStatus().Code() == StatusCode::kNotFound && ref.empty() &&
        env_.Stat(given).exists) {
      out.hint = "no dataset named '" + EscapeForDisplay(given) + "' in the registry; to import the " +
                 (env_.Stat(given).is_dir ? "folder" : "file") + " '" + EscapeForDisplay(given) +
                 "', write data=./" + EscapeForDisplay(given);
    }
    return out;
  }

  out.from_path = true;
  const std::string name = data::DatasetNameForPath(given);
  data::ImportOptions opts;
  if (data_mode != "copy" && data_mode != "reference") {
    return Status::InvalidArgument("data_mode must be copy or reference, got '" + data_mode + "'",
                                   {"command line", 0, "data_mode"});
  }
  opts.data_mode = data_mode;
  KESTREL_ASSIGN_OR_RETURN(data::Analysis a, data::AnalyzeDataset(given, opts, env_));
  if (report_out != nullptr) *report_out = a.report;
  const int64_t images = static_cast<int64_t>(a.manifest.entries.size());

  // Identical content already registered, under this name or another: reuse
  // that version (a source with errors never matches: ImportAnalyzed refuses it).
  const std::string id = data::VersionId(a.manifest);
  bool found = false;
  if (a.report.Count(data::Severity::kError) == 0 && images > 0) {
    auto same = meta_.GetVersion(name, id);
    if (same.IsOk()) {
      out.record = std::move(same).Value();
      found = true;
    } else {
      auto all = meta_.ListDatasets();
      if (all.IsOk()) {
        for (const auto& d : *all) {
          auto other = meta_.GetVersion(d.name, id);
          if (other.IsOk()) {
            out.record = std::move(other).Value();
            found = true;
            break;
          }
        }
      }
    }
  }
  if (!found) {
    KESTREL_ASSIGN_OR_RETURN(DatasetImport r, ImportAnalyzed(given, name, std::move(a), opts));
    out.record = std::move(r.record);
    out.created = r.created;
  }
  const auto& rec = out.record;
  const std::string version = rec.dataset + "@v" + std::to_string(rec.seq);
  out.spec = rec.dataset + "@" + rec.version_id;
  out.message =
      "data: " + EscapeForDisplay(given) + " -> " + (out.created ? "imported as " : "reused ") + version +
      " (version " + rec.version_id.substr(0, 12) + ", " + std::to_string(rec.num_images) + " images" +
      (out.created ? "" : ", identical content already stored") +
      (rec.data_mode == "reference" ? ", data_mode=reference: images read from their files" : "") + ")";
  return out;
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

Result<data::VersionView> Datasets::Show(const std::string& spec) {
  KESTREL_ASSIGN_OR_RETURN(data::VersionView v, data::LoadVersion(meta_, blobs_, spec, env_));
  // data_mode=reference: every image file still as imported (size + mtime,
  // else its hash), or the error naming the first that is not.
  KESTREL_RETURN_IF_ERROR(
      data::CheckVersionFiles(v, data::FileCheck::kFast, env_).ToStatus(data::VersionName(v.record)));
  return v;
}

Result<DatasetVerify> Datasets::Verify(const std::string& spec) {
  KESTREL_ASSIGN_OR_RETURN(data::VersionView v, data::LoadVersion(meta_, blobs_, spec, env_));
  DatasetVerify out;
  out.files = data::VerifyVersionImages(v, blobs_, env_);
  out.record = std::move(v.record);
  return out;
}

Result<DatasetDiff> Datasets::Diff(const std::string& a, const std::string& b) {
  KESTREL_ASSIGN_OR_RETURN(auto va, data::LoadVersion(meta_, blobs_, a, env_));
  KESTREL_ASSIGN_OR_RETURN(auto vb, data::LoadVersion(meta_, blobs_, b, env_));
  DatasetDiff d;
  d.diff = data::DiffManifests(va.manifest, vb.manifest);
  d.boxes = data::DiffBoxes(va.manifest, vb.manifest);
  d.a = std::move(va.record);
  d.b = std::move(vb.record);
  return d;
}

Result<DatasetExport> Datasets::Export(const std::string& spec, const std::string& format,
                                       const std::string& out) {
  // The request's own errors before the store's (a missing dataset).
  KESTREL_RETURN_IF_ERROR(data::CheckExportTarget(format, out, env_));
  KESTREL_ASSIGN_OR_RETURN(data::VersionView v, Show(spec));
  KESTREL_RETURN_IF_ERROR(data::ExportVersion(v, blobs_, format, out, env_));
  return DatasetExport{spec, format, out};
}

Result<DatasetPreview> Datasets::Preview(const PreviewRequest& req) {
  if (Status s = req.augment.Validate(); !s.IsOk()) {
    return Status::InvalidArgument(s.Message(), {"command line", 0, s.Where().field});
  }
  KESTREL_ASSIGN_OR_RETURN(auto v, Show(req.spec));
  data::LoaderOptions lo = req.loader;
  lo.augment = req.aug;
  lo.shuffle = req.aug;
  lo.batch = req.images;
  KESTREL_RETURN_IF_ERROR(data::WriteAugmentedPreview(v.manifest, data::VersionImageSource(v, blobs_, env_),
                                                      req.augment, lo, v.manifest.names, req.out,
                                                      req.images));
  return DatasetPreview{req.spec, req.out, req.images, req.aug};
}

Result<DatasetImagesPage> Datasets::Images(const DatasetImagesRequest& req) {
  KESTREL_RETURN_IF_ERROR(CheckPage(req.offset, req.limit, DatasetImagesRequest::kMaxLimit));
  std::optional<data::Split> split;
  if (!req.split.empty()) {
    if (req.split != "train" && req.split != "val" && req.split != "test") {
      return Status::InvalidArgument("unknown split '" + req.split + "', expected train, val or test",
                                     At("split"));
    }
    KESTREL_ASSIGN_OR_RETURN(split, data::ParseSplit(req.split));
  }
  KESTREL_ASSIGN_OR_RETURN(auto v, LoadManifest(meta_, blobs_, env_, req.spec));
  const data::Manifest& m = *v.manifest;
  std::optional<int> cls;
  if (!req.cls.empty()) {
    KESTREL_ASSIGN_OR_RETURN(cls, ParseClass(req.cls, m.names));
  }
  DatasetImagesPage page;
  page.offset = req.offset;
  page.limit = req.limit;
  for (const auto& e : m.entries) {
    if (split && e.split != *split) continue;
    if (!req.path.empty() && e.path != req.path) continue;
    if (cls &&
        std::none_of(e.boxes.begin(), e.boxes.end(), [&](const data::Box& b) { return b.cls == *cls; }))
      continue;
    if (page.total >= req.offset && page.total < req.offset + req.limit) page.images.push_back(e);
    ++page.total;
  }
  page.record = std::move(v.record);
  page.names = m.names;
  return page;
}

Result<DatasetImageBytes> Datasets::ImageBytes(const std::string& spec, const std::string& sha) {
  if (!IsSha256Hex(sha)) {
    return Status::InvalidArgument(
        "an image is named by its SHA-256 (64 lowercase hex digits), got '" + sha + "'", At("sha"));
  }
  KESTREL_ASSIGN_OR_RETURN(auto v, LoadManifest(meta_, blobs_, env_, spec));
  const auto entry = std::find_if(v.manifest->entries.begin(), v.manifest->entries.end(),
                                  [&](const data::ManifestEntry& e) { return e.image_sha == sha; });
  if (entry == v.manifest->entries.end()) {
    return Status::NotFound("dataset " + v.record.dataset + "@v" + std::to_string(v.record.seq) +
                                " has no image with SHA-256 " + sha,
                            At("sha"));
  }
  DatasetImageBytes out;
  KESTREL_ASSIGN_OR_RETURN(out.bytes,
                           data::ReadEntryImage(*entry, data::VersionName(v.record), blobs_, env_));
  out.sha = sha;
  out.content_type = ImageContentType(out.bytes);
  return out;
}

Result<DatasetFindingsPage> Datasets::Findings(const DatasetFindingsRequest& req) {
  KESTREL_RETURN_IF_ERROR(CheckPage(req.offset, req.limit, DatasetFindingsRequest::kMaxLimit));
  if (!req.severity.empty() && req.severity != "error" && req.severity != "warning" &&
      req.severity != "info") {
    return Status::InvalidArgument("unknown severity '" + req.severity + "', expected error, warning or info",
                                   At("severity"));
  }
  KESTREL_ASSIGN_OR_RETURN(auto v, data::LoadVersion(meta_, blobs_, req.spec, env_));
  DatasetFindingsPage page;
  page.offset = req.offset;
  page.limit = req.limit;
  const nlohmann::json* all =
      v.report.is_object() && v.report.contains("findings") && v.report["findings"].is_array()
          ? &v.report["findings"]
          : nullptr;
  if (all != nullptr) {
    std::set<std::string> checks;
    const FindingImageIndex index(v.manifest);
    auto image_json = [&](int64_t i) {
      return i < 0 ? nlohmann::json(nullptr) : DatasetImageJson(v.manifest.entries[static_cast<size_t>(i)]);
    };
    for (const auto& stored : *all) {
      if (!stored.is_object()) continue;
      const data::Finding f = data::FindingFromJson(stored);
      checks.insert(f.check);
      if (!req.severity.empty() && data::SeverityName(f.severity) != req.severity) continue;
      if (!req.check.empty() && f.check != req.check) continue;
      if (page.total >= req.offset && page.total < req.offset + req.limit) {
        nlohmann::json row = stored;
        const int64_t i = index.Resolve(f);
        row["image"] = image_json(i);
        row["pair"] = nullptr;
        // A pair finding names both images (typed since the report format
        // had "other"; older reports show the finding without its pair).
        if (!f.other.path.empty() && f.distance >= 0) {
          const int64_t j = index.ResolveImage(f.other);
          if (i >= 0 && j >= 0)
            row["pair"] = {{"distance", f.distance}, {"a", image_json(i)}, {"b", image_json(j)}};
        }
        page.findings.push_back(std::move(row));
      }
      ++page.total;
    }
    page.checks.assign(checks.begin(), checks.end());
  }
  page.record = std::move(v.record);
  return page;
}

int64_t ResolveFindingImage(const data::Manifest& m, const data::Finding& f) {
  return FindingImageIndex(m).Resolve(f);
}

std::string ImageContentType(std::string_view b) {
  auto starts = [&](std::string_view sig, size_t at = 0) {
    return b.size() >= at + sig.size() && b.substr(at, sig.size()) == sig;
  };
  if (starts("\xFF\xD8\xFF")) return "image/jpeg";
  if (starts("\x89PNG\r\n\x1A\n")) return "image/png";
  if (starts("GIF87a") || starts("GIF89a")) return "image/gif";
  if (starts("BM")) return "image/bmp";
  if (starts("RIFF") && starts("WEBP", 8)) return "image/webp";
  if (starts(std::string_view("II*\0", 4)) || starts(std::string_view("MM\0*", 4))) return "image/tiff";
  return "application/octet-stream";
}

nlohmann::json DatasetImageJson(const data::ManifestEntry& e) {
  nlohmann::json boxes = nlohmann::json::array();
  for (const auto& b : e.boxes)
    boxes.push_back({{"cls", b.cls}, {"cx", b.cx}, {"cy", b.cy}, {"w", b.w}, {"h", b.h}});
  return {{"path", e.path},     {"split", data::SplitName(e.split)}, {"sha", e.image_sha}, {"width", e.width},
          {"height", e.height}, {"boxes", std::move(boxes)}};
}

namespace {
nlohmann::json NextOffset(int64_t offset, int64_t limit, int64_t total) {
  return offset + limit < total ? nlohmann::json(offset + limit) : nlohmann::json(nullptr);
}
}  // namespace

nlohmann::json DatasetImagesPageJson(const DatasetImagesPage& p) {
  nlohmann::json images = nlohmann::json::array();
  for (const auto& e : p.images) images.push_back(DatasetImageJson(e));
  return {{"version", DatasetVersionJson(p.record)},
          {"names", p.names},
          {"total", p.total},
          {"offset", p.offset},
          {"limit", p.limit},
          {"next_offset", NextOffset(p.offset, p.limit, p.total)},
          {"images", std::move(images)}};
}

nlohmann::json DatasetFindingsPageJson(const DatasetFindingsPage& p) {
  return {{"version", DatasetVersionJson(p.record)},
          {"checks", p.checks},
          {"total", p.total},
          {"offset", p.offset},
          {"limit", p.limit},
          {"next_offset", NextOffset(p.offset, p.limit, p.total)},
          {"findings", p.findings}};
}

nlohmann::json DatasetVersionJson(const store::DatasetVersionRecord& r) {
  return {{"dataset", r.dataset},           {"version", "v" + std::to_string(r.seq)},
          {"version_id", r.version_id},     {"created_at", r.created_at},
          {"num_images", r.num_images},     {"num_boxes", r.num_boxes},
          {"num_classes", r.num_classes},   {"source", r.source},
          {"manifest_sha", r.manifest_sha}, {"report_sha", r.report_sha},
          {"data_mode", r.data_mode}};
}

nlohmann::json DatasetVerifyJson(const DatasetVerify& v) {
  nlohmann::json problems = nlohmann::json::array();
  for (const Status& s : v.files.examples)
    problems.push_back({{"message", s.Message()}, {"file", s.Where().file}});
  return {{"ok", v.files.Ok()},
          {"version", DatasetVersionJson(v.record)},
          {"images", v.files.images},
          {"hashed", v.files.hashed},
          {"referenced_files", v.files.files},
          {"referenced_bytes", v.files.bytes},
          {"problems", v.files.problems},
          {"examples", problems}};
}

std::string DatasetVerifyText(const DatasetVerify& v) {
  const std::string version = data::VersionName(v.record);
  std::string out = version + " (data_mode=" + v.record.data_mode + "): " + std::to_string(v.files.images) +
                    " images read and hashed";
  if (v.files.files > 0) {
    out += " (" + std::to_string(v.files.files) + " referenced files, " + std::to_string(v.files.bytes) +
           " bytes)";
  }
  if (v.files.Ok()) return out + ": all match the version\n";
  out += ": " + std::to_string(v.files.problems) + " missing or changed\n";
  for (const Status& s : v.files.examples) out += "  " + s.Message() + "\n";
  if (v.files.problems > static_cast<int64_t>(v.files.examples.size())) {
    out += "  ... and " + std::to_string(v.files.problems - static_cast<int64_t>(v.files.examples.size())) +
           " more\n";
  }
  return out;
}

nlohmann::json DatasetSummaryJson(const store::DatasetSummary& s) {
  nlohmann::json j = DatasetVersionJson(s.latest);
  j["num_versions"] = s.num_versions;
  return j;
}

nlohmann::json DatasetListJson(const std::vector<store::DatasetSummary>& all) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& s : all) rows.push_back(DatasetSummaryJson(s));
  return {{"ok", true}, {"datasets", std::move(rows)}};
}

nlohmann::json DatasetImportJson(const DatasetImport& r) {
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
          {"box_stats", BoxStatsJson(ComputeBoxStats(v.manifest), v.manifest.names)},
          {"report", v.report}};
}

nlohmann::json DatasetDiffClasses(const DatasetDiff& d) {
  const auto ca = ClassCounts(d.a);
  const auto cb = ClassCounts(d.b);
  std::vector<std::string> order;
  std::map<std::string, std::pair<int64_t, int64_t>> counts;
  for (const auto& [name, n] : ca) {
    if (!counts.count(name)) order.push_back(name);
    counts[name].first = n;
  }
  for (const auto& [name, n] : cb) {
    if (!counts.count(name)) order.push_back(name);
    counts[name].second = n;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& name : order) {
    const auto [a, b] = counts[name];
    out.push_back({{"name", name}, {"a", a}, {"b", b}, {"delta", b - a}});
  }
  return out;
}

nlohmann::json DatasetDiffJson(const DatasetDiff& d) {
  nlohmann::json j = d.diff.ToJson();
  j["a"] = DatasetVersionJson(d.a);
  j["b"] = DatasetVersionJson(d.b);
  j["classes"] = DatasetDiffClasses(d);
  j["boxes"] = d.boxes.ToJson();
  return j;
}

nlohmann::json DatasetExportJson(const DatasetExport& e) { return {{"out", e.out}, {"format", e.format}}; }

nlohmann::json DatasetPreviewJson(const DatasetPreview& p) {
  return {{"out", p.out}, {"augmented", p.augmented}};
}

}  // namespace kestrel::app
