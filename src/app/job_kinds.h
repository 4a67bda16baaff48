// The job-kind table (docs/jobs.md "Job kinds"): one row per kind of job —
// its name, its key schema and submit-time checks, its typed result, its
// quality gate, what a succeeded job registers, and the runner of its
// attempts — read by submit (app/jobs.h DraftJob, SubmitTokens), the worker
// (WorkerKinds: the child's command word and the gate), the attempt child
// (RunAttempt: the one preamble every kind shares), the server and the UI
// (JobKindsJson: GET /api/job-kinds). Adding a kind is one row: its
// JobKindSpec added to a table, and its runner set by the program that can
// run it.
//
// The table is torch-free, and so are the runners (app/job_runners.h:
// train, val, export); they need the LibTorch backend, which lends them
// (Backends::runners) when kestrel-torch's main() installs it
// (app/backends.h InstallBackends); the LibTorch-free `kestrel` front and
// the server have the same rows without runners (they submit and
// supervise, never run an attempt).
//
// Thread-safety: a table is filled (Add, SetRunner) before any thread reads
// it — in main() or a test's set-up — and only read after that.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "app/models.h"
#include "core/env.h"
#include "core/failure.h"
#include "core/options.h"
#include "core/status.h"
#include "jobs/job_keys.h"
#include "jobs/worker.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// ---- The contract between an attempt's child and its worker

// What a successful attempt reports: the `result {json}` line its child
// writes last (RunAttempt), which the worker's gate reads (WorkerKinds), the
// store keeps as the job's result and the registry reads for a training
// job's model. The typed fields are the ones anything decides on; a kind's
// other figures (epochs, precision, the verification report …) travel in
// `details`, shown as they are and never read back by the gate or registry.
struct AttemptResult {
  std::string kind;     // the job kind's name (set by RunAttempt)
  int64_t attempt = 0;  // the attempt that produced it (set by RunAttempt)
  std::string run_dir;  // the attempt's folder, absolute ("" = none)
  std::string model;    // val, export: the model it scored or exported, as the job names it
  // train: the weights the attempt made, absolute paths.
  std::string best, last, checkpoint;
  // Whether a mAP was measured (unset: the kind does not say). false: no
  // map50 / map50_95, `not_validated` says why.
  std::optional<bool> validated;
  std::string not_validated;
  std::optional<double> map50, map50_95;  // on the job's split, [0, 1]
  // export: the written file and whether it passed its verification.
  std::string path;
  std::optional<bool> verified;
  nlohmann::json details = nlohmann::json::object();  // the kind's other fields

  // One flat object: the details, then every typed field that is set
  // ("" strings and unset optionals are left out).
  nlohmann::json ToJson() const;
  // The inverse: typed fields by name, the rest into details. A typed
  // field of the wrong JSON type is kInvalidArgument naming it.
  // ToJson(FromJson(j)) == j for any object FromJson accepts.
  static Result<AttemptResult> FromJson(const nlohmann::json& j);
  // FromJson of a `result` line's text; kInvalidArgument when it is not an object.
  static Result<AttemptResult> Parse(const std::string& text);
};

// Where an attempt reports to. Every member may be empty/null.
struct AttemptIo {
  // One line (without newline) to the supervisor: `stage=...` progress,
  // `reason=<token>` on failure, `result {json}` at the end (docs/jobs.md).
  std::function<void(const std::string&)> progress;
  std::ostream* out = nullptr;              // human log lines (the runner's own)
  const std::atomic<bool>* stop = nullptr;  // raised: a runner that can, checkpoints and stops
  // Called once by a runner right before its long work (training: the CLI
  // installs its SIGTERM/SIGINT handlers there, so an earlier signal still
  // ends the process as before).
  std::function<void()> before_training;
};

// One attempt as its runner sees it, after the shared preamble: the store
// opened (home made absolute), the job loaded and checked to be this kind's
// and at this attempt, running.
struct AttemptContext {
  std::string home;  // absolute
  int64_t job_id = 0;
  int64_t attempt = 0;
  store::JobRecord job;
  // The preamble's connection; a runner may close it (reset) when it opens its own.
  std::unique_ptr<store::MetadataStore> meta;
  const AttemptIo* io = nullptr;

