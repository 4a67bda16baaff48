// SqlStore: the one implementation of MetadataStore, written against the
// SqlConn adapter so SQLite and PostgreSQL run the same logic and the same
// migrations. Dataset operations live in sql_store.cc, job operations in
// job_store.cc (the job list's query in job_list_query.cc, events in
// job_events.cc), the model
// registry in model_store.cc, config templates in template_store.cc, API
// tokens in token_store.cc. Private to the store module.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "store/internal/sql_conn.h"
#include "store/metadata_store.h"

namespace kestrel::store {

// PostgreSQL advisory lock key that orders event ids: every event insert
// holds it shared until its transaction ends, ReadEvents takes it
// exclusively (job_events.cc InsertEvent; ClaimJob's one-statement claim).
inline constexpr int64_t kEventLock = 4242424243;

class SqlStore final : public MetadataStore {
 public:
  explicit SqlStore(std::unique_ptr<SqlConn> conn) : conn_(std::move(conn)) {}

  // Applies missing migrations in one transaction (serialized between
  // processes: BEGIN IMMEDIATE / an advisory lock).
  Status Migrate();

  Result<int> SchemaVersion() override;
  Result<DatasetVersionRecord> AddDatasetVersion(const DatasetVersionRecord& rec, bool* created) override;
  Result<std::vector<DatasetSummary>> ListDatasets() override;
  Result<std::vector<DatasetVersionRecord>> ListVersions(const std::string& dataset) override;
  Result<DatasetVersionRecord> GetVersion(const std::string& dataset, const std::string& ref) override;
  Result<std::vector<DatasetVersionRecord>> ListVersionsById(
      const std::vector<std::string>& version_ids) override;

  Result<JobRecord> SubmitJob(const JobSpec& spec, int64_t now_ms, bool* created) override;
  Result<ClaimedJob> ClaimJob(const ClaimRequest& req) override;
  Status RenewLease(int64_t job_id, int64_t attempt, const std::string& worker, int64_t now_ms,
                    int64_t lease_ms) override;
  Status RecordAttemptPid(int64_t job_id, int64_t attempt, const std::string& worker, int64_t pid) override;
  Result<JobRecord> CompleteAttempt(int64_t job_id, int64_t attempt, const std::string& worker,
                                    const AttemptOutcome& outcome, int64_t now_ms) override;
  Result<JobRecord> CancelJob(int64_t job_id, int64_t now_ms) override;
  Result<JobRecord> LabelJob(int64_t job_id, const JobLabelChange& change) override;
  Result<JobRecord> RetryJob(int64_t job_id, int64_t now_ms) override;
  Result<JobRecord> GetJob(int64_t job_id) override;
  Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter) override;
  Result<int64_t> CountJobs(const JobFilter& filter) override;
  Result<std::vector<AttemptRecord>> ListAttempts(int64_t job_id) override;
  Result<std::vector<AttemptRecord>> RecentAttempts(int n) override;
  Result<int64_t> AppendEvent(const EventRecord& ev) override;
  Result<std::vector<EventRecord>> ReadEvents(int64_t after_id, int64_t job_id, int limit) override;
  Status UpsertWorker(const WorkerRecord& w) override;
  Result<std::vector<WorkerRecord>> ListWorkers() override;
  Result<HostRecord> RecordEnvironmentFailure(const std::string& host, const std::string& message,
                                              int quarantine_after, int64_t now_ms) override;
  Result<HostRecord> UnquarantineHost(const std::string& host, int64_t now_ms) override;
  Result<std::vector<std::string>> SetDrain(const std::string& target, bool drain, int64_t now_ms) override;
  Result<std::vector<HostRecord>> ListHosts() override;
  Result<WorkerControl> GetWorkerControl(const std::string& worker, const std::string& host) override;
  Status PutFingerprint(const std::string& hash, const std::string& json, int64_t now_ms) override;
  Result<std::string> GetFingerprint(const std::string& hash) override;
  Result<JobStats> Stats() override;
  // Job checkpoints (checkpoint_store.cc).
  Status RecordCheckpoint(int64_t job_id, int64_t attempt, const std::string& checkpoint_json,
                          int64_t now_ms) override;
  Result<std::vector<CheckpointRecord>> ListCheckpoints(int64_t job_id) override;
  Result<std::string> GetSetting(const std::string& name) override;
  Status PutSetting(const std::string& name, const std::string& value, int64_t now_ms) override;
  Result<bool> CompareAndSetSetting(const std::string& name, const std::optional<std::string>& expected,
                                    const std::string& value, int64_t now_ms) override;

