// MetadataStore: the transactional record of what Kestrel knows: datasets
// and their versions, and the job system (jobs, attempts, events, workers;
// semantics in docs/jobs.md). Two backends share one schema, one migration
// set and one implementation of the logic: SQLite (embedded default) and
// PostgreSQL; they differ only in a small connection adapter (sql_conn.h).
//
// Thread-safety: one MetadataStore per thread (each holds its own
// connection); several processes may open the same database concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/checkpoint_types.h"
#include "store/job_types.h"
#include "store/model_types.h"
#include "store/study_types.h"
#include "store/template_types.h"
#include "store/token_types.h"

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
  // "copy": the images are blobs; "reference": the manifest names each
  // image file (data::ReferencedFile; docs/datasets.md "Copy or reference").
  std::string data_mode = "copy";
};

struct DatasetSummary {
  std::string name;
  int64_t num_versions = 0;
  DatasetVersionRecord latest;
};

class MetadataStore {
 public:
  virtual ~MetadataStore() = default;

  // url: "sqlite:PATH", a plain PATH (SQLite), or "postgresql://..." /
  // "postgres://..." (any libpq URL). Creates and migrates the schema when
  // needed.
  static Result<std::unique_ptr<MetadataStore>> Open(const std::string& url);

  // Highest applied migration.
  virtual Result<int> SchemaVersion() = 0;

  // Adds `rec` (seq and created_at are assigned) in one transaction. When
  // the dataset already has a version with the same version_id, nothing is
  // written and that record is returned with *created = false.
  virtual Result<DatasetVersionRecord> AddDatasetVersion(const DatasetVersionRecord& rec, bool* created) = 0;
  virtual Result<std::vector<DatasetSummary>> ListDatasets() = 0;
  // Oldest first.
  virtual Result<std::vector<DatasetVersionRecord>> ListVersions(const std::string& dataset) = 0;
  // ref: "" or "latest" = newest; "vN" = seq N; otherwise a version-id prefix
  // of at least 6 hex chars (ambiguous prefixes are an error).
  virtual Result<DatasetVersionRecord> GetVersion(const std::string& dataset, const std::string& ref) = 0;
  // Every version whose id is one of `version_ids` (no repeats), in one
  // query (the job list names a page's datasets with it), ordered by
  // dataset then seq. An id may come back more than once: the same content
  // imported under two names is one id in each; ids not in the registry are
  // absent.
  virtual Result<std::vector<DatasetVersionRecord>> ListVersionsById(
      const std::vector<std::string>& version_ids) = 0;

  // ---- jobs (docs/jobs.md). Every change is one transaction; state changes
  // also append a "state" event. `now_ms` is Unix milliseconds from an Env.

