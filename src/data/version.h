// A stored dataset version: its blobs and record, written and read back.
// The mechanics only, each a function of its inputs; which analysis may be
// stored, under which name, and how a front end's `data=` finds a version
// are the use cases of app::Datasets (app/datasets.h).
//
// A version is written in a crash-safe order (CommitVersion): image blobs,
// then manifest and report blobs (each atomic and deduplicated), then one
// metadata transaction that makes the version visible. A kill -9 at any
// point leaves either no version or a complete one; blobs of an interrupted
// import are unreferenced, never a half version.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/analyze.h"
#include "data/manifest.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::data {

struct VersionView {  // NOLINT(bugprone-exception-escape): an aggregate; the check misreads its implicit
                      // members
  store::DatasetVersionRecord record;
  Manifest manifest;
  nlohmann::json report;  // the stored validation report
};

// Larger stored reports (imported before findings were capped) are not
// parsed by ReadVersion(): VersionView::report says so instead.
inline constexpr uint64_t kMaxReportBytesLoaded = uint64_t{64} << 20;

// The manifest and report of `record`: the manifest verified against the
// version id (kCorruption naming the blob when it does not hash to it).
Result<VersionView> ReadVersion(const store::DatasetVersionRecord& record, store::ArtifactStore& blobs,
                                Env& env = Env::Default());
// The store's record of `spec` ("NAME", "NAME@vN", "NAME@<id prefix>";
// kNotFound from the store) read by ReadVersion. The one read path of the
// trainer and of app::Datasets.
Result<VersionView> LoadVersion(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                const std::string& spec, Env& env = Env::Default());

struct CommittedVersion {
  store::DatasetVersionRecord record;
  bool created = false;  // false: the store had this version under `name` already
};
// Phase 2 of import: stores `a` (read from `path` with `opts`) as a version
// of `name`, in the order above. `opts.source_label` (when set) replaces
// `path` in the record's source, the stored report and the summary;
// `opts.threads` writes the image blobs. Image bytes the analysis did not
// keep are read again and must still hash as analyzed (kAborted otherwise).
// `opts.data_mode` "reference" writes no image blobs: the manifest records
// each image file (ManifestEntry::file) from the stat analysis took before
// hashing it, which must still hold (kAborted otherwise), and the record's
// data_mode is "reference" (data/version_files.h reads such a version).
// Decides nothing: the caller has checked the name and that `a` may be
// stored (app::Datasets::Import). Serializing is done before the first
// write, so a failure there leaves no blob behind.
Result<CommittedVersion> CommitVersion(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                       const std::string& name, const std::string& path, const Analysis& a,
                                       const ImportOptions& opts, Env& env = Env::Default());

// kInvalidArgument (field "format") unless `format` is yolo or coco; an
// error unless `out_dir` is absent or an empty folder.
Status CheckExportTarget(const std::string& format, const std::string& out_dir, Env& env = Env::Default());
// Writes `v` as a dataset tree that imports back to the same version id
// (a referenced image is read from its file, checked: data/version_files.h):
// yolo: images/<split>/<path>, labels/<split>/<stem>.txt, data.yaml;
// coco: images/<split>/<path>, annotations/instances_<split>.json.
// All or nothing: the tree is built in a sibling "<out_dir>.kestrel-tmp-*"
// folder, synced, and renamed to `out_dir` only when complete; on any error
// (a corrupted blob, a full disk) the temporary folder is removed and
// `out_dir` is left as it was. Checks CheckExportTarget first.
Status ExportVersion(const VersionView& v, store::ArtifactStore& blobs, const std::string& format,
                     const std::string& out_dir, Env& env = Env::Default());

struct ManifestDiff {
  std::vector<std::string> added, removed;  // "split/path"
  std::vector<std::string> image_changed;   // same key, different image bytes
  std::vector<std::string> labels_changed;  // same image, different labels
  std::vector<std::string> split_moved;     // same path+image, other split
  bool names_changed = false;
  nlohmann::json ToJson() const;
};
ManifestDiff DiffManifests(const Manifest& a, const Manifest& b);

}  // namespace kestrel::data
