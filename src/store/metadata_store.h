// MetadataStore: the transactional record of what Kestrel knows (datasets and
// their versions now; jobs, attempts and events later). Two implementations
// share one schema and migration set: SQLite (embedded default) and
// PostgreSQL (arrives with the job system), so SQL here stays portable.
//
// Thread-safety: one MetadataStore per thread (each holds its own
// connection); several processes may open the same database concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::store {

// One immutable dataset version. The blobs it names live in the ArtifactStore.
struct DatasetVersionRecord {
  std::string dataset;       // registry name, e.g. "birds"
  int64_t seq = 0;           // 1-based position within the dataset ("v3")
  std::string version_id;    // sha256 of the canonical manifest
  std::string manifest_sha;  // blob: full manifest JSON (entries + boxes)
  std::string report_sha;    // blob: validation report JSON
  int64_t created_at = 0;    // Unix seconds
  int64_t num_images = 0;
  int64_t num_boxes = 0;
  int num_classes = 0;
  std::string source;        // where it was imported from, "yolo:/path"
  std::string summary_json;  // small JSON: counts per split, findings summary
};

struct DatasetSummary {
  std::string name;
  int64_t num_versions = 0;
  DatasetVersionRecord latest;
};

class MetadataStore {
 public:
  virtual ~MetadataStore() = default;

  // url: "sqlite:PATH", or a plain PATH (SQLite). Creates and migrates the
  // schema when needed.
  static Result<std::unique_ptr<MetadataStore>> Open(const std::string& url);

  // Highest applied migration.
  virtual Result<int> SchemaVersion() = 0;

  // Adds `rec` (seq and created_at are assigned) in one transaction. When
  // the dataset already has a version with the same version_id, nothing is
  // written and that record is returned with *created = false.
  virtual Result<DatasetVersionRecord> AddDatasetVersion(const DatasetVersionRecord& rec,
                                                         bool* created) = 0;
  virtual Result<std::vector<DatasetSummary>> ListDatasets() = 0;
  // Oldest first.
  virtual Result<std::vector<DatasetVersionRecord>> ListVersions(const std::string& dataset) = 0;
  // ref: "" or "latest" = newest; "vN" = seq N; otherwise a version-id prefix
  // of at least 6 hex chars (ambiguous prefixes are an error).
  virtual Result<DatasetVersionRecord> GetVersion(const std::string& dataset,
                                                  const std::string& ref) = 0;
};

// The latest schema version this build knows (number of migrations).
int LatestSchemaVersion();
// The migration set, shared by both backends. Each entry is one migration
// (a list of statements applied in one transaction).
const std::vector<std::vector<std::string>>& Migrations();

// Splits "NAME@REF" into name and ref ("" when absent).
void SplitDatasetRef(const std::string& spec, std::string* name, std::string* ref);

}  // namespace kestrel::store
