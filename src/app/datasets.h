// The dataset family's use cases (docs/datasets.md), called by every front
// end (`kestrel dataset ...`, the HTTP server, the `data=` of train, submit,
// val, compare and export): import, validate (dry run), resolve `data=`,
// list, show, diff, export, preview, and the server's gallery pages. Each
// returns a record; each record has one JSON view here, which `kestrel
// dataset ... --json` prints and the server returns unchanged. The
// mechanics are the data module's, each a function of its inputs (read and
// analyze a source: data/analyze.h; store, read and export a version:
// data/version.h); this layer decides what may be stored and under which
// name. `dataset synth` stays in the CLI: it writes a test dataset through
// OpenCV and touches no store.
//
// Thread-safety: a Datasets borrows one MetadataStore (one per thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/analyze.h"
#include "data/box_diff.h"
#include "data/loader.h"
#include "data/version.h"
#include "data/version_files.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// `dataset import`: the version and the analysis it was made from.
struct DatasetImport {
  store::DatasetVersionRecord record;
  bool created = false;  // false: identical content was already this dataset's version
  data::Analysis analysis;
};

// What a `data=` resolved to (Datasets::Resolve).
struct ResolvedDataset {
  // What to hand to Datasets::Show / the trainer: the user's reference
  // unchanged for a registry reference, "NAME@<version id>" for a path.
  std::string spec;
  bool from_path = false;              // `data` was a path (imported or reused)
  bool created = false;                // a new version was stored (from_path only)
  store::DatasetVersionRecord record;  // the version (from_path only)
  // One line for the user (from_path only), e.g.
  // "data: ds/data.yaml -> imported as shapes@v3 (version 1a2b3c4d5e6f, 96 images)".
  std::string message;
  // Registry references only: set when no dataset has that name but a file
  // or folder does ("... write data=./shapes"); the caller's Show still
  // reports the missing dataset.
  std::string hint;
};

// `dataset validate`: what an import would store, without storing it.
struct DatasetValidation {
  std::string version_id;  // the version id the import would get
  data::ValidationReport report;
  bool Ok() const { return report.Count(data::Severity::kError) == 0; }
};

// `dataset diff`.
struct DatasetDiff {
  store::DatasetVersionRecord a, b;
  data::ManifestDiff diff;
  data::BoxDiff boxes;  // box level (issue 34): added, removed, moved, relabelled
};

// `dataset verify`: every image of a version read and hashed.
struct DatasetVerify {
  store::DatasetVersionRecord record;
  data::FileCheckReport files;  // images, referenced files, problems (first examples)
};

// `dataset export`.
struct DatasetExport {
  std::string spec, format, out;
};

// `dataset preview`'s options: the loader's and augmentation keys plus its own.
struct PreviewRequest {
  std::string spec;  // NAME or NAME@VERSION
  std::string out = "preview.jpg";
  bool aug = true;  // training augmentation (false: letterboxed val view)
  int images = 16;  // [1, 64]
  data::AugmentOptions augment;
  data::LoaderOptions loader;
};
struct DatasetPreview {
  std::string spec, out;
  int images = 0;
  bool augmented = false;
};

// The gallery (GET /api/datasets/{name}/images): a page of a version's
// images with their label boxes, in manifest order (path, split).
struct DatasetImagesRequest {
  static constexpr int64_t kMaxLimit = 200;
  std::string spec;   // NAME or NAME@VERSION
  std::string split;  // "" = every split; else train, val or test
  std::string cls;    // "" = every image; else a class name or id: images with a box of it
  std::string path;   // "" = every image; else only the image(s) at this manifest path
  int64_t offset = 0;
  int64_t limit = 48;  // [1, kMaxLimit]
};
struct DatasetImagesPage {
  store::DatasetVersionRecord record;
  std::vector<std::string> names;
  std::vector<data::ManifestEntry> images;
  int64_t total = 0;  // images that match the filter, all pages
  int64_t offset = 0;
  int64_t limit = 0;
};

// One image's bytes (GET /api/datasets/{name}/images/{sha}).
struct DatasetImageBytes {
  std::string sha;
  std::string content_type;  // from the bytes' signature (ImageContentType)
  std::string bytes;
};