  // Model registry (model_store.cc).
  Result<ModelRecord> AddModel(const ModelRecord& rec, bool* created) override;
  Result<std::vector<ModelRecord>> ListModels(const ModelFilter& filter) override;
  Result<std::string> TagModel(const std::string& model_id, const std::string& tag, int64_t now_ms) override;
  Result<bool> UntagModel(const std::string& model_id, const std::string& tag) override;
  Status DeleteModel(const std::string& model_id, bool even_production) override;
  Result<ModelExportRecord> AddModelExport(const ModelExportRecord& rec, bool* created) override;

  // Config templates (template_store.cc).
  Result<TemplateRecord> AddTemplate(const TemplateRecord& rec, bool* created) override;
  Result<std::vector<TemplateRecord>> ListTemplates(const TemplateFilter& filter) override;

  // API tokens (token_store.cc).
  Result<ApiTokenRecord> AddApiToken(const ApiTokenRecord& rec) override;
  Result<std::vector<ApiTokenRecord>> ListApiTokens() override;
  Result<ApiTokenRecord> GetApiToken(const std::string& id) override;
  Result<ApiTokenRecord> RevokeApiToken(const std::string& id, int64_t now_ms, bool* revoked) override;
  Status TouchApiToken(const std::string& id, int64_t now_ms) override;

  // Hyperparameter studies (study_store.cc).
  Result<StudyRecord> CreateStudy(const StudyRecord& rec, bool* created) override;
  Result<StudyRecord> GetStudy(const std::string& name) override;
  Result<std::vector<StudyRecord>> ListStudies() override;
  Result<bool> UpdateStudy(const StudyRecord& rec, const std::string& expected_state) override;
  Result<TrialRecord> AddTrial(const TrialRecord& rec, bool* created) override;
  Result<bool> UpdateTrial(const TrialRecord& rec, const std::string& expected_state) override;
  Result<std::vector<TrialRecord>> ListTrials(int64_t study_id) override;
  Result<JobRecord> SubmitTrialJob(int64_t study_id, int64_t number, const JobSpec& spec, int64_t now_ms,
                                   bool* created) override;

 private:
  // Models matching `filter` with their tags, oldest first; `lock` adds
  // FOR UPDATE on PostgreSQL (inside a transaction).
  Result<std::vector<ModelRecord>> SelectModels(const ModelFilter& filter, bool lock);
  // Runs `body` in a write transaction; rolls back on error and retries the
  // whole transaction a few times on lock conflicts. `body` must assign its
  // outputs afresh on every run.
  template <typename F>
  Status InTransaction(F&& body) {
    Status s;
    for (int round = 0; round < 8; ++round) {
      s = conn_->Begin();
      if (s.IsOk()) {
        s = body();
        if (s.IsOk()) s = conn_->Commit();
        if (s.IsOk()) return s;
        (void)conn_->Rollback();  // the body's or the commit's error is the one to report
      }
      // Lock conflicts (SQLite busy, PostgreSQL deadlock/serialization
      // failure, a lost dedup race) carry kStoreConflict where the SqlConn
      // or the body detects them: the whole transaction may simply rerun.
      if (s.Reason() != FailureReason::kStoreConflict) return s;
    }
    return s;
  }

  // Helpers for job_store.cc; all run inside a transaction.
  // SubmitJob's body: the live job with dedup key `key`, or a new one
  // (*made true). Also used by SubmitTrialJob.
  Result<JobRecord> InsertJob(const JobSpec& spec, const std::string& key, int64_t now_ms, bool* made);
  Result<int64_t> NextId(const char* counter);
  Result<int64_t> InsertEvent(int64_t job_id, int64_t attempt, const std::string& kind,
                              const std::string& payload_json, int64_t now_ms);
  Status StateEvent(const JobRecord& job, int64_t now_ms);
  // Events with after_id < id (<= bound when bound > 0), of job_id (0: all).
  Result<std::vector<EventRecord>> SelectEvents(int64_t after_id, int64_t job_id, int limit, int64_t bound);
  Result<JobRecord> LoadJob(int64_t job_id, bool lock);
  Status SaveJob(const JobRecord& job);
  // Closes an attempt: it ended (failed) at ended_ms and that was known at
  // detected_ms (the same, except for a lease that expired).
  Status EndAttempt(int64_t job_id, int64_t attempt, const AttemptOutcome& o, int64_t ended_ms,
                    int64_t detected_ms);
  // Closes the attempt of a running job whose lease expired; returns the job
  // as it now is (failed_retryable to be claimed, or failed_permanent).
  Result<JobRecord> ExpireLease(JobRecord job, int64_t now_ms);
  // host_store.cc: the host row of `host` (locked on PostgreSQL), or nullopt.
  Result<std::optional<HostRecord>> LoadHost(const std::string& host, bool lock);

  std::unique_ptr<SqlConn> conn_;
};

}  // namespace kestrel::store
