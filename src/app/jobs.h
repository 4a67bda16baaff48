// The job use cases (docs/jobs.md), called by every front end: the CLI's
// `kestrel submit` and `kestrel jobs list|show|cancel|retry` today, the HTTP
// server later. Each operation takes plain inputs and returns records or a
// Status; JobJson and AttemptJson are the one JSON view of each record, which
// `kestrel … --json` embeds unchanged (so two front ends cannot drift).
//
// Submission is two steps so that a front end can resolve what only it
// can (the CLI imports a dataset path given as data= and reports it) between
// them: DraftJob binds and validates every key without the store, SubmitJob
// resolves the dataset version and queues the job.
//
// Errors about the request itself are kInvalidArgument located at
// {kRequestFile, 0, key}; a front end relocates them (the CLI to "command
// line", exit 2). Thread-safety: the functions borrow one MetadataStore (one
// per thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/job_kinds.h"
#include "app/models.h"
#include "core/status.h"
#include "jobs/job_keys.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// ErrorLocation::file of an error in a request's keys.
inline constexpr const char* kRequestFile = "request";

// `s` with an error located at kRequestFile moved to `file` (the CLI passes
// "command line"); any other status unchanged. Used for every use case whose
// errors name a request key (jobs, templates).
Status RelocateRequestError(const Status& s, const std::string& file);

// pretrained= / model= of a job as a front end resolves it (job_kinds.h).
using WeightsResolver = KeyWeightsResolver;

// A submission with every key bound and validated, not yet stored.
struct JobDraft {
  std::string kind = JobKindTable::kDefaultKind;  // a row of the job-kind table
  store::JobSpec spec;    // the job keys' fields; dataset and config come with SubmitJob
  nlohmann::json config;  // the effective config: every key of the kind (train: every train key),
                          // and "kind" for the kinds whose config names it (min_map50 is in spec)
  nlohmann::json typed;   // the keys as given (the job's spec_json)
  std::string data;       // data= as given; a front end may replace it with NAME@<version id>
  std::string data_as_given;
  // An export job without data=: the dataset version it is filed under (the
  // registered model's, "" for a plain weights file or an unknown one).
  std::string model_dataset_version;
};

// Binds `tokens` ("key=value", as typed) for a job: `kind=` (default train)
// picks the row of `kinds` whose key schema binds the command keys (train:
// the train keys, `kestrel train --help`; val: the val keys, model= and
// data= required; export: the export keys of app::ExportKeys, model=
// required, data= optional); the job keys (jobs::JobKeys) apply to every
// kind. Keys the job system owns are refused (the schema's Refused: train:
// resume, run_dir, project, name, exist_ok; val: predictions, project, name,
// exist_ok; export: output), and so is every check the command itself would
// make before it starts (the schema's Check), with the same messages: a job
// that cannot run is refused here, not on a worker. An export job's model=
// goes through `resolve_model` (a registered model pinned as NAME@vN; unset:
// `resolve_weights` gives the file and model= stays as typed). No store
// access (except the resolvers).
Result<JobDraft> DraftJob(const std::vector<std::string>& tokens, const WeightsResolver& resolve_weights,
                          const ModelResolver& resolve_model = {}, const JobKindTable& kinds = JobKinds());

struct SubmitResult {
  store::JobRecord job;
  bool created = false;    // false: an identical live job existed (dedup), `job` is it
  std::string dataset;     // the dataset's name
  std::string version_id;  // the version the job runs on
};
// Resolves draft.data (NAME[@ref]) to its version (the job stores the
// version, never a path or "latest"), completes the config and queues the
// job, deduplicated against live jobs. kInvalidArgument at the request's
// `data` when the dataset or version does not exist. An export job without
// data= is filed under draft.model_dataset_version (SubmitResult::dataset
// and version_id then name the model's, or are "").
Result<SubmitResult> SubmitJob(store::MetadataStore& meta, JobDraft draft, int64_t now_ms);

// The submit recipe every front end runs (`kestrel submit`, POST
// /api/jobs): template=NAME[@vN] expanded (TemplateLibrary::ExpandArgs, the
// tokens winning), DraftJob with the front end's resolvers, the front end's
// data step, SubmitJob. The store is opened through `open_store` only when
// first needed (a template, or a draft that passed), so a refused key needs
// no Kestrel home.
struct SubmitSteps {
  std::function<Result<store::MetadataStore*>()> open_store;  // required
  WeightsResolver resolve_weights;
  ModelResolver resolve_model;
  // data= as drafted, before SubmitJob (the CLI imports a dataset path and
  // reports it); unset: as given.
  std::function<Status(std::string* data)> resolve_data;
};
Result<SubmitResult> SubmitTokens(const std::vector<std::string>& tokens, const SubmitSteps& steps,
                                  int64_t now_ms, const JobKindTable& kinds = JobKinds());