// The findings table (GET /api/datasets/{name}/findings): the stored
// report's finding examples, filtered, each with the manifest image it is
// about when one can be named (ResolveFindingImage).
struct DatasetFindingsRequest {
  static constexpr int64_t kMaxLimit = 500;
  std::string spec;
  std::string severity;  // "" = all; error, warning or info
  std::string check;     // "" = all; a check id ("label.out_of_bounds")
  int64_t offset = 0;
  int64_t limit = 100;  // [1, kMaxLimit]
};
struct DatasetFindingsPage {
  store::DatasetVersionRecord record;
  nlohmann::json findings = nlohmann::json::array();  // the report's objects + "image"
  std::vector<std::string> checks;                    // every check id among the examples, sorted
  int64_t total = 0;                                  // examples that match the filter
  int64_t offset = 0;
  int64_t limit = 0;
};

// `dataset validate`, the dry run (no store needed): a source that cannot be
// read at all is an error; findings (even errors) are in the record.
Result<DatasetValidation> ValidateDataset(const std::string& path, const data::ImportOptions& opts,
                                          Env& env = Env::Default());

class Datasets {
 public:
  // All three are borrowed and must outlive this object.
  Datasets(store::MetadataStore& meta, store::ArtifactStore& blobs, Env& env = Env::Default())
      : meta_(meta), blobs_(blobs), env_(env) {}

  // Analyze `path`, then store it as a version of `name`
  // (data::CommitVersion). Fails and stores nothing when `name` breaks the
  // dataset name rule (core/names.h; field "name"), the source cannot be
  // read, has no usable image, or its report has errors and
  // !opts.allow_errors (kInvalidArgument whose message carries the report
  // text). Identical content already stored under `name` is that version
  // (created false), nothing written. On failure `report_out` (when given)
  // holds the validation report if the source could be read (else its
  // `source` is empty).
  Result<DatasetImport> Import(const std::string& path, const std::string& name,
                               const data::ImportOptions& opts, data::ValidationReport* report_out = nullptr);
  // What `data=` of train, submit, val, compare and export names
  // (data/dataset_ref.h): a registry reference is returned as is (Show
  // reports a missing one; see ResolvedDataset::hint). A path is imported
  // exactly like `dataset import PATH --name DatasetNameForPath(PATH)` with
  // the default ImportOptions (on failure the Status and `report_out` are
  // Import's), except that identical content already registered under any
  // name is reused, never stored twice.
  // `data_mode` is the import's (copy|reference; kInvalidArgument at
  // "data_mode" otherwise); identical content already stored is reused
  // whichever mode it was stored in (the message says which).
  Result<ResolvedDataset> Resolve(const std::string& data, data::ValidationReport* report_out = nullptr,
                                  const std::string& data_mode = "copy");
  // Every dataset with its newest version, by name.
  Result<std::vector<store::DatasetSummary>> List();
  // spec: "NAME", "NAME@vN", "NAME@<id prefix>". A data_mode=reference
  // version's files are checked first (data::CheckVersionFiles, kFast): a
  // missing or changed one is the error naming it (export, preview and val
  // load through here too).
  Result<data::VersionView> Show(const std::string& spec);
  // Every image of the version read and hashed (data::VerifyVersionImages);
  // problems are in the record, not the Status.
  Result<DatasetVerify> Verify(const std::string& spec);
  Result<DatasetDiff> Diff(const std::string& a, const std::string& b);
  // format "yolo" or "coco"; `out` absent or empty (data::ExportVersion).
  Result<DatasetExport> Export(const std::string& spec, const std::string& format, const std::string& out);
  // The grid of what the trainer sees (data::WriteAugmentedPreview).
  // kInvalidArgument (command line) for bad augmentation values.
  Result<DatasetPreview> Preview(const PreviewRequest& req);
  // A page of the version's images with their boxes. kInvalidArgument at
  // {kRequestFile, 0, "split" | "class" | "offset" | "limit"} for a bad
  // filter or page (an unknown class names the version's classes).
  Result<DatasetImagesPage> Images(const DatasetImagesRequest& req);
  // The bytes of the image whose SHA-256 is `sha`, only when an entry of the
  // version has it: kInvalidArgument (field "sha") for anything but 64
  // lowercase hex digits, kNotFound (field "sha") for an image of another
  // version or dataset. The store verifies the bytes (kCorruption).
  Result<DatasetImageBytes> ImageBytes(const std::string& spec, const std::string& sha);
  // The findings of the version's stored report, filtered and paged
  // (kInvalidArgument at "severity", "offset" or "limit").
  Result<DatasetFindingsPage> Findings(const DatasetFindingsRequest& req);