  // Idempotent: dedup_key = sha256(dataset_version, canonical config). While
  // a live (queued/running/failed_retryable) job with that key exists, returns
  // it with *created = false; holds under concurrent submitters.
  virtual Result<JobRecord> SubmitJob(const JobSpec& spec, int64_t now_ms, bool* created) = 0;
  // Highest priority first, FIFO within a priority, among queued jobs (and
  // failed_retryable ones when req.allow_retries) whose not_before has come,
  // and running jobs whose lease expired (their attempt is closed as an
  // infrastructure failure first; past the infra cap the job fails
  // permanently). Only jobs that fit one of req.devices. Increments attempt,
  // sets the lease. kNotFound when nothing is claimable.
  virtual Result<ClaimedJob> ClaimJob(const ClaimRequest& req) = 0;
  // Extends the lease to now + lease_ms. kAborted when `attempt` is no longer
  // the job's running attempt held by `worker` (fencing: stop the child).
  virtual Status RenewLease(int64_t job_id, int64_t attempt, const std::string& worker, int64_t now_ms,
                            int64_t lease_ms) = 0;
  // Records the pid of the child running `attempt` once it has started (the
  // host came with the claim), so `jobs show` names the process while it
  // runs and after a lost worker. kAborted, changing nothing, when the
  // attempt is not running on `worker` any more.
  virtual Status RecordAttemptPid(int64_t job_id, int64_t attempt, const std::string& worker,
                                  int64_t pid) = 0;
  // Ends the attempt and moves the job: succeeded, failed_retryable (with
  // not_before = now + backoff) or failed_permanent (permanent class or budget
  // spent). kAborted, changing nothing, when the attempt is not current.
  virtual Result<JobRecord> CompleteAttempt(int64_t job_id, int64_t attempt, const std::string& worker,
                                            const AttemptOutcome& outcome, int64_t now_ms) = 0;
  // Queued/failed_retryable/running -> cancelled (a running worker learns it
  // when its next RenewLease fails). kFailedPrecondition when finished.
  virtual Result<JobRecord> CancelJob(int64_t job_id, int64_t now_ms) = 0;
  // Sets the fields of `change` that are set (name, tags, note), in any
  // state; the job's state, times and dedup key are untouched. kNotFound
  // naming `job` for an unknown id. Returns the job as stored after.
  virtual Result<JobRecord> LabelJob(int64_t job_id, const JobLabelChange& change) = 0;
  // Manual retry of a finished failed/cancelled job with a fresh budget.
  // kAlreadyExists when an identical job is live meanwhile.
  virtual Result<JobRecord> RetryJob(int64_t job_id, int64_t now_ms) = 0;
  virtual Result<JobRecord> GetJob(int64_t job_id) = 0;
  // The jobs `filter` selects, in its sort order (default newest first),
  // from its cursor and offset, at most `limit`; one query.
  virtual Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter) = 0;
  // How many jobs `filter` selects, ignoring its cursor, offset and limit.
  virtual Result<int64_t> CountJobs(const JobFilter& filter) = 0;
  // Oldest first.
  virtual Result<std::vector<AttemptRecord>> ListAttempts(int64_t job_id) = 0;
  // The last `n` finished attempts over all jobs, newest first (circuit
  // breaker input).
  virtual Result<std::vector<AttemptRecord>> RecentAttempts(int n) = 0;
  // Returns the new event id (monotonic in commit order).
  virtual Result<int64_t> AppendEvent(const EventRecord& ev) = 0;
  // Events with id > after_id in id order; job_id 0 = all jobs.
  virtual Result<std::vector<EventRecord>> ReadEvents(int64_t after_id, int64_t job_id, int limit) = 0;
  virtual Status UpsertWorker(const WorkerRecord& w) = 0;
  virtual Result<std::vector<WorkerRecord>> ListWorkers() = 0;
  virtual Result<JobStats> Stats() = 0;

  // ---- hosts: quarantine and drain (docs/jobs.md "Quarantine and drain";
  // records in job_types.h), and environment fingerprints.

  // Counts an environment failure of `host` (an attempt classed
  // `environment`, or the worker's doctor failing at start) with its
  // message; when the count since the last unquarantine reaches
  // `quarantine_after` (>= 1) the host is quarantined with a reason naming
  // the count and the message. One transaction; returns the host as it now is.
  virtual Result<HostRecord> RecordEnvironmentFailure(const std::string& host, const std::string& message,
                                                      int quarantine_after, int64_t now_ms) = 0;
  // Lifts a quarantine and resets the count; kNotFound for a host the store
  // has no row for.
  virtual Result<HostRecord> UnquarantineHost(const std::string& host, int64_t now_ms) = 0;
  // Drains (drain=true) or undrains `target`: a worker id when a worker has
  // that id, else a host that some worker registered from or that has a host
  // row (every worker of it, also ones started later). Returns the ids of the
  // registered workers it applies to; kNotFound when `target` is neither.
  virtual Result<std::vector<std::string>> SetDrain(const std::string& target, bool drain,
                                                    int64_t now_ms) = 0;
  virtual Result<std::vector<HostRecord>> ListHosts() = 0;
  // Whether `worker` on `host` may claim: drained (its row or its host) and
  // quarantined (its host). Unknown ids and hosts are neither.
  virtual Result<WorkerControl> GetWorkerControl(const std::string& worker, const std::string& host) = 0;
  // Stores a fingerprint's JSON under its hash (idempotent: an existing hash
  // is kept as it is).
  virtual Status PutFingerprint(const std::string& hash, const std::string& json, int64_t now_ms) = 0;
  // kNotFound for a hash never stored.
  virtual Result<std::string> GetFingerprint(const std::string& hash) = 0;

  // ---- job checkpoints shared between hosts (docs/disk.md "Job checkpoints
  // on S3"; only with an artifact store that SharesJobFiles()).

  // Records `checkpoint_json` (the attempt's newest checkpoint as the
  // uploader describes it: keys, sha256s, epoch) as the resume point the
  // attempt reached. Fenced like RecordAttemptPid, in one conditional
  // UPDATE: kAborted, changing nothing, when the attempt ended or was
  // re-claimed, so a stale attempt's checkpoint never becomes the job's
  // resume point. The default (a store without the column) is kFailedPrecondition.
  virtual Status RecordCheckpoint(int64_t job_id, int64_t attempt, const std::string& checkpoint_json,
                                  int64_t now_ms);
  // The job's attempts that recorded a checkpoint, newest attempt first.
  virtual Result<std::vector<CheckpointRecord>> ListCheckpoints(int64_t job_id);

  // ---- settings: small named values shared by every process on the store
  // (e.g. "breaker.reset_ms", "webhook.cursor.<hash>"). kNotFound when unset.
  virtual Result<std::string> GetSetting(const std::string& name) = 0;
  // Insert or overwrite, one transaction.
  virtual Status PutSetting(const std::string& name, const std::string& value, int64_t now_ms) = 0;
  // Compare-and-set: writes `value` only when the setting currently holds
  // `expected` (std::nullopt: only when it is unset); returns whether it
  // wrote. Atomic against concurrent writers in any process on both
  // backends, so webhook dispatchers can share cursors and a lease.
  virtual Result<bool> CompareAndSetSetting(const std::string& name,
                                            const std::optional<std::string>& expected,
                                            const std::string& value, int64_t now_ms) = 0;

  // ---- model registry (docs/models.md; records in model_types.h). The
  // application layer (app/models.h) builds the records; the store numbers
  // versions and keeps the tag rules, each change one transaction.

  // Adds `rec` as the next version of rec.name (seq assigned; tags ignored).
  // Idempotent: when rec.job_id > 0 and that job already registered a model,
  // or (job_id 0) the name already has a hand registration of the same
  // weights_sha, nothing is written and that record is returned with
  // *created = false. Concurrent registrations of a name get distinct seqs.
  virtual Result<ModelRecord> AddModel(const ModelRecord& rec, bool* created) = 0;
  // Oldest first, with their tags.
  virtual Result<std::vector<ModelRecord>> ListModels(const ModelFilter& filter) = 0;
  // Adds `tag` to the model with exactly this id (kNotFound otherwise;
  // kInvalidArgument for a malformed tag). kProductionTag moves: the
  // dataset's previous holder loses it in the same transaction, and its id is
  // returned ("" when there was none or it was this model already).
  virtual Result<std::string> TagModel(const std::string& model_id, const std::string& tag,
                                       int64_t now_ms) = 0;
  // Whether the tag was there.
  virtual Result<bool> UntagModel(const std::string& model_id, const std::string& tag) = 0;
  // Removes the model, its tags and its export records (not its blobs). The
  // production holder is refused (kFailedPrecondition) unless even_production.
  virtual Status DeleteModel(const std::string& model_id, bool even_production) = 0;
  // Records an export of the model with exactly rec.model_id (kNotFound,
  // field `model`, otherwise), idempotently: in one transaction that locks
  // the model's row, an export of that model with the same path and sha256
  // (the same file recorded again: an export job retried after a crash
  // between its record and its end, or the same export run twice) is
  // updated in place — format, bytes, options, verified, verification and
  // kestrel_version from rec; its id and created time kept — and returned
  // with *created false; otherwise rec is inserted (*created true).
  // kInvalidArgument for an id or sha256 that is not 64 hex chars,
  // kAlreadyExists for an id another export holds. ListModels returns it in
  // ModelRecord::exports.
  virtual Result<ModelExportRecord> AddModelExport(const ModelExportRecord& rec, bool* created) = 0;

  // ---- config templates (docs/templates.md; records in template_types.h).
  // The application layer (app/templates.h) validates the keys.

  // Adds rec.keys_json as the next version of rec.name (seq assigned), in
  // one transaction. When the name's newest version has the same
  // content_sha, nothing is written and that version is returned with
  // *created = false. Concurrent saves of a name get distinct seqs.
  // kInvalidArgument for a malformed name.
  virtual Result<TemplateRecord> AddTemplate(const TemplateRecord& rec, bool* created) = 0;
  // Ordered by name, then version (oldest first).
  virtual Result<std::vector<TemplateRecord>> ListTemplates(const TemplateFilter& filter) = 0;

  // ---- API tokens (docs/server.md "Auth"; records in token_types.h). The
  // application layer (app/tokens.h) makes the secret and checks tokens.

  // Adds a live token (last_used and revoked cleared). kInvalidArgument for
  // a malformed name, id or secret_sha; kAlreadyExists (field `name`) when a
  // live token has the name, (field `id`) when the id is taken.
  virtual Result<ApiTokenRecord> AddApiToken(const ApiTokenRecord& rec) = 0;
  // Every token, revoked ones too, oldest first.
  virtual Result<std::vector<ApiTokenRecord>> ListApiTokens() = 0;
  // kNotFound (field `token`) for an unknown id.
  virtual Result<ApiTokenRecord> GetApiToken(const std::string& id) = 0;
  // Marks the token revoked at now_ms, one transaction; a token already
  // revoked is returned unchanged with *revoked = false. kNotFound for an
  // unknown id.
  virtual Result<ApiTokenRecord> RevokeApiToken(const std::string& id, int64_t now_ms, bool* revoked) = 0;
  // Sets last_used to now_ms when it is older (one statement, no read).
  virtual Status TouchApiToken(const std::string& id, int64_t now_ms) = 0;

  // ---- hyperparameter studies (docs/tune.md "In the store"; records in
  // study_types.h). The application layer (app/tune_study.h) gives the
  // states and JSON their meaning; the store keeps the identity rules and
  // makes every state change a compare-and-set, so each event moves a trial
  // exactly once even when two coordinators race after a lost lease.

  // Adds the study (id assigned; created_ms/updated_ms as given) in one
  // transaction. A study named rec.name already there is returned with
  // *created = false when its space_hash is rec.space_hash (the same command
  // run again attaches), else kAlreadyExists (field `name`) naming both
  // hashes. kInvalidArgument for a malformed name (IsValidModelName's rules).
  virtual Result<StudyRecord> CreateStudy(const StudyRecord& rec, bool* created) = 0;
  // kNotFound (field `study`) when there is no study of that name.
  virtual Result<StudyRecord> GetStudy(const std::string& name) = 0;
  // Newest first.
  virtual Result<std::vector<StudyRecord>> ListStudies() = 0;
  // Writes rec.state, rec.job_id and rec.updated_ms of study rec.id when its
  // stored state is `expected_state`; returns whether it wrote.
  virtual Result<bool> UpdateStudy(const StudyRecord& rec, const std::string& expected_state) = 0;
  // Adds trial (rec.study_id, rec.number); when it exists, nothing is
  // written and the stored one is returned with *created = false.
  // kNotFound (field `study`) for an unknown study.
  virtual Result<TrialRecord> AddTrial(const TrialRecord& rec, bool* created) = 0;
  // Writes every field of the trial but its key and created_ms when its
  // stored state is `expected_state`; returns whether it wrote.
  virtual Result<bool> UpdateTrial(const TrialRecord& rec, const std::string& expected_state) = 0;
  // The study's trials by number.
  virtual Result<std::vector<TrialRecord>> ListTrials(int64_t study_id) = 0;
  // Submits trial (study_id, number)'s job and records its id on the trial
  // in the same transaction. The job's dedup key is the trial's own
  // (sha256 of JobDedupKey(spec), the study id and the trial number): two
  // trials of the same config get a job each, and a trial never attaches to
  // another live job of its config. When the trial
  // already names a job, that job is returned with *created = false and
  // nothing is submitted: a coordinator killed anywhere around a submit
  // never runs a trial twice. kNotFound (field `trial`) for no such trial.
  virtual Result<JobRecord> SubmitTrialJob(int64_t study_id, int64_t number, const JobSpec& spec,
                                           int64_t now_ms, bool* created) = 0;
};

