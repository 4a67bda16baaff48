// Records of the model registry as stored by MetadataStore (docs/models.md):
// one row per registered model version, and its tags. The store keeps the
// records and enforces the rules that need a transaction (versions v1, v2,
// ... per name; at most one `production` model per dataset); building a
// record (hashing weights, lineage, comparison) is the application layer's
// (app/models.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kestrel::store {

// The tag a dataset's serving model holds; at most one model per dataset.
inline constexpr const char* kProductionTag = "production";

// One export of a registered model (migration 12; docs/export.md "In the
// registry"): what `kestrel export model=NAME@vN` wrote and how it verified.
struct ModelExportRecord {
  std::string id;        // 64 hex chars, assigned by the caller
  std::string model_id;  // the exported model (ModelRecord::id)
  int64_t created_ms = 0;
  std::string format;  // "onnx"
  std::string path;    // the written file as given
  std::string sha256;  // of the file when written
  int64_t bytes = 0;
  std::string options_json = "{}";  // {"imgsz": [h, w], "batch", "opset", "dynamic", "half"}
  bool verified = false;
  std::string verification_json = "{}";  // the export's "verification" object, runtimes included
  std::string kestrel_version;
};

struct ModelRecord {
  std::string id;           // 64 hex chars, assigned by the caller; refs may use a prefix
  std::string name;         // registry name ("birds"); versions count per name
  int64_t seq = 0;          // 1-based version within `name` ("v3"); assigned by AddModel
  int64_t created_ms = 0;   // Unix ms; from the caller
  std::string weights_sha;  // artifact-store blob of the weights file
  int64_t weights_bytes = 0;
  std::string format;           // "safetensors" or "ultralytics.pt"
  std::string dataset;          // dataset name the model was trained on ("" when unknown)
  std::string dataset_version;  // version id (sha256) of that dataset version ("" when unknown)
  std::string config_hash;      // sha256 of the canonical effective config ("" when unknown)
  int64_t job_id = 0;           // 0 = registered by hand (`models register`)
  int64_t attempt = 0;
  std::string host;  // worker host that trained it
  std::string kestrel_version;
  // The evaluation record's headline numbers; none = never measured (a run
  // trained with val=false, a weights file registered by hand), stored as ""
  // in the TEXT column, shown as absent, never compared as 0.
  std::optional<double> map50;
  std::optional<double> map50_95;
  std::string lineage_json = "{}";         // full lineage: config, parent weights, ...
  std::string eval_json = "{}";            // evaluation record: metrics, per-class table, plot files
  std::string comparison_json;             // "" = none; else the stored comparison with the baseline
  std::vector<std::string> tags;           // sorted; filled on read
  std::vector<ModelExportRecord> exports;  // oldest first; filled on read
};

struct ModelFilter {
  std::string id_prefix;        // "" = any; else lowercase hex, compared with the id's start
  std::string name;             // "" = any
  int64_t seq = 0;              // 0 = any (with name: one version)
  std::string dataset;          // "" = any
  std::string dataset_version;  // "" = any
  std::string tag;              // "" = any
  int64_t job_id = 0;           // 0 = any
  std::string weights_sha;      // "" = any
};

// A tag: lowercase letters, digits, '-', '_', '.', 1-64 chars, starting with
// a letter (so it can never look like a version "v3"... except "v" + letters,
// which is fine: version refs are "v" + digits only).
bool IsValidModelTag(const std::string& tag);
// A model name: 1-128 chars of letters, digits, '-', '_', '.', not starting
// with '.' or '-' and without '@' or '/' (those separate refs and paths).
bool IsValidModelName(const std::string& name);

}  // namespace kestrel::store
