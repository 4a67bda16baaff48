// The schema, as an append-only list of migrations shared by the SQLite and
// PostgreSQL backends. Never edit a released migration; add a new one.
// Portable SQL only: TEXT, BIGINT, INTEGER, no AUTOINCREMENT, no SERIAL.
#include "store/metadata_store.h"

namespace kestrel::store {

const std::vector<std::vector<std::string>>& Migrations() {
  static const std::vector<std::vector<std::string>> kMigrations = {
      // 1: dataset registry.
      {
          "CREATE TABLE datasets ("
          "  name TEXT PRIMARY KEY,"
          "  created_at BIGINT NOT NULL)",
          "CREATE TABLE dataset_versions ("
          "  dataset TEXT NOT NULL REFERENCES datasets(name),"
          "  seq BIGINT NOT NULL,"
          "  version_id TEXT NOT NULL,"
          "  manifest_sha TEXT NOT NULL,"
          "  report_sha TEXT NOT NULL,"
          "  created_at BIGINT NOT NULL,"
          "  num_images BIGINT NOT NULL,"
          "  num_boxes BIGINT NOT NULL,"
          "  num_classes INTEGER NOT NULL,"
          "  source TEXT NOT NULL,"
          "  summary_json TEXT NOT NULL,"
          "  PRIMARY KEY (dataset, seq),"
          "  UNIQUE (dataset, version_id))",
          "CREATE INDEX dataset_versions_by_id ON dataset_versions(version_id)",
      },
  };
  return kMigrations;
}

int LatestSchemaVersion() { return static_cast<int>(Migrations().size()); }

void SplitDatasetRef(const std::string& spec, std::string* name, std::string* ref) {
  size_t at = spec.find('@');
  if (at == std::string::npos) {
    *name = spec;
    ref->clear();
  } else {
    *name = spec.substr(0, at);
    *ref = spec.substr(at + 1);
  }
}

}  // namespace kestrel::store
