// The model registry's use cases (docs/models.md), called by every front end
// (the CLI's `kestrel models`, the worker when a job succeeds, and later the
// HTTP server). Each operation returns records; ModelJson is the one JSON
// view of a model, which `--json` prints unchanged.
//
// A registered model version is: the weights blob (content-addressed in the
// ArtifactStore, verified on every use), its evaluation record (metrics,
// per-class table when the run wrote one, the run's plots as blobs), its
// lineage (dataset version, effective config and its hash, kestrel version,
// parent weights, job/attempt/host) and, for models from jobs, the stored
// comparison with the dataset's production model (or the best one) on the
// same dataset version.
//
// References (ResolveModel): "NAME" (its newest version), "NAME@vN",
// "NAME@latest", "NAME@TAG" (e.g. birds@production), or an id prefix of at
// least 6 hex chars. Ambiguous prefixes are errors.
//
// Thread-safety: a ModelRegistry borrows one MetadataStore (one per thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "store/artifact_store.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// What a registration is made of (RegisterJobModel fills it from a job).
struct RegisterRequest {
  std::string weights_path;        // the file; copied into the artifact store
  std::string name;                // "" = the dataset's name
  std::string dataset;             // dataset name ("" when unknown)
  std::string dataset_version;     // version id ("" when unknown)
  std::string config_json = "{}";  // the effective config (a JSON object)
  std::string parent_path;         // pretrained=/resume= as given ("" = none)
  std::string parent_kind;         // "pretrained" or "resume"
  int64_t job_id = 0;              // 0 = registered by hand
  int64_t attempt = 0;
  std::string worker;
  std::string host;
  std::string run_dir;  // where the plots and results.csv are ("" = none)
  // Evaluation record: {"metrics": {"map50", "map50_95", "precision",
  // "recall", "fitness", ...}, "per_class": [...], ...}; plots are added
  // from run_dir. Missing metrics count as 0.
  nlohmann::json eval = nlohmann::json::object();
  bool compare = true;  // store the comparison with the baseline
};

// Outcome of TagModel / PromoteModel.
struct TagResult {
  store::ModelRecord model;
  std::string tag;
  std::optional<store::ModelRecord> previous;  // production: the model it moved from
};

// An export of a registered model to record (ModelRegistry::RecordExport):
// what `kestrel export` reported (app/export.h ExportResultJson).
struct ExportRecordRequest {
  std::string path;    // the written file; hashed when recorded
  std::string format;  // "onnx"
  // {"imgsz": [h, w], "batch", "opset", "dynamic", "half"}
  nlohmann::json options = nlohmann::json::object();
  bool verified = false;
  // The export's "verification" object: per-runtime figures, tolerance, error.
  nlohmann::json verification = nlohmann::json::object();
};

// A weights argument after ResolveWeights: the file to load and, when it
// named a registered model, that model.
struct ResolvedWeights {
  std::string path;
  std::optional<store::ModelRecord> model;
};

class ModelRegistry {
 public:
  // All three are borrowed and must outlive the registry.
  ModelRegistry(store::MetadataStore& meta, store::ArtifactStore& blobs, Env& env)
      : meta_(meta), blobs_(blobs), env_(env) {}

  // Copies the weights (and the run's plots) into the artifact store and
  // adds the next version of the name, with lineage and, when req.compare,
  // the comparison with the baseline. Idempotent per job, and per (name,
  // weights) for hand registrations: *created = false returns the existing.
  Result<store::ModelRecord> Register(const RegisterRequest& req, int64_t now_ms, bool* created = nullptr);
  // The registration of a succeeded job: weights = its result's `best`,
  // metrics from the result and results.csv, lineage from the job and its
  // attempt. kFailedPrecondition when the job has not succeeded.
  Result<store::ModelRecord> RegisterJobModel(int64_t job_id, int64_t now_ms, bool* created = nullptr);