  void Progress(const std::string& line) const;
  std::ostream& Out() const;  // io->out, or a sink
  // $home/jobs/<id> and its attempt-<n> folder (absolute; not created).
  std::string JobDir() const;
  std::string AttemptDir() const;
  // Binds the job's stored config into `set` (the kind key left out):
  // kBadConfig-classed kInvalidArgument when it is not an object or a key is refused.
  Status ApplyConfig(OptionSet& set) const;

 private:
  mutable std::ostream sink_{nullptr};  // Out() without io->out: writes nowhere
};

// Runs one attempt of a job of its kind. Errors are values: the failure
// reason is FailureReasonOf(status) (a reason set with Status::WithReason
// wins), so the same error gets the same reason, exit code and retry class
// whichever kind hit it.
using AttemptRunner = std::function<Result<AttemptResult>(AttemptContext& ctx)>;

struct AttemptOutcome {
  int exit_code = kTrainExitOk;                  // core/failure.h's table
  FailureReason failure = FailureReason::kNone;  // kNone when it succeeded
  Status error;                                  // why it failed (OK when it succeeded)
  AttemptResult result;                          // success only
};

// `kestrel <kind> --job --json`'s document: {"ok": true, "job_id",
// "result"} or {"ok": false, "job_id", "attempt", "reason", "error": {code,
// message, file, line, field}} (code "usage" for exit code 2).
nlohmann::json AttemptOutcomeJson(int64_t job_id, int64_t attempt, const AttemptOutcome& outcome);

// ---- One row of the table

// A weights argument (pretrained= and a weights-file model= of a train job,
// model= of a val job; `key` says which) may name a registered model; the
// front end resolves it in place (the CLI prints which model it named). It
// is also where a front end confines the files a job reads: these keys and
// an export job's model= (ModelResolver) are every job key whose value names
// a file (the HTTP server: server/job_paths.h). Unset: taken as a path.
// (Named apart from app/predict.h's one-argument WeightsResolver, so a
// runner can include both; app/jobs.h calls it WeightsResolver.)
using KeyWeightsResolver = std::function<Status(const std::string& key, std::string* weights)>;
// The model= of an export job: the weights file, and the registered model it
// named (ModelRegistry::ResolveWeights), which the job pins as NAME@vN so a
// retry exports the same version and the export is recorded on it; a plain
// file is stored as the path returned, made absolute.
using ModelResolver = std::function<Result<ResolvedWeights>(const std::string& text)>;

// What a kind's submit checks produce.
struct KindSubmission {   // NOLINT(bugprone-exception-escape): an aggregate; the check misreads its
                          // implicit move (nlohmann::json members) as throwing
  nlohmann::json config;  // the effective config: every key of the kind
  std::string data;       // data= as given ("" = the job has no dataset of its own)
  // Without data=: the dataset version the job is filed under ("" = none).
  std::string model_dataset_version;
};

// A kind's command keys at submit: a fresh object per submission, bound
// into `set` before the tokens are applied.
class JobKeySchema {
 public:
  virtual ~JobKeySchema() = default;
  virtual void Bind(OptionSet& set) = 0;
  // Why `key`, one of this kind's keys or not, is not the submitter's to
  // set ("" = it is): the keys the job system decides.
  virtual std::string Refused(const std::string& key) const = 0;
  // Once every key is bound and the job keys validated: the checks the
  // command makes before it starts, with its messages (a job that cannot
  // run is refused at submit, not on a worker); files through the
  // resolvers. Errors name their key.
  virtual Result<KindSubmission> Check(const jobs::JobKeys& job_keys, OptionSet& set,
                                       const KeyWeightsResolver& weights, const ModelResolver& model) = 0;
};

// What a succeeded job's registration step gets.
struct SucceededJob {
  store::MetadataStore& meta;
  const std::string& home;  // the artifact store's home
  const store::JobRecord& job;
  const AttemptResult& result;
  int64_t now_ms;
};

