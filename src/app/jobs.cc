#include "app/jobs.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>

#include "app/fingerprint.h"
#include "app/job_labels.h"
#include "app/templates.h"
#include "core/json.h"
#include "core/options.h"
#include "core/utf8.h"

namespace kestrel::app {
namespace {

using nlohmann::json;

Status Bad(const std::string& field, const std::string& msg) {
  return Status::InvalidArgument(msg, {kRequestFile, 0, field});
}

// An error of a key's value, located in the request under its field.
Status InRequest(const Status& s) {
  if (s.IsOk() || (s.Code() == StatusCode::kInvalidArgument && s.Where().file == kRequestFile)) return s;
  return Status::InvalidArgument(s.Message(), {kRequestFile, 0, s.Where().field});
}

json ParsedOrText(const std::string& text) {
  auto j = json::parse(text, nullptr, false);
  return j.is_discarded() ? json(text) : j;
}

}  // namespace

Status RelocateRequestError(const Status& s, const std::string& file) {
  if (s.IsOk() || s.Where().file != kRequestFile) return s;
  return Status(s.Code(), s.Message(), {file, 0, s.Where().field}).WithReason(s.Reason());
}

Result<JobDraft> DraftJob(const std::vector<std::string>& tokens, const WeightsResolver& resolve_weights,
                          const ModelResolver& resolve_model, const JobKindTable& kinds) {
  jobs::JobKeys jk;
  OptionSet job_set;
  jk.Bind(job_set);
  // The kind decides which command keys exist, so it is read first; a bad
  // kind= is reported where it stands, like every other key.
  const JobKindSpec* kind = kinds.Find(JobKindTable::kDefaultKind);
  for (const auto& token : tokens) {
    std::string k, v;
    if (FirstInvalidUtf8(token) == std::string::npos && SplitKeyValue(token, &k, &v) &&
        k == jobs::kJobKindKey) {
      kind = kinds.Find(v);
      if (kind == nullptr) {
        std::string known;
        for (const auto& n : kinds.Names()) known += (known.empty() ? "" : ", ") + n;
        return Bad(jobs::kJobKindKey,
                   "kind=" + EscapeForDisplayCut(v) + " is not a job kind (one of: " + known + ")");
      }
    }
  }
  if (kind == nullptr) return Bad(jobs::kJobKindKey, "kind= is required (this table has no default kind)");
  std::unique_ptr<JobKeySchema> schema = kind->keys();
  OptionSet set;
  schema->Bind(set);
  JobDraft d;
  d.kind = kind->name;
  d.typed = json::object();
  for (const auto& token : tokens) {
    std::string k, v;
    // The job is stored as JSON: every key and value must be UTF-8 text.
    if (const size_t bad = FirstInvalidUtf8(token); bad != std::string::npos) {
      const std::string shown = EscapeInvalidUtf8(token);
      return Bad(SplitKeyValue(shown, &k, &v) ? k : "",
                 "argument '" + shown + "' is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    }
    if (!SplitKeyValue(token, &k, &v))
      return Bad("", "unexpected argument '" + token + "' (submit takes key=value)");
    d.typed[k] = v;
    Status s;
    if (job_set.Has(k)) {
      s = job_set.Set(k, v, {kRequestFile, 0, ""});
    } else if (const std::string why = schema->Refused(k); !why.empty()) {
      s = Bad(k, why);
    } else {
      s = set.Set(k, v, {kRequestFile, 0, ""});
    }
    KESTREL_RETURN_IF_ERROR(InRequest(s));
  }
  KESTREL_RETURN_IF_ERROR(InRequest(jk.Validate()));
  jk.ApplyTo(&d.spec);
  KESTREL_ASSIGN_OR_RETURN(KindSubmission sub, schema->Check(jk, set, resolve_weights, resolve_model));
  d.config = std::move(sub.config);
  if (kind->config_names_kind) d.config[jobs::kJobKindKey] = kind->name;
  d.data = std::move(sub.data);
  d.model_dataset_version = std::move(sub.model_dataset_version);
  d.data_as_given = d.data;
  return d;
}

Result<SubmitResult> SubmitJob(store::MetadataStore& meta, JobDraft draft, int64_t now_ms) {
  SubmitResult r;
  if (draft.data.empty()) {
    // No dataset of its own (an export job without data=): filed under the
    // model's, if any (its config has no data=).
    store::JobSpec spec = draft.spec;
    spec.dataset_version = r.version_id = draft.model_dataset_version;
    spec.config_json = DumpJson(draft.config);
    spec.spec_json = DumpJson(draft.typed);
    if (spec.name.empty()) spec.name = DefaultJobName(draft.kind, "", 0, draft.config);
    KESTREL_ASSIGN_OR_RETURN(r.job, meta.SubmitJob(spec, now_ms, &r.created));
    return r;
  }
  std::string ref;
  store::SplitDatasetRef(draft.data, &r.dataset, &ref);
  auto version = meta.GetVersion(r.dataset, ref);
  if (!version.IsOk()) {
    const Status& vs = version.GetStatus();
    const std::string msg = "data=" + draft.data + ": " + vs.Message();
    if (vs.Code() == StatusCode::kNotFound || vs.Code() == StatusCode::kInvalidArgument)
      return Bad("data", msg);
    return Status(vs.Code(), msg, {"", 0, "data"});
  }
  r.version_id = version->version_id;
  const std::string data = r.dataset + "@" + r.version_id;
  // A dataset path the front end imported is stored as the version, not the path.
  if (draft.data != draft.data_as_given) draft.typed["data"] = data;
  draft.config["data"] = data;
  store::JobSpec spec = draft.spec;
  spec.dataset_version = r.version_id;
  spec.config_json = DumpJson(draft.config);
  spec.spec_json = DumpJson(draft.typed);
  if (spec.name.empty()) spec.name = DefaultJobName(draft.kind, r.dataset, version->seq, draft.config);
  KESTREL_ASSIGN_OR_RETURN(r.job, meta.SubmitJob(spec, now_ms, &r.created));
  return r;
}

Result<SubmitResult> SubmitTokens(const std::vector<std::string>& tokens, const SubmitSteps& steps,
                                  int64_t now_ms, const JobKindTable& kinds) {
  store::MetadataStore* meta = nullptr;
  auto open = [&]() -> Status {
    if (meta != nullptr) return {};
    if (!steps.open_store) return Status::Internal("SubmitTokens needs open_store");
    KESTREL_ASSIGN_OR_RETURN(meta, steps.open_store());
    return {};
  };
  std::vector<std::string> expanded = tokens;
  const bool templated = std::any_of(tokens.begin(), tokens.end(),
                                     [](const std::string& t) { return t.rfind("template=", 0) == 0; });
  if (templated) {
    KESTREL_RETURN_IF_ERROR(open());
    KESTREL_ASSIGN_OR_RETURN(expanded, TemplateLibrary(*meta).ExpandArgs(tokens));
  }
  KESTREL_ASSIGN_OR_RETURN(JobDraft draft,
                           DraftJob(expanded, steps.resolve_weights, steps.resolve_model, kinds));
  KESTREL_RETURN_IF_ERROR(open());
  if (!draft.data.empty() && steps.resolve_data) KESTREL_RETURN_IF_ERROR(steps.resolve_data(&draft.data));
  return SubmitJob(*meta, std::move(draft), now_ms);
}

namespace {

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    out.push_back(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

const char* SortName(store::JobSort s) {
  switch (s) {
    case store::JobSort::kCreated:
      return "created";
    case store::JobSort::kPriority:
      return "priority";
    case store::JobSort::kState:
      return "state";
  }
  return "created";
}

// JobPage::datasets of `jobs`: one registry query for the page's distinct
// version ids.
Result<std::vector<JobDatasetName>> NameDatasets(store::MetadataStore& meta,
                                                 const std::vector<store::JobRecord>& jobs) {
  std::vector<std::string> ids;
  for (const auto& j : jobs) {
    if (!j.spec.dataset_version.empty()) ids.push_back(j.spec.dataset_version);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  KESTREL_ASSIGN_OR_RETURN(auto versions, meta.ListVersionsById(ids));
  std::map<std::string, std::vector<const store::DatasetVersionRecord*>> by_id;
  for (const auto& v : versions) by_id[v.version_id].push_back(&v);
  std::vector<JobDatasetName> out(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    auto it = by_id.find(jobs[i].spec.dataset_version);
    if (it == by_id.end()) continue;
    const store::DatasetVersionRecord* v = it->second.front();
    if (it->second.size() > 1) {
      // Only then is the config parsed: its data= is NAME@<version id>.
      auto cfg = json::parse(jobs[i].spec.config_json, nullptr, false);
      const json* data = cfg.is_object() && cfg.contains("data") ? &cfg["data"] : nullptr;
      if (data != nullptr && data->is_string()) {
        std::string name, ref;
        store::SplitDatasetRef(data->get<std::string>(), &name, &ref);
        for (const auto* c : it->second) {
          if (c->dataset == name) v = c;
        }
      }
    }
    out[i] = {v->dataset, v->seq};
  }
  return out;
}

}  // namespace

Result<store::JobFilter> JobListFilter(const JobListRequest& req) {
  store::JobFilter f;
  f.limit = req.limit;
  if (!req.state.empty()) {
    for (const auto& name : SplitCommas(req.state)) {
      store::JobState s;
      if (!store::ParseJobState(name, &s))
        return Bad("state",
                   "unknown state '" + EscapeInvalidUtf8(name) +
                       "' (queued, running, succeeded, failed_retryable, failed_permanent, cancelled)");
      f.states.push_back(s);
    }
  }
  if (!req.priority.empty()) {
    for (const auto& name : SplitCommas(req.priority)) {
      store::JobPriority p;
      if (!store::ParseJobPriority(name, &p))
        return Bad("priority", "unknown priority '" + EscapeInvalidUtf8(name) + "' (high, normal, low)");
      f.priorities.push_back(p);
    }
  }
  if (!req.kind.empty()) {
    if (JobKinds().Find(req.kind) == nullptr) {
      std::string known;
      for (const auto& n : JobKinds().Names()) known += (known.empty() ? "" : ", ") + n;
      return Bad("kind", "unknown kind '" + EscapeInvalidUtf8(req.kind) + "' (" + known + ")");
    }
    f.kind = req.kind;
  }
  if (req.sort.empty() || req.sort == "created") {
    f.sort = store::JobSort::kCreated;
  } else if (req.sort == "priority") {
    f.sort = store::JobSort::kPriority;
  } else if (req.sort == "state") {
    f.sort = store::JobSort::kState;
  } else {
    return Bad("sort", "unknown sort '" + EscapeInvalidUtf8(req.sort) + "' (created, priority, state)");
  }
  if (req.order.empty()) {
    f.descending = f.sort != store::JobSort::kState;
  } else if (req.order == "asc" || req.order == "desc") {
    f.descending = req.order == "desc";
  } else {
    return Bad("order", "unknown order '" + EscapeInvalidUtf8(req.order) + "' (asc, desc)");
  }
  if (f.limit < 1) return Bad("limit", "limit must be at least 1");
  if (req.before < 0) return Bad("before", "before must be a job id (a positive number)");
  if (req.offset < 0) return Bad("offset", "offset must be >= 0, got " + std::to_string(req.offset));
  if (req.search.size() > kMaxJobNoteBytes)
    return Bad("search", "search text is " + std::to_string(req.search.size()) + " bytes; at most " +
                             std::to_string(kMaxJobNoteBytes));
  if (!IsValidUtf8(req.search)) return Bad("search", "search text must be UTF-8");
  f.search = req.search;
  f.after_id = req.before;
  f.offset = req.offset;
  return f;
}

Result<JobPage> ListJobPage(store::MetadataStore& meta, const JobListRequest& req) {
  KESTREL_ASSIGN_OR_RETURN(store::JobFilter f, JobListFilter(req));
  if (!req.dataset.empty()) {
    std::string name, ref;
    store::SplitDatasetRef(req.dataset, &name, &ref);
    if (req.dataset.find('@') == std::string::npos) {
      auto versions = meta.ListVersions(name);
      if (!versions.IsOk()) return versions.GetStatus();
      if (versions->empty())
        return Bad("dataset", "dataset '" + EscapeInvalidUtf8(name) + "' does not exist");
      f.dataset = name;
    } else {
      auto v = meta.GetVersion(name, ref);
      if (!v.IsOk()) {
        const Status& vs = v.GetStatus();
        if (vs.Code() == StatusCode::kNotFound || vs.Code() == StatusCode::kInvalidArgument)
          return Bad("dataset", "dataset=" + EscapeInvalidUtf8(req.dataset) + ": " + vs.Message());
        return vs;
      }
      f.dataset_version = v->version_id;
    }
  }
  JobPage page;
  page.sort = f.sort;
  page.descending = f.descending;
  const int64_t limit = f.limit;
  // One more than the page says whether another follows.
  f.limit = limit < std::numeric_limits<int64_t>::max() ? limit + 1 : limit;
  auto jobs = meta.ListJobs(f);
  if (!jobs.IsOk()) {
    const Status& js = jobs.GetStatus();
    if (js.Code() == StatusCode::kNotFound && js.Where().field == "before")
      return Status::InvalidArgument(js.Message(), {kRequestFile, 0, "before"});
    return js;
  }
  page.jobs = std::move(*jobs);
  const bool more = static_cast<int64_t>(page.jobs.size()) > limit;
  if (more) page.jobs.resize(static_cast<size_t>(limit));
  if (more && !page.jobs.empty()) page.next_cursor = page.jobs.back().id;
  if (more && req.before == 0) page.next_offset = req.offset + limit;
  KESTREL_ASSIGN_OR_RETURN(page.total, meta.CountJobs(f));
  KESTREL_ASSIGN_OR_RETURN(page.datasets, NameDatasets(meta, page.jobs));
  return page;
}

Result<std::vector<store::JobRecord>> ListJobs(store::MetadataStore& meta, const JobListRequest& req) {
  KESTREL_ASSIGN_OR_RETURN(JobPage page, ListJobPage(meta, req));
  return std::move(page.jobs);
}

json JobPageJson(const JobPage& page) {
  json arr = json::array();
  for (size_t i = 0; i < page.jobs.size(); ++i) {
    json v = JobJson(page.jobs[i], false);
    const bool named = i < page.datasets.size() && !page.datasets[i].name.empty();
    v["dataset"] = named ? json(page.datasets[i].name) : json(nullptr);
    v["version"] = named ? json("v" + std::to_string(page.datasets[i].seq)) : json(nullptr);
    arr.push_back(std::move(v));
  }
  return {{"ok", true},
          {"jobs", arr},
          {"total", page.total},
          {"next_cursor", page.next_cursor > 0 ? json(page.next_cursor) : json(nullptr)},
          {"next_offset", page.next_offset >= 0 ? json(page.next_offset) : json(nullptr)},
          {"sort", SortName(page.sort)},
          {"order", page.descending ? "desc" : "asc"}};
}

Result<JobDetail> ShowJob(store::MetadataStore& meta, int64_t job_id) {
  JobDetail d;
  KESTREL_ASSIGN_OR_RETURN(d.job, meta.GetJob(job_id));
  KESTREL_ASSIGN_OR_RETURN(d.attempts, meta.ListAttempts(job_id));
  for (const auto& a : d.attempts) {
    if (!a.fingerprint.empty() && d.environments.count(a.fingerprint) == 0)
      d.environments[a.fingerprint] = AttemptFingerprint(meta, a.fingerprint);
  }
  KESTREL_ASSIGN_OR_RETURN(auto names, NameDatasets(meta, {d.job}));
  if (!names.empty()) d.dataset = names[0];
  store::ModelFilter by_job;
  by_job.job_id = job_id;
  KESTREL_ASSIGN_OR_RETURN(auto models, meta.ListModels(by_job));
  if (!models.empty()) d.model = models[0];
  return d;
}

Result<store::JobRecord> CancelJob(store::MetadataStore& meta, int64_t job_id, int64_t now_ms) {
  return meta.CancelJob(job_id, now_ms);
}

Result<store::JobRecord> RetryJob(store::MetadataStore& meta, int64_t job_id, int64_t now_ms) {
  return meta.RetryJob(job_id, now_ms);
}

json JobJson(const store::JobRecord& j, bool detail) {
  json result = nullptr;
  if (!j.result_json.empty()) {
    auto r = json::parse(j.result_json, nullptr, false);
    if (!r.is_discarded()) result = r;
  }
  json v = {{"id", j.id},
            {"kind", JobKindText(j)},
            {"state", store::JobStateName(j.state)},
            {"attempt", j.attempt},
            {"priority", store::JobPriorityName(j.spec.priority)},
            {"retries_used", j.retries_used},
            {"infra_retries_used", j.infra_retries_used},
            {"max_retries", j.spec.retry.max_retries},
            {"last_reason", j.last_reason},
            {"created_ms", j.created_ms},
            {"updated_ms", j.updated_ms},
            {"finished_ms", j.finished_ms},
            {"not_before_ms", j.not_before_ms},
            {"lease_owner", j.lease_owner},
            {"lease_until_ms", j.lease_until_ms},
            {"device", j.spec.device_kind},
            {"gpu_mem", j.spec.device_memory_mb},
            {"dataset_version", j.spec.dataset_version},
            {"dedup_key", j.dedup_key},
            {"name", j.spec.name},
            {"tags", j.tags},
            {"note", j.note},
            {"result", result}};
  if (detail) {
    v["config"] = JobConfigJson(j);
    v["spec"] = ParsedOrText(j.spec.spec_json);  // the keys as typed ("clone with changes")
    v["wall_clock_limit_ms"] = j.spec.wall_clock_limit_ms;
  }
  return v;
}

json JobConfigJson(const store::JobRecord& job) {
  json config = ParsedOrText(job.spec.config_json);
  if (config.is_object()) config["min_map50"] = job.spec.min_map50;
  return config;
}

json AttemptJson(const store::AttemptRecord& a) {
  return {{"attempt", a.attempt},
          {"worker", a.worker},
          {"host", a.host},
          {"pid", a.pid},
          {"started_ms", a.started_ms},
          {"ended_ms", a.ended_ms},
          {"detected_ms", a.detected_ms},
          {"exit_code", a.exit_code},
          {"signal", a.signal},
          {"succeeded", a.succeeded},
          {"stage", store::FailureStageName(a.stage)},
          {"failure_class", store::FailureClassName(a.failure_class)},
          {"infra", a.infrastructure},
          {"reason", a.reason},
          {"message", a.message},
          {"fingerprint", a.fingerprint.empty() ? json(nullptr) : json(a.fingerprint)}};
}

json JobDetailJson(const JobDetail& d) {
  json attempts = json::array();
  for (const auto& a : d.attempts) attempts.push_back(AttemptJson(a));
  json environments = json::object();
  for (const auto& [hash, fields] : d.environments) environments[hash] = fields;
  json v = {{"job", JobJson(d.job, true)}, {"attempts", attempts}, {"environments", environments}};
  v["dataset"] = d.dataset.name.empty()
                     ? json(nullptr)
                     : json{{"name", d.dataset.name}, {"version", "v" + std::to_string(d.dataset.seq)}};
  json model = nullptr;
  if (d.model) {
    model = {{"id", d.model->id},
             {"name", d.model->name},
             {"version", "v" + std::to_string(d.model->seq)},
             {"map50", d.model->map50 ? json(*d.model->map50) : json(nullptr)},
             {"map50_95", d.model->map50_95 ? json(*d.model->map50_95) : json(nullptr)}};
  }
  v["model"] = model;
  return v;
}

Result<json> JobKindKeysJson(const std::string& kind, const JobKindTable& kinds) {
  const JobKindSpec* spec = kinds.Find(kind);
  if (spec == nullptr || !spec->keys)
    return Status::NotFound("no job kind '" + EscapeInvalidUtf8(kind) + "'", {kRequestFile, 0, "kind"});
  json keys = json::array();
  auto add = [&keys](const OptionInfo& o, bool job_key) {
    keys.push_back({{"key", o.key},
                    {"type", o.type},
                    {"range", o.range},
                    {"default", o.default_text},
                    {"help", o.help},
                    {"job_key", job_key}});
  };
  std::unique_ptr<JobKeySchema> schema = spec->keys();
  OptionSet command;
  schema->Bind(command);
  for (const auto& o : command.Describe()) {
    if (schema->Refused(o.key).empty()) add(o, false);
  }
  jobs::JobKeys job_keys;
  OptionSet job;
  job_keys.Bind(job);
  for (const auto& o : job.Describe()) add(o, true);
  return json{{"ok", true}, {"kind", spec->name}, {"keys", std::move(keys)}};
}

json SubmitResultJson(const SubmitResult& r) {
  return {{"ok", true}, {"job_id", r.job.id}, {"created", r.created}, {"dedup_key", r.job.dedup_key}};
}

}  // namespace kestrel::app