// sha256 of the dataset version and the canonical form (sorted keys, no
// whitespace) of the effective config JSON with the job's min_map50 added as
// the key "min_map50": two submissions that differ only in their quality gate
// stay two jobs, and the key is the one computed before migration 10 (when
// min_map50 travelled in the config), so a live job stored then still
// deduplicates. kInvalidArgument on bad JSON, a config that is not an
// object, or one that holds "min_map50" itself (it is spec.min_map50).
Result<std::string> JobDedupKey(const JobSpec& spec);

// The latest schema version this build knows (number of migrations).
int LatestSchemaVersion();
// The migration set, shared by both backends. Each entry is one migration
// (a list of statements applied in one transaction). Statements that start
// with kPostgresOnly are skipped on SQLite, those that start with kSqliteOnly
// on PostgreSQL (for the few things, like reading JSON, the two spell apart).
inline constexpr const char* kPostgresOnly = "-- postgres only\n";
inline constexpr const char* kSqliteOnly = "-- sqlite only\n";
const std::vector<std::vector<std::string>>& Migrations();

// Splits "NAME@REF" into name and ref ("" when absent: the latest version).
// "NAME@" (an '@' with nothing after it) gives the ref kEmptyVersionRef,
// which GetVersion refuses: a typo must not silently mean "latest".
inline constexpr const char* kEmptyVersionRef = "@";
void SplitDatasetRef(const std::string& spec, std::string* name, std::string* ref);

}  // namespace kestrel::store