 private:
  // Import after the analysis: the checks, then the commit.
  Result<DatasetImport> ImportAnalyzed(const std::string& path, const std::string& name, data::Analysis a,
                                       const data::ImportOptions& opts);

  store::MetadataStore& meta_;
  store::ArtifactStore& blobs_;
  Env& env_;
};

// The one JSON view of a dataset version: dataset, version ("v3"),
// version_id, created_at, num_images, num_boxes, num_classes, source,
// manifest_sha, report_sha, data_mode ("copy" or "reference").
nlohmann::json DatasetVersionJson(const store::DatasetVersionRecord& r);
// A list row: DatasetVersionJson(latest) + num_versions.
nlohmann::json DatasetSummaryJson(const store::DatasetSummary& s);
// The list document of `kestrel dataset list --json` and GET /api/datasets:
// {"ok": true, "datasets": [DatasetSummaryJson]}.
nlohmann::json DatasetListJson(const std::vector<store::DatasetSummary>& all);
// {"created", "version": DatasetVersionJson, "report"}.
nlohmann::json DatasetImportJson(const DatasetImport& r);
// {"ok" (no errors), "version_id", "report"}.
nlohmann::json DatasetValidationJson(const DatasetValidation& v);
// {"version": DatasetVersionJson, "names", "summary", "box_stats" (BoxStatsJson,
// app/dataset_box_stats.h: computed from the manifest), "report"}.
nlohmann::json DatasetShowJson(const data::VersionView& v);
// data::ManifestDiff's fields + {"a", "b": DatasetVersionJson, "classes":
// DatasetDiffClasses, "boxes": data::BoxDiff::ToJson}.
nlohmann::json DatasetDiffJson(const DatasetDiff& d);
// Instances per class in a and b (all splits, from the versions' stored
// summaries), matched by class name: [{"name", "a", "b", "delta" (b - a)}],
// a's classes in order, then b's new ones (0 where a version lacks one).
nlohmann::json DatasetDiffClasses(const DatasetDiff& d);
// {"ok", "version": DatasetVersionJson, "images", "hashed", "referenced_files",
// "referenced_bytes", "problems", "examples": [{"message", "file"}]}.
nlohmann::json DatasetVerifyJson(const DatasetVerify& v);
// One line, then a line per example problem.
std::string DatasetVerifyText(const DatasetVerify& v);
// {"out", "format"}.
nlohmann::json DatasetExportJson(const DatasetExport& e);
// {"out", "augmented"}.
nlohmann::json DatasetPreviewJson(const DatasetPreview& p);
// One manifest image: {"path", "split", "sha", "width", "height", "boxes":
// [{"cls", "cx", "cy", "w", "h"}]} (boxes normalized to the image, centre and size).
nlohmann::json DatasetImageJson(const data::ManifestEntry& e);
// {"version": DatasetVersionJson, "names", "total", "offset", "limit",
// "next_offset" (null on the last page), "images": [DatasetImageJson]}.
nlohmann::json DatasetImagesPageJson(const DatasetImagesPage& p);
// {"version", "checks", "total", "offset", "limit", "next_offset",
// "findings": [{severity, check, file, line, field, message, action,
// "image": DatasetImageJson or null, "pair": null, or for a near-duplicate
// or leakage finding (image.near_duplicate, split.leakage) both images:
// {"distance" (pHash Hamming), "a", "b": DatasetImageJson}}]}; both from the
// finding's typed fields (data::FindingFromJson), never from its message.
nlohmann::json DatasetFindingsPageJson(const DatasetFindingsPage& p);

// "image/jpeg", "image/png", "image/gif", "image/bmp", "image/webp",
// "image/tiff" from the first bytes; "application/octet-stream" otherwise.
std::string ImageContentType(std::string_view bytes);
// The manifest entry a finding is about, or -1. A finding with a typed
// image (Finding::image): the entry of that path, in its split (any split
// when kUnassigned). Otherwise by its file: an entry whose path ends `file`
// (an image path), else whose path without extension ends `file` without
// extension (a YOLO/VOC label file); among entries of the same path (one per
// split) the one whose split is a folder of `file`. Never from the message
// (a report stored before findings had an image resolves by its file alone).
int64_t ResolveFindingImage(const data::Manifest& m, const data::Finding& f);

}  // namespace kestrel::app
