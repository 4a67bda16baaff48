// Phase 1 of a dataset import, and the dry run behind `kestrel dataset
// validate`: read a folder (YOLO, COCO, VOC), decode every image through the
// single decode entry point, validate, hash, find near duplicates, split and
// build the manifest. No writes. The stored half (blobs, the version record)
// is data/version.h's; the import use case that joins them and decides what
// may be stored is app::Datasets::Import (app/datasets.h).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/options.h"
#include "core/status.h"
#include "data/dataset.h"
#include "data/manifest.h"

namespace kestrel::data {

struct ImportOptions {
  std::string format = "auto";           // auto|yolo|coco|voc
  double val_ratio = 0.2;                // val share when the source has no split
  int64_t seed = 0;                      // split seed
  bool allow_errors = false;             // import anyway, excluding bad samples
  int64_t max_pixels = 100'000'000;      // decompression-bomb limit (stored w*h)
  int64_t max_label_bytes = 64 << 20;    // larger label/annotation files are refused
  int64_t max_boxes_per_image = 10'000;  // more: "label.too_many_boxes", sample excluded
  int near_dup_distance = 6;             // pHash Hamming distance for near duplicates
  int imgsz = 640;                       // training size used for tiny-object stats
  double tiny_object_px = 8.0;           // min side below this (at imgsz) = tiny
  double imbalance_ratio = 20.0;         // warn when max/min class count exceeds it
  int threads = 0;                       // 0 = all cores
  // copy: every image becomes a blob of the home. reference: the version
  // records each image file's absolute path, size, mtime and hash instead
  // (docs/datasets.md "Copy or reference"); labels are in the manifest either way.
  std::string data_mode = "copy";
  // Not a command-line key: what the version's source records after the
  // format ("" = the path read). An upload's unpacked folder is temporary,
  // so the server records "upload:FILE" instead; the stored report and
  // summary then name files as "upload:FILE/labels/a.txt" too
  // (core/json.h RelabelPaths), never the folder that is gone after the request.
  std::string source_label;

  void Bind(OptionSet& s);
};

// Findings are counted exactly but stored as capped examples (FindingList:
// 100 per check, 10 per file and check), so a report stays small whatever
// the input: ToJson() lists the examples, the exact count of every check and
// how many examples were left out.
struct ValidationReport {
  // Source paths listed in ToJson()'s "excluded" (the count is exact).
  static constexpr size_t kMaxExcludedListed = 1000;

  std::string source;  // path given by the user (invalid UTF-8 escaped)
  std::string format;  // detected format
  std::vector<std::string> names;
  FindingList findings;
  int64_t images_total = 0;           // images found in the source
  int64_t images_excluded = 0;        // dropped because of errors
  std::vector<std::string> excluded;  // their source paths
  int64_t boxes = 0;
  std::vector<int64_t> class_counts;  // instances per class (kept samples)
  std::vector<int64_t> tiny_counts;   // tiny instances per class
  int64_t near_duplicate_pairs = 0;
  int64_t leakage_pairs = 0;

  int64_t Count(Severity s) const;
  // Every string valid UTF-8, so dump() cannot throw.
  nlohmann::json ToJson() const;
  // Human-readable: summary, per-class table, findings grouped by check
  // (exact counts, at most `max_per_check` examples each).
  std::string ToText(size_t max_per_check = 10) const;
};

// One finding as the stored report holds it (docs/formats.md "report"):
// severity, check, file, line, field, message, action, and where set
// "image": {path, split}, "other": {file, path, split}, "distance".
nlohmann::json FindingToJson(const Finding& f);
// Back from a stored report's object, of any version: a field the object
// lacks or holds with another type keeps its default (a report stored
// before the typed fields reads as findings without image or pair; nothing
// is recovered from the message). Never throws.
Finding FindingFromJson(const nlohmann::json& j);

struct Analysis {
  Manifest manifest;  // canonical, version id = VersionId(manifest)
  ValidationReport report;
  std::vector<std::string> image_paths;  // disk path per manifest entry
  // The bytes that were hashed, per manifest entry, kept while their total
  // stays under a budget (512 MiB) so commit needs no second read; an empty
  // string means "re-read and re-verify at commit".
  std::vector<std::string> image_bytes;
  // Per manifest entry: the image file's stat taken before it was read and
  // hashed (what data_mode=reference records, after checking it still holds).
  std::vector<FileInfo> image_files;
};

// Phase 1 only: the dry run behind `kestrel dataset validate`. Hard input
// errors (no such path, malformed YAML/JSON/XML, paths escaping the root...)
// come back as a non-OK Status; per-sample problems are findings.
Result<Analysis> AnalyzeDataset(const std::string& path, const ImportOptions& opts,
                                Env& env = Env::Default());

// Counts and histograms stored with each version and printed by `show`.
nlohmann::json SummarizeVersion(const Manifest& m, const ValidationReport& r);

}  // namespace kestrel::data
