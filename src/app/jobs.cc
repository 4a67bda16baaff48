#include "app/jobs.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>

#include "app/export_keys.h"
#include "app/val_keys.h"
#include "core/json.h"
#include "core/options.h"
#include "core/safetensors.h"
#include "core/utf8.h"
#include "model/pt_checkpoint.h"
#include "model/spec.h"
#include "train/train_config.h"

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

// What `kestrel val model=` and `kestrel export` need before they start: a
// readable weights file (safetensors, or a .pt checkpoint), checked without
// LibTorch.
Status CheckWeightsFile(const std::string& model) {
  Status h = model::FileLooksLikeZip(model) ? model::ReadWeightsInfo(model).GetStatus()
                                            : ReadSafeTensorsHeader(model).GetStatus();
  if (h.IsOk()) return h;
  const std::string why = h.Code() == StatusCode::kCorruption && !model::FileLooksLikeZip(model)
                              ? "not a safetensors weights file (" + h.Message() + ")"
                              : h.Message();
  return Bad("model", "model=" + EscapeInvalidUtf8(model) + ": " + why);
}

}  // namespace

Status RelocateRequestError(const Status& s, const std::string& file) {
  if (s.IsOk() || s.Where().file != kRequestFile) return s;
  return Status(s.Code(), s.Message(), {file, 0, s.Where().field}).WithReason(s.Reason());
}

namespace {

// An export job's model=: pinned to NAME@vN when it names a registered model
// (the child resolves that again and records the export on it), else the
// weights file made absolute; the file must be readable weights.
Status ResolveExportModel(ExportKeys& ek, JobDraft& d, const WeightsResolver& resolve_weights,
                          const ModelResolver& resolve_model) {
  std::string weights = ek.r.model;
  bool pinned = false;
  if (resolve_model) {
    KESTREL_ASSIGN_OR_RETURN(ResolvedWeights w, resolve_model(ek.r.model));
    weights = w.path;
    if (w.model) {
      ek.r.model = w.model->name + "@v" + std::to_string(w.model->seq);
      d.model_dataset_version = w.model->dataset_version;
      pinned = true;
    }
  } else if (resolve_weights) {
    KESTREL_RETURN_IF_ERROR(resolve_weights("model", &weights));
  }
  // A file (not a reference the child resolves): the resolved path, absolute, as val's model=.
  if (!pinned) ek.r.model = weights = std::filesystem::absolute(weights).string();
  return CheckWeightsFile(weights);
}

}  // namespace

