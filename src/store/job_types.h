// Records of the job system as stored by MetadataStore (jobs, attempts,
// events, workers) and the inputs of its operations.
//
// Times in the job tables are Unix milliseconds (`*_ms`) and always come in
// from the caller (an Env clock), never from the store, so tests can drive
// leases and backoff with a FakeClockEnv.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/failure.h"

namespace kestrel::store {

enum class JobState { kQueued, kRunning, kSucceeded, kFailedRetryable, kFailedPermanent, kCancelled };
enum class JobPriority { kHigh, kNormal, kLow };  // claim order: high first
enum class FailureStage { kNone, kData, kBuild, kTrain, kEval, kExport, kCommit };
enum class FailureClass { kNone, kRetryable, kPermanent };

// Lowercase names as stored: "queued", "failed_retryable", "high", "train"...
const char* JobStateName(JobState s);
const char* JobPriorityName(JobPriority p);
const char* FailureStageName(FailureStage s);
const char* FailureClassName(FailureClass c);
// Parse the names above; false when unknown.
bool ParseJobState(const std::string& s, JobState* out);
bool ParseJobPriority(const std::string& s, JobPriority* out);
bool ParseFailureStage(const std::string& s, FailureStage* out);
bool ParseFailureClass(const std::string& s, FailureClass* out);
// Queued, running or failed_retryable: the job will still run.
bool IsLive(JobState s);

// How a job is retried. Stored with each job at submit time.
struct RetryPolicy {
  int max_retries = 3;  // retryable (non-infrastructure) failures allowed
  // Wait before retry k (0-based); the last entry repeats. Default 5/15/30 min.
  std::vector<int64_t> backoff_ms = {300'000, 900'000, 1'800'000};
  int max_infra_retries = 10;  // worker lost / lease expired, a separate budget
};

struct JobSpec {
  std::string dataset_version;   // version id (sha256); "" only for an export job
  std::string config_json;       // effective, fully resolved config (JSON object)
  std::string spec_json = "{}";  // what the user typed, for display
  JobPriority priority = JobPriority::kNormal;
  RetryPolicy retry;
  std::string device_kind = "cpu";  // "cpu" or "gpu"
  int64_t device_memory_mb = 0;     // memory the job needs on that device
  int64_t wall_clock_limit_ms = 0;  // 0 = none
  // Quality gate in [0, 1]: a result whose map50 is below it fails the
  // attempt (`quality_gate`); 0 = none. Column `min_map50` (migration 10;
  // before it, a key of config_json).
  double min_map50 = 0;
  // The run's name as people call it (column `name`, migration 17): set at
  // submit (app::SubmitJob: "shapes v1 · n · 10 epochs" unless given),
  // changed by LabelJob; "" for jobs stored before the column. Not part of
  // the dedup key.
  std::string name;
};

struct JobRecord {
  int64_t id = 0;
  JobSpec spec;
  std::string dedup_key;
  JobState state = JobState::kQueued;
  int64_t attempt = 0;  // number of claims so far; the current attempt when running
  std::string lease_owner;
  int64_t lease_until_ms = 0;
  int64_t not_before_ms = 0;
  int retries_used = 0;
  int infra_retries_used = 0;
  int64_t created_ms = 0, updated_ms = 0, finished_ms = 0;
  std::string result_json;  // committed by the successful attempt
  std::string last_reason;  // reason of the last failure ("" if none)
  // Labels people attach after submit (LabelJob; columns tags_json and note,
  // migration 17): tags in the order added, no duplicates; a free-text note.
  std::vector<std::string> tags;
  std::string note;
};

// A change of a job's labels (MetadataStore::LabelJob); each field unset =
// unchanged. The store writes what it is given: app::LabelJob validates.
struct JobLabelChange {
  std::optional<std::string> name;
  std::optional<std::vector<std::string>> tags;
  std::optional<std::string> note;
};

struct AttemptRecord {
  int64_t job_id = 0;
  int64_t attempt = 0;
  std::string worker, host;
  int64_t pid = 0;
  // ended 0 while running. For an attempt lost with its worker (lease
  // expired) ended_ms is the last lease renewal, the last time it was known
  // to be alive, and detected_ms the lease expiry, when the store could know
  // it had failed; for every other attempt detected_ms == ended_ms.
  int64_t started_ms = 0, ended_ms = 0, detected_ms = 0;
  int exit_code = 0, signal = 0;
  bool succeeded = false;
  FailureStage stage = FailureStage::kNone;
  FailureClass failure_class = FailureClass::kNone;
  bool infrastructure = false;  // worker lost, lease expired: separate budget
  std::string reason, message;
  // The hash of the environment fingerprint the attempt ran in (the
  // worker's, ClaimRequest::fingerprint; its fields: GetFingerprint). ""
  // for attempts of workers older than migration 15 or without one.
  std::string fingerprint;
};

// What a worker reports when an attempt ends.
struct AttemptOutcome {
  bool success = false;
  int exit_code = 0, signal = 0;
  int64_t pid = 0;
  FailureStage stage = FailureStage::kNone;
  FailureClass failure_class = FailureClass::kRetryable;
  bool infrastructure = false;
  // Why it failed (kNone on success); stored as its token (core/failure.h) in
  // attempts.reason and, through the retry decision, jobs.last_reason.
  FailureReason reason = FailureReason::kNone;
  std::string message;      // human detail
  std::string result_json;  // committed on success
};

// A device a worker offers to ClaimJob.
struct DeviceOffer {
  std::string kind = "cpu";  // "cpu" or "gpu"
  int index = 0;
  int64_t free_memory_mb = 0;
};

struct ClaimRequest {
  std::string worker, host;
  std::vector<DeviceOffer> devices;
  int64_t now_ms = 0;
  int64_t lease_ms = 90'000;
  // false while the circuit breaker is open: failed_retryable jobs wait.
  bool allow_retries = true;
  // Recorded on the new attempt (AttemptRecord::fingerprint); may be "".
  std::string fingerprint;
};

struct ClaimedJob {
  JobRecord job;
  DeviceOffer device;  // the offer the job was placed on
};

struct EventRecord {
  int64_t id = 0;  // monotonic in commit order, starts at 1
  int64_t job_id = 0;
  int64_t attempt = 0;
  std::string kind;  // "state", "metric", "log"...
  std::string payload_json;
  int64_t created_ms = 0;
};

struct WorkerRecord {
  std::string id, host;
  std::string devices_json = "[]";
  int64_t started_ms = 0, heartbeat_ms = 0;
  // When the worker exited gracefully (its last write); 0 while it runs.
  // UpsertWorker stores it as given, so a heartbeat (0) clears a stop.
  int64_t stopped_ms = 0;
  // The hash of the worker's environment fingerprint at its start ("" when
  // it has none); UpsertWorker stores it as given.
  std::string fingerprint;
  // When `kestrel workers drain ID` asked this worker to drain (0 = not
  // asked). Only SetDrain writes it: UpsertWorker leaves it alone.
  int64_t drain_ms = 0;
};

// A host's standing (docs/jobs.md "Quarantine and drain"): its environment
// failures and whether it is quarantined or drained. A row exists once a
// host had an environment failure or was drained by name.
struct HostRecord {
  std::string host;
  // Environment failures since the host was last unquarantined (never
  // reset by a success: a broken host that sometimes works stays suspect).
  int64_t env_failures = 0;
  int64_t quarantined_ms = 0;     // 0 = not quarantined
  std::string quarantine_reason;  // "" unless quarantined
  std::string last_failure;       // the last environment failure's message
  int64_t drain_ms = 0;           // `kestrel workers drain HOST`: 0 = not draining
  // The last unquarantine: environment failures of this host's attempts that
  // ended before it no longer keep their jobs off the host.
  int64_t cleared_ms = 0;
  int64_t updated_ms = 0;
};

// What a worker must know before it claims (MetadataStore::GetWorkerControl).
struct WorkerControl {
  bool draining = false;     // its own row or its host is drained
  bool quarantined = false;  // its host is quarantined
  std::string reason;        // the quarantine reason, "" otherwise
  int64_t cleared_ms = 0;    // the host's HostRecord::cleared_ms
};

// What a job list is sorted by (docs/jobs.md "List"), each with the job id
// as the tie-break in the same direction, so that (key, id) orders every
// job and a cursor (the last id of a page) says where the next page starts.
//   kCreated:  id (= submit order). Descending: newest first.
//   kPriority: descending = high first, oldest first within a priority
//              (claim order); ascending = low first, newest first within.
//   kState:    the lifecycle rank queued < running < failed_retryable <
//              succeeded < failed_permanent < cancelled; ascending = queued
//              first, oldest first within a state.
enum class JobSort { kCreated, kPriority, kState };

struct JobFilter {
  std::vector<JobState> states;         // empty = all
  std::vector<JobPriority> priorities;  // empty = all
  std::string kind;                     // "" = all; else the config's kind ("train" when it names none)
  std::string dataset;                  // "" = all; else jobs on any version of this dataset
  std::string dataset_version;          // "" = all; else jobs on this version id
  // "" = all; else jobs whose name, one of the tags or the note contains
  // this text (ASCII letters compared without case).
  std::string search;
  JobSort sort = JobSort::kCreated;
  bool descending = true;
  // Keyset cursor: only jobs after the job with this id in the sort order
  // (0 = from the first). kNotFound when that job does not exist.
  int64_t after_id = 0;
  int64_t offset = 0;  // then skip this many
  int64_t limit = 100;
};

struct JobStats {
  int64_t jobs = 0, succeeded = 0, failed_permanent = 0, cancelled = 0, live = 0;
  double availability = 0;                    // succeeded / (succeeded + failed_permanent); 0 when none
  int64_t attempts = 0, failed_attempts = 0;  // ended attempts but the cancelled ones; of them failed
  int64_t cancelled_attempts = 0;             // attempts a cancel stopped (neither success nor failure)
  int64_t retries = 0, infra_retries = 0;
  std::map<std::string, int64_t> failures_by_stage;  // "train" -> n
  std::map<std::string, int64_t> failures_by_class;  // "retryable", "permanent", "infra"
  std::map<std::string, int64_t> failures_by_reason;
  // Time to recover: mean over jobs that failed at least once and then
  // succeeded, of (success time - end of their first failed attempt, i.e.
  // when it failed). 0 when there are none.
  double mean_time_to_recovery_ms = 0;
  int64_t recovered_jobs = 0;
  // Time to restart: mean over failed attempts that were followed by another
  // attempt, of (next attempt's start - when the failure was detected: the
  // attempt's end, or its lease expiry for a lost worker). Includes retry
  // backoff. 0 when there are none.
  double mean_time_to_restart_ms = 0;
  int64_t restarted_attempts = 0;
};

}  // namespace kestrel::store
