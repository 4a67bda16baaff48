// Hyperparameter studies over the job queue (issue 32, docs/tune.md): the
// use cases of `kestrel tune`, `tune show|best|stop|list` and the
// /api/studies routes, and the coordinator the `tune` job kind runs.
//
// A study is a store record (store/study_types.h: name, space hash,
// settings, state) with one `train` job per trial. Its coordinator is an
// ordinary job (kind `tune`, config {"kind": "tune", "study": NAME}) whose
// attempt loops over StudyCoordinator::Step: it reads the trials' jobs and
// their epoch metric events, asks tune::StudyPlanner what to do, submits
// trials (MetadataStore::SubmitTrialJob), stops pruned ones through the
// normal stop path (CancelJob: the trainer checkpoints) and continues
// promoted ones from their checkpoint (RetryJob). Every decision is a pure
// function of what the store holds, every write a compare-and-set, so a
// coordinator killed anywhere and run again continues the same study: no
// finished trial runs again, none is lost.
//
// Thread-safety: the functions borrow one MetadataStore (one per thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "app/job_kinds.h"
#include "core/env.h"
#include "core/status.h"
#include "eval/study_plots.h"
#include "store/metadata_store.h"
#include "tune/space.h"
#include "tune/study.h"

namespace kestrel::app {

// Study states (StudyRecord::state).
inline constexpr const char* kStudyRunning = "running";    // its coordinator works through the trials
inline constexpr const char* kStudyStopping = "stopping";  // `tune stop`: live trials being cancelled
inline constexpr const char* kStudyStopped = "stopped";
inline constexpr const char* kStudyFinished = "finished";  // every trial spent

// Trial states as stored: tune::TrialStateName with '-' as '_'
// ("infra_failed"), and back.
std::string TrialStateText(tune::TrialState s);
Result<tune::TrialState> ParseTrialState(const std::string& text);

// What a study is, as its settings_json stores it.
struct StudyDefinition {
  tune::StudySettings settings;
  std::string metric = "fitness";  // the one objective: 0.1 mAP50 + 0.9 mAP50-95
  std::string data;                // NAME@<version id>
  std::string model;               // model= of every trial
  // The train keys every trial shares (template expanded, job keys
  // included), key -> value text, without data, model and epochs.
  std::map<std::string, std::string> base;
  tune::SearchSpace space;

  nlohmann::json SettingsJson() const;  // settings_json (with data, model, base)
  static Result<StudyDefinition> FromRecord(const store::StudyRecord& rec);
  // The `train` tokens of trial `params` (internal values): data, model,
  // the base keys, the space's fixed keys and sampled values, epochs.
  std::vector<std::string> TrialTokens(const std::vector<double>& params) const;
};

// ---- kestrel tune / POST /api/studies

struct StudyRequest {
  // key=value tokens as typed, template= already expanded (the front end
  // runs TemplateLibrary::ExpandArgs): the study keys (trials, parallel,
  // epochs, metric, direction, sampler, pruner, seed, name, space,
  // min_epochs, eta, multivariate) and every other key a train key of each
  // trial (data= and model= required).
  std::vector<std::string> tokens;
  // The space file's text when the front end read it (POST /api/studies'
  // "space"); space=PATH is read through `read_space` otherwise.
  std::optional<std::string> space_yaml;
  std::function<Result<std::string>(const std::string& path)> read_space;
};
struct StudyCreateResult {
  store::StudyRecord study;
  bool created = false;  // false: the same study existed (attached)
  int64_t job_id = 0;    // its coordinator job
  bool job_created = false;
};
// Parses and validates the request (every key named in its error; a bound
// outside a key's range names the key and the range; the base keys and a
// trial at each end of the space drafted as a `train` job, so a study
// that cannot run is refused here), creates the study or attaches to it
// (same name + space hash), and queues its coordinator job (deduplicated:
// a live coordinator is reused). A study that already finished or stopped
// is returned as it is, no job queued.
Result<StudyCreateResult> CreateStudy(store::MetadataStore& meta, const StudyRequest& req, int64_t now_ms);

// ---- the coordinator

struct CoordinatorOptions {
  int64_t poll_ms = 500;  // between steps
  // Called after every step (the runner reports progress with it, so the
  // worker's hang detector sees a coordinator waiting on long trials alive).
  std::function<void()> after_step;
};
class StudyCoordinator {
 public:
  StudyCoordinator(store::MetadataStore& meta, Env& env, std::string study);
  // One pass: reconcile every trial with its job and metric events (one
  // state change per event, compare-and-set), prune, stop or continue,
  // then apply the planner's actions. True when the study is over
  // (finished or stopped).
  Result<bool> Step();
  // Steps until the study is over or *stop is raised.
  Status Run(const CoordinatorOptions& options, const std::atomic<bool>* stop);

 private:
  // Brings trial `i` up to date with its job; writes at most one change.
  Status Reconcile(const StudyDefinition& def, const tune::StudyPlanner& planner,
                   std::vector<store::TrialRecord>& trials, size_t i);
  // Submits trial `r`'s job (idempotent); a config the trainer refuses
  // makes it failed.
  Status SubmitTrial(const StudyDefinition& def, store::TrialRecord& r);
  Status Save(store::TrialRecord& r, store::TrialRecord upd);
  store::MetadataStore& meta_;
  Env& env_;
  std::string study_;
  // Per trial job: the last metric event read and the objective by epoch
  // (a cache: a restarted coordinator reads them again from the store).
  std::map<int64_t, std::pair<int64_t, std::map<int, double>>> epochs_;
};

// The `tune` row of the job-kind table (docs/jobs.md "Job kinds"): key
// study=NAME (an existing study), device=cpu; its runner is the
// coordinator (torch-free: every program can run it), whose result is the
// study's summary (the `study` object of StudyShowJson).
JobKindSpec TuneKind();

// ---- views

// GET /api/studies/{name}, `tune show NAME --json` (docs/server.md
// "Studies"): {"ok", "study", "space", "trials", "best", "importances"}.
// No timestamps: a study's document is a function of its trials.
Result<nlohmann::json> StudyShowJson(store::MetadataStore& meta, const std::string& name);
// GET /api/studies, `tune list --json`: {"ok", "studies": [study…]}.
Result<nlohmann::json> StudyListJson(store::MetadataStore& meta);
// GET /api/studies/{name}/trials: {"ok", "study", "state", "trials"}.
Result<nlohmann::json> StudyTrialsJson(store::MetadataStore& meta, const std::string& name);
// `tune show NAME --plots DIR` (docs/tune.md "Plots"): the study's trials
// for eval::WriteStudyPlots: every space param (log flag, choices), every
// trial by number with its values as trained (Param::FromInternal; a
// categorical's choice index as is) and the objective of succeeded trials
// only, and the importances of the show document (empty below 4 succeeded
// trials).
Result<eval::StudyPlotData> StudyPlotDataFor(store::MetadataStore& meta, const std::string& name);
// `tune show NAME` as text: settings, the trials table, best, importances.
std::string StudyShowText(const nlohmann::json& show);

// `tune stop NAME`: running -> stopping (the coordinator cancels the live
// trials and marks it stopped); a stopped or finished study unchanged.
// {"ok", "study"}.
Result<nlohmann::json> StopStudy(store::MetadataStore& meta, const std::string& name, int64_t now_ms);

// `tune best NAME`: the best succeeded trial's train tokens (without data=);
// kFailedPrecondition when no trial succeeded.
Result<std::vector<std::string>> BestTrialTokens(store::MetadataStore& meta, const std::string& name);

}  // namespace kestrel::app