Result<JobDraft> DraftJob(const std::vector<std::string>& tokens, const WeightsResolver& resolve_weights,
                          const ModelResolver& resolve_model) {
  jobs::JobKeys jk;
  OptionSet job_set;
  jk.Bind(job_set);
  // The kind decides which command keys exist, so it is read first; a bad
  // kind= is reported where it stands, like every other key.
  jobs::JobKind kind = jobs::JobKind::kTrain;
  for (const auto& token : tokens) {
    std::string k, v;
    if (FirstInvalidUtf8(token) == std::string::npos && SplitKeyValue(token, &k, &v) &&
        k == jobs::kJobKindKey) {
      if (!jobs::ParseJobKind(v, &kind)) kind = jobs::JobKind::kTrain;
    }
  }
  train::TrainConfig cfg;
  ValKeys vk;
  ExportKeys ek;
  OptionSet set;
  if (kind == jobs::JobKind::kTrain) {
    cfg.Bind(set);
  } else if (kind == jobs::JobKind::kVal) {
    vk.Bind(set);
  } else {
    ek.Bind(set);
  }
  JobDraft d;
  d.kind = kind;
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
    } else if (kind == jobs::JobKind::kTrain && jobs::IsJobOwnedTrainKey(k)) {
      s = Bad(k,
              "'" + k +
                  "' is decided by the job system (each attempt runs in $KESTREL_HOME/jobs/<id>/attempt-<n> "
                  "and resumes from the previous attempt's checkpoint)");
    } else if (kind == jobs::JobKind::kVal && IsJobOwnedValKey(k)) {
      s = Bad(k, "'" + k +
                     "' is not a val job key (a val job runs model= on data=, in "
                     "$KESTREL_HOME/jobs/<id>/attempt-<n>)");
    } else if (kind == jobs::JobKind::kExport && k == "output") {
      s = Bad(k,
              "'output' is decided by the job system (an export job writes $KESTREL_HOME/jobs/<id>/"
              "<model>.onnx)");
    } else {
      s = set.Set(k, v, {kRequestFile, 0, ""});
    }
    KESTREL_RETURN_IF_ERROR(InRequest(s));
  }
  KESTREL_RETURN_IF_ERROR(InRequest(jk.Validate()));
  jk.ApplyTo(&d.spec);
  if (kind == jobs::JobKind::kTrain) {
    cfg.device = jk.TrainerDevice();
    const std::string typed_pretrained = cfg.pretrained;
    // pretrained= may name a registered model: the job stores its blob's path.
    if (resolve_weights && !cfg.pretrained.empty())
      KESTREL_RETURN_IF_ERROR(resolve_weights("pretrained", &cfg.pretrained));
    if (!cfg.pretrained.empty()) cfg.pretrained = std::filesystem::absolute(cfg.pretrained).string();
    // model=yolov8n.pt names a weights file too (a scale or yaml names none).
    if (model::IsWeightsPath(cfg.model)) {
      const bool same = cfg.model == typed_pretrained;
      if (resolve_weights) KESTREL_RETURN_IF_ERROR(resolve_weights("model", &cfg.model));
      cfg.model = std::filesystem::absolute(cfg.model).string();
      if (same) cfg.pretrained = cfg.model;  // model=X pretrained=X: one file, as Validate allows
    }
    // What `kestrel train` checks before it starts, with the same messages.
    KESTREL_RETURN_IF_ERROR(InRequest(cfg.Validate()));
    KESTREL_RETURN_IF_ERROR(InRequest(cfg.ValidateFiles()));
    d.data = cfg.data;
    d.config = set.ToJson();
  } else if (kind == jobs::JobKind::kExport) {
    if (jk.device != "cpu") return Bad("device", "an export job runs on the CPU (device=cpu)");
    if (jk.min_map50 != 0) {
      return Bad("min_map50",
                 "an export job is judged by its verification against LibTorch, not by a min_map50");
    }
    // What `kestrel export` checks before it opens the weights, with its messages.
    KESTREL_RETURN_IF_ERROR(InRequest(ek.Request().GetStatus()));
    KESTREL_RETURN_IF_ERROR(ResolveExportModel(ek, d, resolve_weights, resolve_model));
    {
      // int8=true without data= calibrates on the registered model's dataset version.
      ExportRequest pinned = ek.r;
      pinned.model_data = d.model_dataset_version;
      KESTREL_RETURN_IF_ERROR(InRequest(CheckExportCalibrationData(pinned)));
    }
    d.config = set.ToJson();
    d.config[jobs::kJobKindKey] = jobs::JobKindName(kind);
    // data= (optional: int8 calibration, the mAP check) resolves like any job's.
    d.data = d.config.value("data", std::string());
  } else {
    if (jk.device != "cpu") return Bad("device", "a val job runs on the CPU (device=cpu)");
    if (vk.data.empty()) return Bad("data", "data=NAME[@VERSION] is required");
    if (vk.model.empty()) return Bad("model", "model=WEIGHTS is required (the weights the val job scores)");
    if (resolve_weights) KESTREL_RETURN_IF_ERROR(resolve_weights("model", &vk.model));
    vk.model = std::filesystem::absolute(vk.model).string();
    KESTREL_RETURN_IF_ERROR(InRequest(CheckBoundValues(vk)));
    KESTREL_RETURN_IF_ERROR(CheckWeightsFile(vk.model));
    d.data = vk.data;
    d.config = set.ToJson();
    d.config[jobs::kJobKindKey] = jobs::JobKindName(kind);
  }
  d.data_as_given = d.data;
  return d;
}

Result<SubmitResult> SubmitJob(store::MetadataStore& meta, JobDraft draft, int64_t now_ms) {
  SubmitResult r;
  if (draft.kind == jobs::JobKind::kExport && draft.data.empty()) {
    // No dataset of its own: filed under the model's (its config has no data=).
    store::JobSpec spec = draft.spec;
    spec.dataset_version = r.version_id = draft.model_dataset_version;
    spec.config_json = DumpJson(draft.config);
    spec.spec_json = DumpJson(draft.typed);
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
  KESTREL_ASSIGN_OR_RETURN(r.job, meta.SubmitJob(spec, now_ms, &r.created));
  return r;
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
    jobs::JobKind k;
    if (!jobs::ParseJobKind(req.kind, &k))
      return Bad("kind", "unknown kind '" + EscapeInvalidUtf8(req.kind) + "' (train, val, export)");
    f.kind = jobs::JobKindName(k);
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
  return {{"jobs", arr},
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
  return d;
}

Result<store::JobRecord> CancelJob(store::MetadataStore& meta, int64_t job_id, int64_t now_ms) {
  return meta.CancelJob(job_id, now_ms);
}

Result<store::JobRecord> RetryJob(store::MetadataStore& meta, int64_t job_id, int64_t now_ms) {
  return meta.RetryJob(job_id, now_ms);
}

std::string JobKindText(const store::JobRecord& job) {
  auto cfg = json::parse(job.spec.config_json, nullptr, false);
  if (!cfg.is_object() || !cfg.contains(jobs::kJobKindKey)) return jobs::JobKindName(jobs::JobKind::kTrain);
  const json& k = cfg[jobs::kJobKindKey];
  return k.is_string() ? k.get<std::string>() : k.dump();
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
            {"result", result}};
  if (detail) {
    v["config"] = JobConfigJson(j);
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
          {"message", a.message}};
}

json JobDetailJson(const JobDetail& d) {
  json attempts = json::array();
  for (const auto& a : d.attempts) attempts.push_back(AttemptJson(a));
  return {{"job", JobJson(d.job, true)}, {"attempts", attempts}};
}

json SubmitResultJson(const SubmitResult& r) {
  return {{"ok", true}, {"job_id", r.job.id}, {"created", r.created}, {"dedup_key", r.job.dedup_key}};
}

}  // namespace kestrel::app