struct JobKindSpec {
  std::string name;     // the kind= value and the child's command word
  std::string summary;  // one line: what a job of this kind does
  // Whether the stored config names the kind. Only train's does not: its
  // config is exactly its trainer keys, and a config without "kind" (every
  // job stored before kinds existed) reads as the table's default kind.
  bool config_names_kind = true;
  std::function<std::unique_ptr<JobKeySchema>()> keys;
  // The quality gate on a child's result once it exited 0 by itself: OK,
  // or why it fails (the worker commits a permanent quality_gate failure
  // "quality gate: <message>"). Unset: every result passes.
  std::function<Status(const AttemptResult& result, const store::JobRecord& job, Env& env)> gate;
  // What a succeeded job adds elsewhere (train: its model into the
  // registry). Returns a line for the worker's log ("" = nothing to say).
  // Unset: nothing.
  std::function<Result<std::string>(const SucceededJob& s)> on_succeeded;
  // The attempt runner; unset in programs that cannot run this kind.
  AttemptRunner run;
};

class JobKindTable {
 public:
  // The kind a stored config without "kind" is (train).
  static constexpr const char* kDefaultKind = "train";

  // kInvalidArgument when the name is empty, not [a-z0-9_-], or taken.
  Status Add(JobKindSpec spec);
  // kNotFound when there is no such kind.
  Status SetRunner(std::string_view name, AttemptRunner run);
  const JobKindSpec* Find(std::string_view name) const;
  std::vector<std::string> Names() const;  // in the order added
  const std::vector<std::unique_ptr<JobKindSpec>>& Kinds() const { return kinds_; }
  // The kind of a stored job: its config's "kind", or kDefaultKind when it
  // names none. kInvalidArgument (field `kind`) for a kind this table lacks
  // (a newer kestrel submitted it).
  Result<const JobKindSpec*> KindOf(const store::JobRecord& job) const;

 private:
  std::vector<std::unique_ptr<JobKindSpec>> kinds_;
};

// The built-in rows: train, val, export (job_kind_rows.cc), without runners.
JobKindTable BuiltinJobKinds();
// The process's table: BuiltinJobKinds() on first use. Filled further only
// in main() (a program's runners) or a test's set-up, before threads start.
JobKindTable& JobKinds();

// The kind as stored ("train" when the config names none; an unknown kind
// from a newer kestrel as written).
std::string JobKindText(const store::JobRecord& job);

// ---- Readers of the table

// The shared preamble and result report of every kind's child: says
// `stage=data job=… attempt=…`, opens the store, loads the job, checks it
// is of kind `kind` and at this running attempt (else lease_lost), runs the
// kind's runner and reports `reason=<token>` or `result {json}` (the typed
// result with kind and attempt set) through io.progress.
AttemptOutcome RunAttempt(const JobKindTable& kinds, std::string_view kind, const std::string& home,
                          int64_t job_id, int64_t attempt, const AttemptIo& io);

// What the worker needs of the table: the child's command word (the
// kind's name; a kind the table lacks cannot be run) and the gate on the
// typed result. REQUIRES: `kinds` and `env` outlive the worker.
jobs::AttemptKinds WorkerKinds(const JobKindTable& kinds, Env& env);

// The registration step of a succeeded job's kind (its on_succeeded).
// "" when the kind registers nothing.
Result<std::string> RegisterSucceededJob(const JobKindTable& kinds, store::MetadataStore& meta,
                                         const std::string& home, const store::JobRecord& job,
                                         int64_t now_ms);

// GET /api/job-kinds: {"kinds": [{"name", "summary", "default"}], "states":
// [{"name", "live", "finished", "actions": ["cancel"|"retry"...]}]}: what a
// front end shows instead of copying the rules (which states can be
// cancelled: CancelJob's; retried: RetryJob's).
nlohmann::json JobKindsJson(const JobKindTable& kinds);

}  // namespace kestrel::app