  // Newest first.
  Result<std::vector<store::ModelRecord>> List(const store::ModelFilter& filter);
  Result<store::ModelRecord> Resolve(const std::string& ref);
  // Tags a model. `production` moves from the dataset's holder in the same
  // transaction (TagResult::previous).
  Result<TagResult> Tag(const std::string& ref, const std::string& tag, int64_t now_ms);
  Result<store::ModelRecord> Untag(const std::string& ref, const std::string& tag);
  Result<TagResult> Promote(const std::string& ref, int64_t now_ms) {
    return Tag(ref, store::kProductionTag, now_ms);
  }
  // The production holder is refused unless `force`. The blobs stay (they
  // may be shared; a garbage collector decides).
  Result<store::ModelRecord> Delete(const std::string& ref, bool force);

  // A weights argument (`val model=`, `predict model=`, `compare`,
  // `train pretrained=`): an existing file is a path, as before; otherwise a
  // model reference resolves to its blob, verified by hash (kCorruption when
  // the blob was damaged). Text that is neither an existing file nor a
  // registered model is returned unchanged (the caller reports the missing
  // file as it always did).
  Result<ResolvedWeights> ResolveWeights(const std::string& text);
  // The reference half of ResolveWeights, without looking at the filesystem
  // (the HTTP server's job keys, server/job_paths.h): the registered model
  // `ref` names and its hash-verified blob. kNotFound / kInvalidArgument
  // when it names no model, kCorruption when the blob was damaged.
  Result<ResolvedWeights> ResolveReference(const std::string& ref);

  // Records an export of `model` (migration 12): the sha256 and size of the
  // file at req.path as it is now, the options and verification as given,
  // this build's KestrelVersion. Idempotent per file (the store's
  // AddModelExport): when the model already has a record of the same
  // absolute path and sha256 (an export job retried after a crash between
  // its record and its end, or the same export run again), that record is
  // updated and returned with *created false, never a second one. kNotFound
  // (field `path`) when the file is missing; ModelJson with `detail` lists
  // the record.
  Result<store::ModelExportRecord> RecordExport(const store::ModelRecord& model,
                                                const ExportRecordRequest& req, int64_t now_ms,
                                                bool* created = nullptr);

  // The comparison of `model` with the baseline among `others` (see
  // docs/models.md); null when there is no baseline on the same version.
  static nlohmann::json Compare(const store::ModelRecord& model,
                                const std::vector<store::ModelRecord>& others, int64_t now_ms);

 private:
  // `m`'s weights blob, read whole and hash-verified.
  Result<ResolvedWeights> VerifiedWeights(const store::ModelRecord& m);
  store::MetadataStore& meta_;
  store::ArtifactStore& blobs_;
  Env& env_;
};

// The one JSON view of a model: id, name, version ("v3"), ref ("name@v3"),
// created_ms, tags, weights {sha256, bytes, format, path}, dataset,
// dataset_version, config_hash, job_id, attempt, host, kestrel_version,
// metrics {map50, map50_95}, and with `detail` also lineage, evaluation,
// comparison (null when none) and exports (ModelExportJson each, oldest
// first).
nlohmann::json ModelJson(const store::ModelRecord& m, const store::ArtifactStore& blobs, bool detail);
// The list document of `kestrel models list --json` and GET /api/models:
// {"ok": true, "models": [ModelJson without detail]}.
nlohmann::json ModelListJson(const std::vector<store::ModelRecord>& models,
                             const store::ArtifactStore& blobs);
// One export record: id, created_ms, format, path, sha256, bytes, options,
// verified, verification (the export's own object), kestrel_version.
nlohmann::json ModelExportJson(const store::ModelExportRecord& e);
// The JSON view of a TagResult: {"model": ModelJson, "tag", "previous": ModelJson|null}.
nlohmann::json TagResultJson(const TagResult& r, const store::ArtifactStore& blobs);

// sha256 of the canonical form (sorted keys, compact) of a JSON config;
// kInvalidArgument when it is not JSON.
Result<std::string> ConfigHash(const std::string& config_json);

// `git describe --always --dirty` of the source tree when it was built, else
// the project version (core of the lineage's kestrel_version).
const char* KestrelVersion();

}  // namespace kestrel::app
