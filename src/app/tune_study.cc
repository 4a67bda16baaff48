#include "app/tune_study.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "app/jobs.h"
#include "app/metric_events.h"
#include "app/tune_study_internal.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/parse.h"

namespace kestrel::app {
namespace {

using json = nlohmann::json;
using tune_internal::DoubleArray;
using tune_internal::ToTrials;

Status Bad(const std::string& field, const std::string& msg) {
  return Status::InvalidArgument(msg, {kRequestFile, 0, field});
}

const char* DirectionName(tune::Direction d) {
  return d == tune::Direction::kMinimize ? "minimize" : "maximize";
}

// The study keys `kestrel tune` takes besides the train keys.
constexpr const char* kStudyKeyNames[] = {"trials",     "parallel", "epochs",      "metric", "direction",
                                          "sampler",    "pruner",   "seed",        "name",   "space",
                                          "min_epochs", "eta",      "multivariate"};

bool IsStudyKey(const std::string& k) {
  return std::any_of(std::begin(kStudyKeyNames), std::end(kStudyKeyNames),
                     [&](const char* n) { return k == n; });
}

Result<int> IntKey(const std::string& key, const std::string& v, int min) {
  KESTREL_ASSIGN_OR_RETURN(int64_t n, ParseInt64(v, {kRequestFile, 0, key}, min, 1'000'000));
  return static_cast<int>(n);
}

// The per-epoch objective of a job from its epoch metric events: epoch e's
// value at index e-1, the newest event of an epoch winning (a resumed
// attempt reports only epochs that are missing). Stops at the first gap.
struct EpochReader {
  int64_t cursor = 0;
  std::map<int, double> fitness;
};

Status ReadEpochs(store::MetadataStore& meta, int64_t job_id, EpochReader* r) {
  for (;;) {
    KESTREL_ASSIGN_OR_RETURN(auto events, meta.ReadEvents(r->cursor, job_id, 1000));
    for (const auto& ev : events) {
      r->cursor = ev.id;
      if (ev.kind != kMetricEventKind) continue;
      auto p = json::parse(ev.payload_json, nullptr, false);
      if (!p.is_object() || p.value("type", "") != "epoch" || !p.contains("values")) continue;
      const json& v = p["values"];
      auto num = [&](const char* k) { return v.contains(k) && v[k].is_number() ? v[k].get<double>() : NAN; };
      const int epoch = p.value("epoch", 0);
      if (epoch >= 1) r->fitness[epoch] = tune::Fitness(num("metrics/mAP50(B)"), num("metrics/mAP50-95(B)"));
    }
    if (events.size() < 1000) return {};
  }
}

std::vector<double> Contiguous(const std::map<int, double>& by_epoch) {
  std::vector<double> out;
  for (int e = 1; by_epoch.count(e) != 0; ++e) out.push_back(by_epoch.at(e));
  return out;
}

std::string DoubleJsonText(double v) { return json(v).dump(); }

std::string DoubleArrayText(const std::vector<double>& v) { return json(v).dump(); }

bool LiveTrialState(const std::string& s) { return s == "queued" || s == "running"; }

// The JobSpec of one trial: the `train` draft of its tokens, filed under
// the study's dataset version.
Result<store::JobSpec> TrialSpec(const StudyDefinition& def, const std::vector<double>& params) {
  KESTREL_ASSIGN_OR_RETURN(JobDraft draft, DraftJob(def.TrialTokens(params), {}));
  std::string name, ref;
  store::SplitDatasetRef(def.data, &name, &ref);
  store::JobSpec spec = draft.spec;
  spec.dataset_version = ref;
  draft.config["data"] = def.data;
  spec.config_json = DumpJson(draft.config);
  spec.spec_json = DumpJson(draft.typed);
  return spec;
}

}  // namespace

namespace tune_internal {

Result<std::vector<double>> DoubleArray(const std::string& text, const std::string& what) {
  auto j = json::parse(text, nullptr, false);
  if (!j.is_array()) return Status::Corruption(what + " is not a JSON array: " + text);
  std::vector<double> out;
  for (const auto& x : j) {
    if (!x.is_number()) return Status::Corruption(what + " holds a non-number: " + text);
    out.push_back(x.get<double>());
  }
  return out;
}

Result<tune::Trial> ToTrial(const store::TrialRecord& r) {
  tune::Trial t;
  t.number = r.number;
  KESTREL_ASSIGN_OR_RETURN(t.state, ParseTrialState(r.state));
  KESTREL_ASSIGN_OR_RETURN(t.params, DoubleArray(r.params_json, "trial params"));
  KESTREL_ASSIGN_OR_RETURN(t.intermediate, DoubleArray(r.intermediate_json, "trial values"));
  if (!r.value.empty()) t.value = json::parse(r.value, nullptr, false).get<double>();
  return t;
}

Result<std::vector<tune::Trial>> ToTrials(const std::vector<store::TrialRecord>& recs) {
  std::vector<tune::Trial> out;
  for (const auto& r : recs) {
    KESTREL_ASSIGN_OR_RETURN(auto t, ToTrial(r));
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tune_internal

std::string TrialStateText(tune::TrialState s) {
  std::string t = tune::TrialStateName(s);
  std::replace(t.begin(), t.end(), '-', '_');
  return t;
}

Result<tune::TrialState> ParseTrialState(const std::string& text) {
  for (auto s : {tune::TrialState::kQueued, tune::TrialState::kRunning, tune::TrialState::kSucceeded,
                 tune::TrialState::kPruned, tune::TrialState::kFailed, tune::TrialState::kInfraFailed}) {
    if (TrialStateText(s) == text) return s;
  }
  return Status::Corruption("unknown trial state '" + text + "'");
}

// ---- StudyDefinition

json StudyDefinition::SettingsJson() const {
  const auto& s = settings;
  return json{{"trials", s.trials},
              {"parallel", s.parallel},
              {"epochs", s.epochs},
              {"metric", metric},
              {"direction", DirectionName(s.direction)},
              {"sampler", s.sampler},
              {"multivariate", s.multivariate},
              {"pruner", s.pruner},
              {"seed", s.seed},
              {"min_epochs", s.min_epochs},
              {"eta", s.eta},
              {"data", data},
              {"model", model},
              {"base", base}};
}

Result<StudyDefinition> StudyDefinition::FromRecord(const store::StudyRecord& rec) {
  auto j = json::parse(rec.settings_json, nullptr, false);
  auto sp = json::parse(rec.space_json, nullptr, false);
  if (!j.is_object() || !sp.is_object()) return Status::Corruption("study '" + rec.name + "': bad settings");
  StudyDefinition d;
  try {
    auto& s = d.settings;
    s.trials = j.at("trials").get<int>();
    s.parallel = j.at("parallel").get<int>();
    s.epochs = j.at("epochs").get<int>();
    s.direction = j.at("direction") == "minimize" ? tune::Direction::kMinimize : tune::Direction::kMaximize;
    s.sampler = j.at("sampler").get<std::string>();
    s.multivariate = j.at("multivariate").get<bool>();
    s.pruner = j.at("pruner").get<std::string>();
    s.seed = j.at("seed").get<uint64_t>();
    s.min_epochs = j.at("min_epochs").get<int>();
    s.eta = j.at("eta").get<int>();
    d.metric = j.at("metric").get<std::string>();
    d.data = j.at("data").get<std::string>();
    d.model = j.at("model").get<std::string>();
    d.base = j.at("base").get<std::map<std::string, std::string>>();
    for (const auto& p : sp.at("params")) {
      tune::Param q;
      q.key = p.at("key").get<std::string>();
      const std::string kind = p.at("kind").get<std::string>();
      if (kind == "categorical") {
        q.kind = tune::ParamKind::kCategorical;
        q.choices = p.at("choices").get<std::vector<std::string>>();
      } else {
        q.kind = kind == "int" ? tune::ParamKind::kInt : tune::ParamKind::kFloat;
        q.low = p.at("low").get<double>();
        q.high = p.at("high").get<double>();
        q.log = p.value("log", false);
        q.step = p.value("step", int64_t{1});
      }
      d.space.params.push_back(std::move(q));
    }
    d.space.fixed = sp.at("fixed").get<std::map<std::string, std::string>>();
  } catch (const json::exception& e) {
    return Status::Corruption("study '" + rec.name + "': bad settings: " + e.what());
  }
  KESTREL_RETURN_IF_ERROR(d.settings.Validate());
  if (tune::SpaceHash(d.space) != rec.space_hash) {
    return Status::Corruption("study '" + rec.name + "': its space does not hash to " + rec.space_hash);
  }
  return d;
}

std::vector<std::string> StudyDefinition::TrialTokens(const std::vector<double>& params) const {
  std::vector<std::string> t = {"data=" + data, "model=" + model};
  for (const auto& [k, v] : base) t.push_back(k + "=" + v);
  for (auto& tok : tune::TrialTokens(space, params)) t.push_back(std::move(tok));
  t.push_back("epochs=" + std::to_string(settings.epochs));
  return t;
}

// ---- CreateStudy

Result<StudyCreateResult> CreateStudy(store::MetadataStore& meta, const StudyRequest& req, int64_t now_ms) {
  StudyDefinition def;
  auto& s = def.settings;
  s.trials = 50;
  s.parallel = 4;
  s.epochs = 30;
  std::string name, space_path;
  std::vector<std::string> train_tokens;
  for (const auto& tok : req.tokens) {
    const size_t eq = tok.find('=');
    if (eq == std::string::npos || eq == 0) return Bad("keys", "expected key=value, got '" + tok + "'");
    const std::string k = tok.substr(0, eq), v = tok.substr(eq + 1);
    if (!IsStudyKey(k)) {
      if (k == "data") {
        def.data = v;
      } else if (k == "model") {
        def.model = v;
      } else {
        train_tokens.push_back(tok);
        def.base[k] = v;
      }
      continue;
    }
    if (k == "trials") {
      KESTREL_ASSIGN_OR_RETURN(s.trials, IntKey(k, v, 1));
    }
    if (k == "parallel") {
      KESTREL_ASSIGN_OR_RETURN(s.parallel, IntKey(k, v, 1));
    }
    if (k == "epochs") {
      KESTREL_ASSIGN_OR_RETURN(s.epochs, IntKey(k, v, 1));
    }
    if (k == "min_epochs") {
      KESTREL_ASSIGN_OR_RETURN(s.min_epochs, IntKey(k, v, 1));
    }
    if (k == "eta") {
      KESTREL_ASSIGN_OR_RETURN(s.eta, IntKey(k, v, 2));
    }
    if (k == "seed") {
      KESTREL_ASSIGN_OR_RETURN(int64_t seed, ParseInt64(v, {kRequestFile, 0, k}, 0));
      s.seed = static_cast<uint64_t>(seed);
    }
    if (k == "metric" && v != "fitness") {
      return Bad(k, "metric=" + v + ": the one objective is fitness (0.1 mAP50 + 0.9 mAP50-95)");
    }
    if (k == "direction") {
      if (v != "maximize" && v != "minimize") return Bad(k, "expected maximize or minimize, got '" + v + "'");
      s.direction = v == "minimize" ? tune::Direction::kMinimize : tune::Direction::kMaximize;
    }
    if (k == "sampler") s.sampler = v;
    if (k == "pruner") s.pruner = v;
    if (k == "multivariate") {
      if (v != "true" && v != "false") return Bad(k, "expected true or false, got '" + v + "'");
      s.multivariate = v == "true";
    }
    if (k == "name") name = v;
    if (k == "space") space_path = v;
  }
  if (def.data.empty())
    return Bad("data", "data=NAME[@VERSION] is required (the dataset every trial trains on)");
  if (def.model.empty())
    return Bad("model", "model= is required (the model every trial trains: a scale, yaml or weights)");
  {
    Status v = s.Validate();
    if (!v.IsOk()) return Bad(v.Where().field, v.Message());
  }
  // The space: a file's text, or the default detection space.
  if (req.space_yaml.has_value()) {
    KESTREL_ASSIGN_OR_RETURN(def.space, tune::ParseSpaceYaml(*req.space_yaml, "space"));
  } else if (!space_path.empty()) {
    if (!req.read_space) return Bad("space", "space= is a file on the command line only");
    KESTREL_ASSIGN_OR_RETURN(std::string text, req.read_space(space_path));
    KESTREL_ASSIGN_OR_RETURN(def.space, tune::ParseSpaceYaml(text, space_path));
  } else {
    def.space = tune::DefaultDetectionSpace();
  }
  for (const auto& [k, v] : def.base) {
    if (def.space.Find(k) != nullptr || def.space.fixed.count(k) != 0) {
      return Bad(k, "'" + k + "' is both a study key=value and in the search space; give it in one place");
    }
  }
  // The dataset version every trial trains on, pinned now.
  {
    std::string dname, ref;
    store::SplitDatasetRef(def.data, &dname, &ref);
    auto version = meta.GetVersion(dname, ref);
    if (!version.IsOk()) return Bad("data", "data=" + def.data + ": " + version.GetStatus().Message());
    def.data = dname + "@" + version->version_id;
  }
  // Every trial is a train job: the base keys and a trial at each end of
  // the space must draft as one (the same checks as `kestrel submit`).
  for (bool high : {false, true}) {
    std::vector<double> ends;
    for (const auto& p : def.space.params) ends.push_back(p.Snap(high ? p.InternalHigh() : p.InternalLow()));
    auto spec = TrialSpec(def, ends);
    if (!spec.IsOk()) return spec.GetStatus();
  }
  const std::string hash = tune::SpaceHash(def.space);
  if (name.empty()) {
    std::string dname, ref;
    store::SplitDatasetRef(def.data, &dname, &ref);
    name = dname + "-" + Sha256Hex(hash + DumpJson(def.SettingsJson())).substr(0, 8);
  }
  store::StudyRecord rec;
  rec.name = name;
  rec.space_hash = hash;
  rec.space_json = DumpJson(tune::SpaceToJson(def.space));
  rec.settings_json = DumpJson(def.SettingsJson());
  rec.state = kStudyRunning;
  rec.created_ms = rec.updated_ms = now_ms;
  StudyCreateResult out;
  auto made = meta.CreateStudy(rec, &out.created);
  if (!made.IsOk()) {
    const Status& st = made.GetStatus();
    return Status(st.Code(), st.Message(),
                  {kRequestFile, 0, st.Where().field.empty() ? "name" : st.Where().field});
  }
  out.study = *made;
  if (!out.created && out.study.settings_json != rec.settings_json) {
    return Bad("name", "study '" + name + "' exists with other settings (" + out.study.settings_json +
                           "); give another name= for a new study");
  }
  if (out.study.state == kStudyFinished) return out;
  // A stopped study run again continues (its cancelled trials spent none).
  if (out.study.state == kStudyStopped || out.study.state == kStudyStopping) {
    store::StudyRecord again = out.study;
    again.state = kStudyRunning;
    again.updated_ms = now_ms;
    KESTREL_ASSIGN_OR_RETURN(bool wrote, meta.UpdateStudy(again, out.study.state));
    if (wrote) out.study = again;
  }
  // The coordinator: a `tune` job, retried soon when its process is lost.
  KESTREL_ASSIGN_OR_RETURN(JobDraft draft, DraftJob({"kind=tune", "study=" + name}, {}));
  store::JobSpec spec = draft.spec;
  std::string dname, ref;
  store::SplitDatasetRef(def.data, &dname, &ref);
  spec.dataset_version = ref;
  spec.config_json = DumpJson(draft.config);
  spec.spec_json = DumpJson(draft.typed);
  spec.retry.max_retries = 100;
  spec.retry.backoff_ms = {1000};
  KESTREL_ASSIGN_OR_RETURN(store::JobRecord job, meta.SubmitJob(spec, now_ms, &out.job_created));
  out.job_id = job.id;
  if (out.study.job_id != job.id) {
    store::StudyRecord upd = out.study;
    upd.job_id = job.id;
    upd.updated_ms = now_ms;
    KESTREL_ASSIGN_OR_RETURN(bool wrote, meta.UpdateStudy(upd, out.study.state));
    if (wrote) out.study = upd;
  }
  return out;
}

// ---- the coordinator

StudyCoordinator::StudyCoordinator(store::MetadataStore& meta, Env& env, std::string study)
    : meta_(meta), env_(env), study_(std::move(study)) {}

Status StudyCoordinator::Save(store::TrialRecord& r, store::TrialRecord upd) {
  upd.updated_ms = env_.UnixMillis();
  KESTREL_ASSIGN_OR_RETURN(bool wrote, meta_.UpdateTrial(upd, r.state));
  if (!wrote) {
    return Status::Aborted("study '" + study_ + "' trial " + std::to_string(r.number) +
                           " moved meanwhile (another coordinator?)");
  }
  r = std::move(upd);
  return {};
}

Status StudyCoordinator::SubmitTrial(const StudyDefinition& def, store::TrialRecord& r) {
  KESTREL_ASSIGN_OR_RETURN(auto params, DoubleArray(r.params_json, "trial params"));
  auto spec = TrialSpec(def, params);
  if (!spec.IsOk()) {
    // The sampled config is refused by the trainer's own checks: the
    // trial's fault (it spends a trial and is left out of the model).
    store::TrialRecord upd = r;
    upd.state = "failed";
    return Save(r, upd);
  }
  KESTREL_ASSIGN_OR_RETURN(store::JobRecord job,
                           meta_.SubmitTrialJob(r.study_id, r.number, *spec, env_.UnixMillis(), nullptr));
  r.job_id = job.id;
  return {};
}

Status StudyCoordinator::Reconcile(const StudyDefinition& def, const tune::StudyPlanner& planner,
                                   std::vector<store::TrialRecord>& trials, size_t i) {
  store::TrialRecord& r = trials[i];
  if (r.state == "queued" && r.job_id == 0) KESTREL_RETURN_IF_ERROR(SubmitTrial(def, r));
  if (r.job_id == 0 || !(LiveTrialState(r.state) || r.state == "pruned")) return {};
  // A trial recorded before each trial had its own job (the job system
  // deduplicated a config two trials sampled while the first ran) shares an
  // earlier trial's job: only the earlier trial drives that job, and this
  // one spends no trial (the study samples another in its place).
  const auto earlier = trials.begin() + static_cast<std::ptrdiff_t>(i);
  if (std::any_of(trials.begin(), earlier,
                  [&](const store::TrialRecord& e) { return e.job_id == r.job_id; })) {
    store::TrialRecord shared = r;
    shared.state = "infra_failed";
    return Save(r, shared);
  }
  KESTREL_ASSIGN_OR_RETURN(store::JobRecord job, meta_.GetJob(r.job_id));
  store::TrialRecord upd = r;
  if (r.state == "pruned") {
    // Live again: a promotion whose record a killed coordinator did not write.
    if (!store::IsLive(job.state)) return {};
    upd.state = "running";
    upd.pruned_at = 0;
    upd.promotions = r.promotions + 1;
    return Save(r, upd);
  }
  auto& [cursor, by_epoch] = epochs_[r.job_id];
  EpochReader reader{cursor, by_epoch};
  KESTREL_RETURN_IF_ERROR(ReadEpochs(meta_, r.job_id, &reader));
  cursor = reader.cursor;
  by_epoch = reader.fitness;
  std::vector<double> values = Contiguous(by_epoch);
  // A diverged epoch (NaN) is never a value: the job fails and so does the trial.
  for (size_t k = 0; k < values.size(); ++k) {
    if (!std::isfinite(values[k])) {
      values.resize(k);
      break;
    }
  }
  upd.epochs_run = static_cast<int64_t>(by_epoch.size());
  KESTREL_ASSIGN_OR_RETURN(auto stored, DoubleArray(r.intermediate_json, "trial values"));
  if (r.pruned_at == 0 && values.size() > stored.size()) {
    KESTREL_ASSIGN_OR_RETURN(auto view, ToTrials(trials));
    for (size_t k = stored.size() + 1; k <= values.size(); ++k) {
      stored.assign(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(k));
      view[i].state = tune::TrialState::kRunning;
      view[i].intermediate = stored;
      if (static_cast<int>(k) < def.settings.epochs &&
          planner.OnEpoch(view, view[i]) == tune::PruneDecision::kPrune) {
        upd.pruned_at = static_cast<int64_t>(k);
        break;
      }
    }
    upd.intermediate_json = DoubleArrayText(stored);
  }
  if (upd.pruned_at > 0) {
    // Stopped at its rung through the normal stop path: the job is
    // cancelled (the trainer checkpoints); pruned once the job has ended.
    if (store::IsLive(job.state)) {
      if (upd.state == "queued") upd.state = "running";
      if (upd.intermediate_json != r.intermediate_json || upd.pruned_at != r.pruned_at ||
          upd.state != r.state)
        KESTREL_RETURN_IF_ERROR(Save(r, upd));
      auto c = meta_.CancelJob(job.id, env_.UnixMillis());
      if (!c.IsOk() && c.GetStatus().Code() != StatusCode::kFailedPrecondition) return c.GetStatus();
      return {};
    }
    upd.state = "pruned";
    return Save(r, upd);
  }
  switch (job.state) {
    case store::JobState::kQueued:
    case store::JobState::kFailedRetryable:
      break;  // the job system runs or retries it
    case store::JobState::kRunning:
      upd.state = "running";
      break;
    case store::JobState::kSucceeded: {
      std::optional<double> value;
      if (static_cast<int>(values.size()) >= def.settings.epochs) {
        value = values[static_cast<size_t>(def.settings.epochs) - 1];
      } else {
        auto res = AttemptResult::Parse(job.result_json);
        if (res.IsOk() && res->map50 && res->map50_95) value = tune::Fitness(*res->map50, *res->map50_95);
      }
      if (value && std::isfinite(*value)) {
        upd.state = "succeeded";
        upd.value = DoubleJsonText(*value);
      } else {
        upd.state = "failed";  // no objective (validation off, or diverged): never a value of 0
      }
      break;
    }
    case store::JobState::kFailedPermanent: {
      KESTREL_ASSIGN_OR_RETURN(auto attempts, meta_.ListAttempts(job.id));
      const bool infra = !attempts.empty() && attempts.back().infrastructure;
      upd.state = infra ? "infra_failed" : "failed";
      break;
    }
    case store::JobState::kCancelled:
      upd.state = "infra_failed";  // cancelled by a stop or by hand: not the trial's fault
      break;
  }
  if (upd.state == r.state && upd.epochs_run == r.epochs_run &&
      upd.intermediate_json == r.intermediate_json && upd.value == r.value)
    return {};
  return Save(r, upd);
}

Result<bool> StudyCoordinator::Step() {
  KESTREL_ASSIGN_OR_RETURN(store::StudyRecord study, meta_.GetStudy(study_));
  if (study.state == kStudyFinished || study.state == kStudyStopped) return true;
  KESTREL_ASSIGN_OR_RETURN(StudyDefinition def, StudyDefinition::FromRecord(study));
  tune::StudyPlanner planner(def.space, def.settings);
  KESTREL_ASSIGN_OR_RETURN(auto trials, meta_.ListTrials(study.id));
  for (size_t i = 0; i < trials.size(); ++i) KESTREL_RETURN_IF_ERROR(Reconcile(def, planner, trials, i));
  auto finish = [&](const char* state) -> Result<bool> {
    store::StudyRecord upd = study;
    upd.state = state;
    upd.updated_ms = env_.UnixMillis();
    KESTREL_ASSIGN_OR_RETURN(bool wrote, meta_.UpdateStudy(upd, study.state));
    (void)wrote;  // a stop raced the end: the next step reads which won
    return true;
  };
  if (study.state == kStudyStopping) {
    bool live = false;
    for (const auto& r : trials) {
      if (!LiveTrialState(r.state) || r.job_id == 0) continue;
      live = true;
      auto c = meta_.CancelJob(r.job_id, env_.UnixMillis());
      if (!c.IsOk() && c.GetStatus().Code() != StatusCode::kFailedPrecondition) return c.GetStatus();
    }
    if (live) return false;
    return finish(kStudyStopped);
  }
  KESTREL_ASSIGN_OR_RETURN(auto view, ToTrials(trials));
  if (planner.Finished(view)) return finish(kStudyFinished);
  for (const tune::StudyAction& a : planner.Plan(view)) {
    const int64_t now = env_.UnixMillis();
    if (a.kind == tune::StudyAction::Kind::kSubmit) {
      store::TrialRecord t;
      t.study_id = study.id;
      t.number = a.number;
      t.params_json = DoubleArrayText(a.params);
      t.created_ms = t.updated_ms = now;
      KESTREL_ASSIGN_OR_RETURN(store::TrialRecord added, meta_.AddTrial(t, nullptr));
      KESTREL_RETURN_IF_ERROR(SubmitTrial(def, added));
      continue;
    }
    // kResume: an ASHA promotion continues the trial's job from its checkpoint.
    auto it = std::find_if(trials.begin(), trials.end(),
                           [&](const store::TrialRecord& r) { return r.number == a.number; });
    if (it == trials.end()) return Status::Internal("promotion of an unknown trial");
    auto retried = meta_.RetryJob(it->job_id, now);
    if (!retried.IsOk() && retried.GetStatus().Code() != StatusCode::kFailedPrecondition)
      return retried.GetStatus();
    store::TrialRecord upd = *it;
    upd.state = "running";
    upd.pruned_at = 0;
    upd.promotions = it->promotions + 1;
    KESTREL_RETURN_IF_ERROR(Save(*it, upd));
  }
  return false;
}

Status StudyCoordinator::Run(const CoordinatorOptions& options, const std::atomic<bool>* stop) {
  for (;;) {
    if (stop != nullptr && stop->load()) return Status::Aborted("stopped");
    auto done = Step();
    if (!done.IsOk() && done.GetStatus().Code() != StatusCode::kAborted) return done.GetStatus();
    if (done.IsOk() && *done) return {};
    if (options.after_step) options.after_step();
    for (int64_t waited = 0; waited < options.poll_ms; waited += 50) {
      if (stop != nullptr && stop->load()) break;
      env_.SleepMicros(50'000);
    }
  }
}

}  // namespace kestrel::app

namespace kestrel::app {
namespace {

class TuneJobKeys final : public JobKeySchema {
 public:
  void Bind(OptionSet& set) override { set.String("study", &study_, "the study this job coordinates"); }
  std::string Refused(const std::string& /*key*/) const override { return ""; }
  Result<KindSubmission> Check(const jobs::JobKeys& jk, OptionSet& set, const WeightsResolver& /*weights*/,
                               const ModelResolver& /*model*/) override {
    if (jk.device != "cpu") return Bad("device", "a tune job runs on the CPU (device=cpu); its trials train");
    if (study_.empty()) return Bad("study", "study=NAME is required (`kestrel tune` creates the study)");
    KindSubmission s;
    s.config = set.ToJson();
    return s;
  }

 private:
  std::string study_;
};

Result<AttemptResult> RunTuneAttempt(AttemptContext& ctx) {
  OptionSet set;
  std::string study;
  set.String("study", &study, "");
  KESTREL_RETURN_IF_ERROR(ctx.ApplyConfig(set));
  ctx.Progress("stage=train");
  StudyCoordinator coordinator(*ctx.meta, Env::Default(), study);
  CoordinatorOptions options;
  int steps = 0;
  options.after_step = [&] {
    if (steps++ % 20 == 0) ctx.Progress("stage=train study=" + study);  // every ~10 s
  };
  Status s = coordinator.Run(options, ctx.io != nullptr ? ctx.io->stop : nullptr);
  if (!s.IsOk()) return s;
  KESTREL_ASSIGN_OR_RETURN(json show, StudyShowJson(*ctx.meta, study));
  AttemptResult r;
  // Under "study": the summary's `best` and `model` would read as the typed
  // fields of the same names.
  r.details = {{"study", show["study"]}};
  ctx.Out() << "study " << study << ": " << show["study"]["state"].get<std::string>() << "\n";
  return r;
}

}  // namespace

JobKindSpec TuneKind() {
  JobKindSpec k;
  k.name = "tune";
  k.summary = "coordinate a hyperparameter study (study=NAME; its trials are train jobs; `kestrel tune`)";
  k.keys = [] { return std::make_unique<TuneJobKeys>(); };
  k.run = RunTuneAttempt;
  // The coordinator ends only with its study: a result that says otherwise
  // is not a success.
  k.gate = [](const AttemptResult& r, const store::JobRecord&, Env&) -> Status {
    const json study = r.details.is_object() ? r.details.value("study", json::object()) : json::object();
    const std::string state = study.is_object() ? study.value("state", "") : "";
    if (state == kStudyFinished || state == kStudyStopped) return {};
    return Status::FailedPrecondition("the study is " + (state.empty() ? std::string("unknown") : state) +
                                      ", not finished or stopped");
  };
  return k;
}

}  // namespace kestrel::app
