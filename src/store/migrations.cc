// The schema, as an append-only list of migrations shared by the SQLite and
// PostgreSQL backends. Never edit a released migration; add a new one.
// Portable SQL only: TEXT, BIGINT, INTEGER, no AUTOINCREMENT, no SERIAL.
// A statement that starts with kPostgresOnly runs on PostgreSQL alone (the
// marker is an SQL comment, so the statement text stays valid as it is).
#include "store/metadata_store.h"

namespace kestrel::store {

const std::vector<std::vector<std::string>>& Migrations() {
  // Each statement is adjacent literals joined on purpose (one SQL text).
  // NOLINTBEGIN(bugprone-suspicious-missing-comma)
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
      // 2: job system (docs/jobs.md). Ids come from `counters` rows, locked
      // by the inserting transaction, so event ids are monotonic in commit
      // order (a reader paging with after_id never skips one).
      {
          "CREATE TABLE counters (name TEXT PRIMARY KEY, value BIGINT NOT NULL)",
          "INSERT INTO counters(name, value) VALUES ('job', 0), ('event', 0)",
          "CREATE TABLE jobs ("
          "  id BIGINT PRIMARY KEY,"
          "  spec_json TEXT NOT NULL,"
          "  config_json TEXT NOT NULL,"
          "  dataset_version TEXT NOT NULL,"
          "  priority INTEGER NOT NULL,"  // 0 high, 1 normal, 2 low
          "  dedup_key TEXT NOT NULL,"
          "  state TEXT NOT NULL,"
          "  attempt BIGINT NOT NULL,"
          "  lease_owner TEXT NOT NULL,"
          "  lease_until BIGINT NOT NULL,"
          "  not_before BIGINT NOT NULL,"
          "  max_retries INTEGER NOT NULL,"
          "  retries_used INTEGER NOT NULL,"
          "  max_infra_retries INTEGER NOT NULL,"
          "  infra_retries_used INTEGER NOT NULL,"
          "  backoff_ms TEXT NOT NULL,"  // comma-separated milliseconds
          "  device_kind TEXT NOT NULL,"
          "  device_memory_mb BIGINT NOT NULL,"
          "  wall_clock_limit_ms BIGINT NOT NULL,"
          "  created_at BIGINT NOT NULL,"
          "  updated_at BIGINT NOT NULL,"
          "  finished_at BIGINT NOT NULL,"
          "  result_json TEXT NOT NULL,"
          "  last_reason TEXT NOT NULL)",
          // At most one live job per dedup key: the idempotent-submit guard.
          "CREATE UNIQUE INDEX jobs_live_dedup ON jobs(dedup_key)"
          "  WHERE state IN ('queued', 'running', 'failed_retryable')",
          "CREATE INDEX jobs_claim ON jobs(state, priority, id)",
          "CREATE TABLE attempts ("
          "  job_id BIGINT NOT NULL REFERENCES jobs(id),"
          "  attempt BIGINT NOT NULL,"
          "  worker TEXT NOT NULL,"
          "  host TEXT NOT NULL,"
          "  pid BIGINT NOT NULL,"
          "  started_at BIGINT NOT NULL,"
          "  ended_at BIGINT NOT NULL,"  // 0 while running
          "  exit_code INTEGER NOT NULL,"
          "  signal INTEGER NOT NULL,"
          "  succeeded INTEGER NOT NULL,"
          "  stage TEXT NOT NULL,"
          "  failure_class TEXT NOT NULL,"
          "  infra INTEGER NOT NULL,"
          "  reason TEXT NOT NULL,"
          "  message TEXT NOT NULL,"
          "  PRIMARY KEY (job_id, attempt))",
          "CREATE INDEX attempts_by_end ON attempts(ended_at)",
          "CREATE TABLE events ("
          "  id BIGINT PRIMARY KEY,"
          "  job_id BIGINT NOT NULL,"
          "  attempt BIGINT NOT NULL,"
          "  kind TEXT NOT NULL,"
          "  payload_json TEXT NOT NULL,"
          "  created_at BIGINT NOT NULL)",
          "CREATE INDEX events_by_job ON events(job_id, id)",
          "CREATE TABLE workers ("
          "  id TEXT PRIMARY KEY,"
          "  host TEXT NOT NULL,"
          "  devices_json TEXT NOT NULL,"
          "  started_at BIGINT NOT NULL,"
          "  heartbeat_at BIGINT NOT NULL)",
      },
      // 3: small named settings shared by all workers and servers (circuit
      // breaker reset time, webhook delivery cursors...).
      {
          "CREATE TABLE settings ("
          "  name TEXT PRIMARY KEY,"
          "  value TEXT NOT NULL,"
          "  updated_at BIGINT NOT NULL)",
      },
      // 4: the claim query's index: live jobs only, in claim order, so a
      // claim reads the first claimable row instead of sorting every
      // queued job (ClaimJob repeats this predicate so both engines use it).
      {
          "CREATE INDEX jobs_claimable ON jobs(priority, id)"
          "  WHERE state IN ('queued', 'running', 'failed_retryable')",
      },
      // 5: PostgreSQL event ids from a sequence instead of the `event`
      // counter row. The row serialized every job transaction from its event
      // insert to COMMIT (claims topped out at ~250/s with 32 workers); with
      // the sequence, writers run in parallel and ReadEvents restores the
      // "a cursor never skips an event" guarantee with an advisory lock
      // (InsertEvent / ReadEvents in job_store.cc). SQLite keeps the counter:
      // its write transactions are serialized anyway.
      {
          std::string(kPostgresOnly) + "CREATE SEQUENCE event_ids",
          std::string(kPostgresOnly) +
              "SELECT setval('event_ids', (SELECT value FROM counters WHERE name = 'event') + 1, false)",
      },
      // 6: claim indexes split by what a claim looks for: ready jobs in
      // claim order, and running jobs by lease expiry. jobs_claimable also
      // held every running job, which each claim then walked past (claims
      // slowed down as more jobs ran). ClaimJob reads the head of each.
      // jobs_claim (state, priority, id) goes too: without statistics
      // SQLite preferred it for the ready head and sorted every ready job.
      {
          "CREATE INDEX jobs_ready ON jobs(priority, id)"
          "  WHERE state IN ('queued', 'failed_retryable')",
          "CREATE INDEX jobs_leased ON jobs(lease_until) WHERE state = 'running'",
          "DROP INDEX jobs_claimable",
          "DROP INDEX jobs_claim",
      },
      // 7: when an attempt's failure was detected, apart from when it failed.
      // A lost worker's attempt now ends at its last lease renewal and is
      // detected at the lease expiry (it used to end at the re-claim, which
      // made recovery look seconds long when it took minutes); the two MTTR
      // figures in Stats() read both. Older rows keep ended_at for both.
      {
          "ALTER TABLE attempts ADD COLUMN detected_at BIGINT NOT NULL DEFAULT 0",
          "UPDATE attempts SET detected_at = ended_at",
      },
      // 8: model registry (docs/models.md). Versions count per name through
      // a `counters` row "model:<name>"; metrics are text like every value
      // crossing SqlConn. A job registers at most one model; a dataset has at
      // most one `production` model (moved in one transaction by TagModel).
      {
          "CREATE TABLE models ("
          "  id TEXT PRIMARY KEY,"
          "  name TEXT NOT NULL,"
          "  seq BIGINT NOT NULL,"
          "  created_at BIGINT NOT NULL,"
          "  weights_sha TEXT NOT NULL,"
          "  weights_bytes BIGINT NOT NULL,"
          "  format TEXT NOT NULL,"
          "  dataset TEXT NOT NULL,"
          "  dataset_version TEXT NOT NULL,"
          "  config_hash TEXT NOT NULL,"
          "  job_id BIGINT NOT NULL,"
          "  attempt BIGINT NOT NULL,"
          "  host TEXT NOT NULL,"
          "  kestrel_version TEXT NOT NULL,"
          "  map50 TEXT NOT NULL,"
          "  map50_95 TEXT NOT NULL,"
          "  lineage_json TEXT NOT NULL,"
          "  eval_json TEXT NOT NULL,"
          "  comparison_json TEXT NOT NULL,"
          "  UNIQUE (name, seq))",
          "CREATE UNIQUE INDEX models_by_job ON models(job_id) WHERE job_id > 0",
          "CREATE INDEX models_by_dataset_version ON models(dataset_version)",
          "CREATE INDEX models_by_weights ON models(weights_sha)",
          "CREATE TABLE model_tags ("
          "  model_id TEXT NOT NULL REFERENCES models(id),"
          "  tag TEXT NOT NULL,"
          "  dataset TEXT NOT NULL,"
          "  created_at BIGINT NOT NULL,"
          "  PRIMARY KEY (model_id, tag))",
          "CREATE UNIQUE INDEX model_tags_one_production ON model_tags(dataset) WHERE tag = 'production'",
      },
      // 9: config templates (docs/templates.md): named, versioned sets of
      // submit keys. Versions count per name through a `counters` row
      // "template:<name>" (as models do); keys_json is the canonical JSON
      // object of key -> value text, content_sha its sha256.
      {
          "CREATE TABLE config_templates ("
          "  name TEXT NOT NULL,"
          "  seq BIGINT NOT NULL,"
          "  created_at BIGINT NOT NULL,"
          "  keys_json TEXT NOT NULL,"
          "  content_sha TEXT NOT NULL,"
          "  PRIMARY KEY (name, seq))",
      },
      // 10: min_map50 (the quality gate) becomes a job column like the other
      // job keys; it used to ride in config_json, which the trainer and the
      // val child had to erase it from again. Jobs stored before keep their
      // gate: a numeric min_map50 moves from the config to the column (as
      // text, like every double in the store), and the key leaves every
      // config. dedup_key is left alone: JobDedupKey folds the column back in,
      // so it still matches. SQLite and PostgreSQL read JSON differently.
      {
          "ALTER TABLE jobs ADD COLUMN min_map50 TEXT NOT NULL DEFAULT '0'",
          std::string(kSqliteOnly) +
              "UPDATE jobs SET min_map50 = CAST(json_extract(config_json, '$.min_map50') AS TEXT)"
              " WHERE json_valid(config_json) AND json_type(config_json, '$.min_map50') IN ('integer', "
              "'real')",
          std::string(kSqliteOnly) +
              "UPDATE jobs SET config_json = json_remove(config_json, '$.min_map50')"
              " WHERE json_valid(config_json) AND json_type(config_json, '$.min_map50') IS NOT NULL",
          std::string(kPostgresOnly) + "UPDATE jobs SET min_map50 = config_json::jsonb ->> 'min_map50'"
                                       " WHERE jsonb_typeof(config_json::jsonb -> 'min_map50') = 'number'",
          std::string(kPostgresOnly) +
              "UPDATE jobs SET config_json = (config_json::jsonb - 'min_map50')::text"
              " WHERE config_json::jsonb ? 'min_map50'",
      },
      // 11: API tokens of `kestrel serve` (docs/server.md "Auth"): only the
      // sha256 of each secret; a revoked token keeps its row (revoked_at),
      // and a name is unique among live tokens.
      {
          "CREATE TABLE api_tokens ("
          "  id TEXT PRIMARY KEY,"
          "  name TEXT NOT NULL,"
          "  secret_sha TEXT NOT NULL,"
          "  read_only INTEGER NOT NULL,"
          "  created_at BIGINT NOT NULL,"
          "  last_used_at BIGINT NOT NULL DEFAULT 0,"
          "  revoked_at BIGINT NOT NULL DEFAULT 0)",
          "CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens(name) WHERE revoked_at = 0",
      },
      // 12: exports of registered models (docs/export.md "In the registry"):
      // one row per `kestrel export` of a model; the file's sha256 and size
      // when written, the request's options and the per-runtime verification
      // as JSON text, and whether it verified.
      {
          "CREATE TABLE model_exports ("
          "  id TEXT PRIMARY KEY,"
          "  model_id TEXT NOT NULL REFERENCES models(id),"
          "  created_at BIGINT NOT NULL,"
          "  format TEXT NOT NULL,"
          "  path TEXT NOT NULL,"
          "  sha256 TEXT NOT NULL,"
          "  bytes BIGINT NOT NULL,"
          "  options_json TEXT NOT NULL,"
          "  verified INTEGER NOT NULL,"
          "  verification_json TEXT NOT NULL,"
          "  kestrel_version TEXT NOT NULL)",
          "CREATE INDEX model_exports_by_model ON model_exports(model_id, created_at)",
      },
      // 13: a worker that exits gracefully marks its row stopped (docs/jobs.md
      // "Workers"), so it shows `stopped` at once instead of `idle` until its
      // heartbeat goes stale. 0 = running (or crashed: then stale by age); a
      // heartbeat after a stop (the same --id started again) clears it.
      {
          "ALTER TABLE workers ADD COLUMN stopped_at BIGINT NOT NULL DEFAULT 0",
      },
      // 14: hyperparameter studies (issue 32, docs/tune.md "In the store"):
      // a study is a name (unique) with its space hash, settings and state,
      // and the `tune` job coordinating it; each trial a row keyed by
      // (study, number) naming its `train` job. Values the store never reads
      // (params, per-epoch values, settings) are JSON text.
      {
          "CREATE TABLE studies ("
          "  id BIGINT PRIMARY KEY,"
          "  name TEXT NOT NULL UNIQUE,"
          "  space_hash TEXT NOT NULL,"
          "  space_json TEXT NOT NULL,"
          "  settings_json TEXT NOT NULL,"
          "  state TEXT NOT NULL,"
          "  job_id BIGINT NOT NULL DEFAULT 0,"
          "  created_at BIGINT NOT NULL,"
          "  updated_at BIGINT NOT NULL)",
          "CREATE TABLE study_trials ("
          "  study_id BIGINT NOT NULL REFERENCES studies(id),"
          "  number BIGINT NOT NULL,"
          "  job_id BIGINT NOT NULL DEFAULT 0,"
          "  state TEXT NOT NULL,"
          "  params_json TEXT NOT NULL,"
          "  value TEXT NOT NULL DEFAULT '',"
          "  intermediate_json TEXT NOT NULL,"
          "  epochs_run BIGINT NOT NULL DEFAULT 0,"
          "  pruned_at BIGINT NOT NULL DEFAULT 0,"
          "  promotions BIGINT NOT NULL DEFAULT 0,"
          "  created_at BIGINT NOT NULL,"
          "  updated_at BIGINT NOT NULL,"
          "  PRIMARY KEY (study_id, number))",
      },
      // 15: hosts, quarantine, drain and environment fingerprints (issue 31,
      // docs/jobs.md "Quarantine and drain", "Environment fingerprint"): a
      // host row counts its environment failures and carries its quarantine
      // and a host-wide drain; a worker row its own drain and the hash of
      // its fingerprint; an attempt the hash it ran under; the fingerprints
      // themselves once per hash.
      {
          "CREATE TABLE hosts ("
          "  host TEXT PRIMARY KEY,"
          "  env_failures BIGINT NOT NULL DEFAULT 0,"
          "  quarantined_at BIGINT NOT NULL DEFAULT 0,"
          "  quarantine_reason TEXT NOT NULL DEFAULT '',"
          "  last_failure TEXT NOT NULL DEFAULT '',"
          "  drain_at BIGINT NOT NULL DEFAULT 0,"
          "  cleared_at BIGINT NOT NULL DEFAULT 0,"
          "  updated_at BIGINT NOT NULL)",
          "ALTER TABLE workers ADD COLUMN drain_at BIGINT NOT NULL DEFAULT 0",
          "ALTER TABLE workers ADD COLUMN fingerprint TEXT NOT NULL DEFAULT ''",
          "ALTER TABLE attempts ADD COLUMN fingerprint TEXT NOT NULL DEFAULT ''",
          "CREATE TABLE fingerprints ("
          "  hash TEXT PRIMARY KEY,"
          "  json TEXT NOT NULL,"
          "  created_at BIGINT NOT NULL)",
      },
      // 16: an attempt's newest checkpoint on a shared artifact store (issue
      // 31, docs/disk.md "Job checkpoints on S3"): its JSON (keys, sha256s,
      // epoch) and when it was recorded; '' = none.
      {
          "ALTER TABLE attempts ADD COLUMN checkpoint TEXT NOT NULL DEFAULT ''",
          "ALTER TABLE attempts ADD COLUMN checkpoint_at BIGINT NOT NULL DEFAULT 0",
      },
      // 17: runs people can tell apart (issue 33, docs/jobs.md "Names, tags
      // and notes"): a name (app::SubmitJob gives one from data, model and
      // epochs; older jobs keep ''), tags as a JSON array of strings, and a
      // free-text note, all changed by LabelJob.
      {
          "ALTER TABLE jobs ADD COLUMN name TEXT NOT NULL DEFAULT ''",
          "ALTER TABLE jobs ADD COLUMN tags_json TEXT NOT NULL DEFAULT '[]'",
          "ALTER TABLE jobs ADD COLUMN note TEXT NOT NULL DEFAULT ''",
      },
      // 18: dataset versions whose images stay where they were imported from
      // (issue 28, docs/datasets.md "Copy or reference"): 'copy' (blobs,
      // every version before this) or 'reference' (the manifest names files).
      {
          "ALTER TABLE dataset_versions ADD COLUMN data_mode TEXT NOT NULL DEFAULT 'copy'",
      },
  };
  // NOLINTEND(bugprone-suspicious-missing-comma)
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
    if (ref->empty()) *ref = kEmptyVersionRef;
  }
}

}  // namespace kestrel::store