// A job list (`kestrel jobs list`, GET /api/jobs; docs/jobs.md "List"):
// filters, a sort, and a page from a cursor or an offset, all done by the
// store's query. Each filter "" = all; kInvalidArgument naming the field for
// a bad value.
struct JobListRequest {
  std::string state;  // a state name, or several joined by commas
  int64_t limit = 100;
  std::string kind;      // a row of the job-kind table: train | val | export
  std::string priority;  // high | normal | low, or several joined by commas
  // A dataset NAME (jobs on any of its versions) or NAME@REF (that version:
  // vN, latest, an id prefix); kInvalidArgument when it does not exist.
  std::string dataset;
  // Jobs whose name, a tag or the note contains this text (store::JobFilter::search).
  std::string search;
  std::string sort;    // created (default) | priority | state (store::JobSort)
  std::string order;   // asc | desc; "" = the sort's default: desc for created
                       // and priority (high first), asc for state (queued first)
  int64_t before = 0;  // cursor: the jobs after this one in the order (a page's next_cursor)
  int64_t offset = 0;  // then skip this many (the older paging; next_offset)
};
// The store filter of a list request, but for `dataset` (no store needed:
// a front end can refuse a bad request before it opens one).
Result<store::JobFilter> JobListFilter(const JobListRequest& req);
// The dataset version a job runs on as the registry names it: "birds" and
// seq 3 ("v3", as `kestrel dataset versions` shows it). name "" when its
// version is not in the registry (an export job of a plain weights file).
struct JobDatasetName {
  std::string name;
  int64_t seq = 0;
};
// One page of the list.
struct JobPage {
  std::vector<store::JobRecord> jobs;
  // Parallel to jobs, from one store query per page
  // (MetadataStore::ListVersionsById). A version id in several datasets
  // (the same content imported under two names) takes the name the job's
  // data= gave, else the first name.
  std::vector<JobDatasetName> datasets;
  int64_t total = 0;         // jobs the filters select (all pages)
  int64_t next_cursor = 0;   // the last job's id when more follow, else 0
  int64_t next_offset = -1;  // offset + limit when more follow and no cursor was given, else -1
  store::JobSort sort = store::JobSort::kCreated;
  bool descending = true;
};
Result<JobPage> ListJobPage(store::MetadataStore& meta, const JobListRequest& req);
// The page's jobs only.
Result<std::vector<store::JobRecord>> ListJobs(store::MetadataStore& meta, const JobListRequest& req);
// {"ok": true, "jobs": [JobJson with "dataset" (the name) and "version" ("vN"), both
// null when the registry has no such version], "total", "next_cursor"
// (null on the last page), "next_offset" (null on the last page or with a
// cursor), "sort", "order"}: what `kestrel jobs list --json` prints and GET
// /api/jobs returns.
nlohmann::json JobPageJson(const JobPage& page);

// A job and its attempts (oldest first), the dataset version as the
// registry names it (name "" when it has none) and the model the job
// registered (none: not registered, or not a train job).
struct JobDetail {
  store::JobRecord job;
  std::vector<store::AttemptRecord> attempts;
  JobDatasetName dataset;
  std::optional<store::ModelRecord> model;
  // The environment fingerprints the attempts ran in, by hash
  // (app/fingerprint.h; the JSON's "environments").
  std::map<std::string, nlohmann::json> environments;
};
Result<JobDetail> ShowJob(store::MetadataStore& meta, int64_t job_id);

// Cancels a live job (its worker stops a running attempt on its next lease
// renewal); kFailedPrecondition when it already finished.
Result<store::JobRecord> CancelJob(store::MetadataStore& meta, int64_t job_id, int64_t now_ms);
// Requeues a failed or cancelled job with a fresh retry budget.
Result<store::JobRecord> RetryJob(store::MetadataStore& meta, int64_t job_id, int64_t now_ms);

// The one JSON view of a job: id, kind, state, attempt, priority,
// retries_used, infra_retries_used, max_retries, last_reason, created_ms,
// updated_ms, finished_ms, not_before_ms, lease_owner, lease_until_ms,
// device, gpu_mem, dataset_version, dedup_key, name, tags, note (job_labels.h),
// result (object or null), and
// with `detail` also config (JobConfigJson), spec (the keys as submitted,
// the job's spec_json) and wall_clock_limit_ms.
nlohmann::json JobJson(const store::JobRecord& job, bool detail);
// A job's stored config with its min_map50 (a job column since migration 10)
// added as the key "min_map50": the config as submit stored it before, which
// `jobs show` prints and a model registered from the job records and
// hashes. A stored config that is not a JSON object comes back as parsed, or
// as its text when it does not parse.
nlohmann::json JobConfigJson(const store::JobRecord& job);
// The one JSON view of an attempt: attempt, worker, host, pid, started_ms,
// ended_ms, detected_ms, exit_code, signal, succeeded, stage,
// failure_class, infra, reason, message.
nlohmann::json AttemptJson(const store::AttemptRecord& a);
// {"job": JobJson(detail), "attempts": [AttemptJson...], "dataset": {"name",
// "version": "vN"} or null, "model": {"id", "name", "version", "map50",
// "map50_95"} or null} (`jobs show`).
nlohmann::json JobDetailJson(const JobDetail& d);
// The keys a job of `kind` takes at submit, for a form: the kind's command
// keys the submitter may set (JobKeySchema::Refused ones left out), then the
// job keys (jobs::JobKeys), each {"key", "type", "range", "default", "help",
// "job_key": bool}, in binding order: {"ok", "kind", "keys": [...]}
// (GET /api/job-kinds/{kind}/keys). kNotFound naming `kind` for a kind the
// table does not have.
Result<nlohmann::json> JobKindKeysJson(const std::string& kind, const JobKindTable& kinds = JobKinds());
// {"ok": true, "job_id", "created", "dedup_key"} (`submit`).
nlohmann::json SubmitResultJson(const SubmitResult& r);

}  // namespace kestrel::app
