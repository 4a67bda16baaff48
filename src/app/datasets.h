// The dataset family's use cases (docs/datasets.md), called by every front
// end (`kestrel dataset ...` today, the HTTP server later): import, validate
// (dry run), list, show, diff, export, preview. Each returns a record; each
// record has one JSON view here, which `kestrel dataset ... --json` prints
// unchanged (the CLI adds only the document's "ok": true). The heavy work is
// the data module's (data/registry.h); this layer names the operations and
// their results. `dataset synth` stays in the CLI: it writes a test dataset
// through OpenCV and touches no store.
//
// Thread-safety: a Datasets borrows one MetadataStore (one per thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/loader.h"
#include "data/registry.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

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

// `dataset validate`, the dry run (no store needed): a source that cannot be
// read at all is an error; findings (even errors) are in the record.
Result<DatasetValidation> ValidateDataset(const std::string& path, const data::ImportOptions& opts,
                                          Env& env = Env::Default());

class Datasets {
 public:
  // All three are borrowed and must outlive this object.
  Datasets(store::MetadataStore& meta, store::ArtifactStore& blobs, Env& env = Env::Default())
      : meta_(meta), blobs_(blobs), registry_(meta, blobs, env) {}

  // Analyze + commit (data::Registry::Import). On failure `report_out` (when
  // given) holds the validation report if the source could be read.
  Result<data::ImportResult> Import(const std::string& path, const std::string& name,
                                    const data::ImportOptions& opts,
                                    data::ValidationReport* report_out = nullptr);
  // Every dataset with its newest version, by name.
  Result<std::vector<store::DatasetSummary>> List();
  // spec: "NAME", "NAME@vN", "NAME@<id prefix>".
  Result<data::VersionView> Show(const std::string& spec);
  Result<DatasetDiff> Diff(const std::string& a, const std::string& b);
  // format "yolo" or "coco"; `out` absent or empty (data::Registry::Export).
  Result<DatasetExport> Export(const std::string& spec, const std::string& format, const std::string& out);
  // The grid of what the trainer sees (data::WriteAugmentedPreview).
  // kInvalidArgument (command line) for bad augmentation values.
  Result<DatasetPreview> Preview(const PreviewRequest& req);

 private:
  store::MetadataStore& meta_;
  store::ArtifactStore& blobs_;
  data::Registry registry_;
};

// The one JSON view of a dataset version: dataset, version ("v3"),
// version_id, created_at, num_images, num_boxes, num_classes, source,
// manifest_sha, report_sha.
nlohmann::json DatasetVersionJson(const store::DatasetVersionRecord& r);
// A list row: DatasetVersionJson(latest) + num_versions.
nlohmann::json DatasetSummaryJson(const store::DatasetSummary& s);
// {"created", "version": DatasetVersionJson, "report"}.
nlohmann::json DatasetImportJson(const data::ImportResult& r);
// {"ok" (no errors), "version_id", "report"}.
nlohmann::json DatasetValidationJson(const DatasetValidation& v);
// {"version": DatasetVersionJson, "names", "summary", "report"}.
nlohmann::json DatasetShowJson(const data::VersionView& v);
// data::ManifestDiff's fields + {"a", "b": DatasetVersionJson}.
nlohmann::json DatasetDiffJson(const DatasetDiff& d);
// {"out", "format"}.
nlohmann::json DatasetExportJson(const DatasetExport& e);
// {"out", "augmented"}.
nlohmann::json DatasetPreviewJson(const DatasetPreview& p);

}  // namespace kestrel::app
