#include "app/templates.h"

#include <algorithm>
#include <limits>
#include <set>

#include "app/jobs.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/names.h"
#include "core/options.h"
#include "core/parse.h"
#include "core/utf8.h"
#include "jobs/job_keys.h"
#include "train/train_config.h"

namespace kestrel::app {
namespace {

constexpr const char* kJobPrefix = "job:";
constexpr const char* kTemplateKey = "template";
// The job keys a job keeps in its spec rather than its config
// (jobs::JobKeys::ApplyTo), in both sides of an effective config.
constexpr const char* kSpecJobKeys[] = {"priority",   "max_retries", "backoff",
                                        "time_limit", "gpu_mem",     "min_map50"};

Status Usage(const std::string& field, const std::string& msg) {
  return Status::InvalidArgument(msg, {kRequestFile, 0, field});
}

// The two bindings of a submit, applied in submit's order: job keys first,
// the keys the job system owns refused, the rest train keys.
struct SubmitBinding {
  train::TrainConfig cfg;
  OptionSet train_set;
  jobs::JobKeys jk;
  OptionSet job_set;

  SubmitBinding() {
    cfg.Bind(train_set);
    jk.Bind(job_set);
  }
  SubmitBinding(const SubmitBinding&) = delete;
  SubmitBinding& operator=(const SubmitBinding&) = delete;

  Status Set(const std::string& k, const std::string& v) {
    if (job_set.Has(k)) return job_set.Set(k, v, {kRequestFile, 0, ""});
    if (jobs::IsJobOwnedTrainKey(k)) {
      return Usage(
          k, "'" + k +
                 "' is decided by the job system (each attempt runs in $KESTREL_HOME/jobs/<id>/attempt-<n> "
                 "and resumes from the previous attempt's checkpoint)");
    }
    return train_set.Set(k, v, {kRequestFile, 0, ""});
  }

  // JobKeys::Validate, then TrainConfig::Validate with the trainer's device,
  // as submit runs them; a template may leave data= to the submit.
  Status Validate() {
    if (Status s = jk.Validate(); !s.IsOk()) return Usage(s.Where().field, s.Message());
    cfg.device = jk.TrainerDevice();
    train::TrainConfig check = cfg;
    if (check.data.empty()) check.data = "template";
    if (Status s = check.Validate(); !s.IsOk()) return Usage(s.Where().field, s.Message());
    return {};
  }
};

Result<TemplateKeys> KeysOf(const store::TemplateRecord& t) {
  auto j = nlohmann::json::parse(t.keys_json, nullptr, false);
  const Status bad = Status::Corruption(
      "template " + TemplateRef(t) + ": stored keys are not a JSON object of strings", {"", 0, "keys_json"});
  if (!j.is_object()) return bad;
  TemplateKeys keys;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!it.value().is_string()) return bad;
    keys[it.key()] = it.value().get<std::string>();
  }
  return keys;
}

}  // namespace

Result<TemplateKeys> ValidateSubmitKeys(const std::vector<std::string>& args) {
  SubmitBinding b;
  TemplateKeys keys;
  for (const auto& token : args) {
    std::string k, v;
    // Stored as JSON: every key and value must be UTF-8 text.
    if (const size_t bad = FirstInvalidUtf8(token); bad != std::string::npos) {
      const std::string shown = EscapeInvalidUtf8(token);
      return Usage(SplitKeyValue(shown, &k, &v) ? k : "",
                   "argument '" + shown + "' is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    }
    if (!SplitKeyValue(token, &k, &v)) {
      return Usage("", "unexpected argument '" + token + "' (a template takes key=value)");
    }
    Status s = b.Set(k, v);
    if (!s.IsOk()) return s;
    // The template's keys are checked as a training job's; other kinds
    // have other keys (app::DraftJob) and no templates yet.
    if (k == jobs::kJobKindKey && v != JobKindTable::kDefaultKind) {
      return Usage(k, "templates hold training jobs' keys (kind=train); kind=" + v + " is not supported");
    }
    keys[k] = v;
  }
  KESTREL_RETURN_IF_ERROR(b.Validate());
  return keys;
}

Result<nlohmann::json> EffectiveConfigOfKeys(const TemplateKeys& keys) {
  SubmitBinding b;
  for (const auto& [k, v] : keys) KESTREL_RETURN_IF_ERROR(b.Set(k, v));
  KESTREL_RETURN_IF_ERROR(b.Validate());
  // What submit stores as the job's config...
  nlohmann::json config = b.train_set.ToJson();
  // ...and the job keys that become the job's spec (EffectiveConfigOfJob
  // reads the same ones back; device is in the config as the trainer's).
  const nlohmann::json job = b.job_set.ToJson();
  for (const char* k : kSpecJobKeys) {
    if (job.contains(k)) config[k] = job[k];
  }
  return config;
}

Result<nlohmann::json> EffectiveConfigOfJob(const store::JobRecord& job) {
  nlohmann::json config = JobConfigJson(job);  // with min_map50
  if (!config.is_object()) {
    return Status::Corruption("job " + std::to_string(job.id) + ": stored config is not a JSON object",
                              {"", 0, "config_json"});
  }
  // The job keys' names (jobs::JobKeys::Bind) and units (seconds, MB).
  config["priority"] = store::JobPriorityName(job.spec.priority);
  config["max_retries"] = job.spec.retry.max_retries;
  nlohmann::json backoff = nlohmann::json::array();
  for (int64_t ms : job.spec.retry.backoff_ms) backoff.push_back(static_cast<double>(ms) / 1000.0);
  config["backoff"] = backoff;
  config["time_limit"] = static_cast<double>(job.spec.wall_clock_limit_ms) / 1000.0;
  config["gpu_mem"] = job.spec.device_memory_mb;
  return config;
}

Result<std::vector<std::string>> ExpandTemplate(const store::TemplateRecord& tpl,
                                                const std::vector<std::string>& overrides) {
  KESTREL_ASSIGN_OR_RETURN(TemplateKeys keys, KeysOf(tpl));
  std::set<std::string> overridden;
  for (const auto& token : overrides) {
    std::string k, v;
    if (!SplitKeyValue(token, &k, &v)) continue;  // submit reports it
    if (k == kTemplateKey) return Usage(kTemplateKey, "template= may be given once");
    overridden.insert(k);
  }
  std::vector<std::string> out;
  out.reserve(keys.size() + overrides.size());
  for (const auto& [k, v] : keys) {
    if (overridden.count(k) == 0) out.push_back(k + "=" + v);
  }
  out.insert(out.end(), overrides.begin(), overrides.end());
  return out;
}

ConfigDiff DiffConfigJson(const std::string& a_label, const nlohmann::json& a, const std::string& b_label,
                          const nlohmann::json& b) {
  ConfigDiff d;
  d.a = a_label;
  d.b = b_label;
  std::set<std::string> keys;
  for (const auto* side : {&a, &b}) {
    if (!side->is_object()) continue;
    for (auto it = side->begin(); it != side->end(); ++it) keys.insert(it.key());
  }
  auto value = [](const nlohmann::json& side, const std::string& k) -> nlohmann::json {
    if (!side.is_object()) return nullptr;
    auto it = side.find(k);
    return it == side.end() ? nlohmann::json(nullptr) : *it;
  };
  for (const auto& k : keys) {
    nlohmann::json va = value(a, k), vb = value(b, k);
    if (va == vb) {
      ++d.same;
    } else {
      d.differences.push_back({k, std::move(va), std::move(vb)});
    }
  }
  return d;
}

std::string TemplateRef(const store::TemplateRecord& t) { return t.name + "@v" + std::to_string(t.seq); }

Result<TemplateSaveResult> TemplateLibrary::Save(const std::string& name,
                                                 const std::vector<std::string>& args, int64_t now_ms) {
  KESTREL_RETURN_IF_ERROR(CheckName(NameKind::kTemplate, name, {kRequestFile, 0, "name"}));
  if (args.empty()) return Usage("", "a template needs at least one key=value");
  KESTREL_ASSIGN_OR_RETURN(TemplateKeys keys, ValidateSubmitKeys(args));
  store::TemplateRecord rec;
  rec.name = name;
  rec.created_ms = now_ms;
  rec.keys_json = DumpJson(nlohmann::json(keys));
  rec.content_sha = Sha256Hex(rec.keys_json);
  TemplateSaveResult out;
  KESTREL_ASSIGN_OR_RETURN(out.tpl, meta_.AddTemplate(rec, &out.created));
  return out;
}

Result<store::TemplateRecord> TemplateLibrary::Resolve(const std::string& ref) {
  const size_t at = ref.find('@');
  const std::string name = ref.substr(0, at);
  const ErrorLocation where{kRequestFile, 0, kTemplateKey};
  if (Status s = CheckName(NameKind::kTemplate, name, where); !s.IsOk()) {
    return Status::InvalidArgument(
        "invalid template reference '" + EscapeForDisplayCut(ref) + "' (NAME or NAME@vN): " + s.Message(),
        where);
  }
  store::TemplateFilter f;
  f.name = name;
  if (at != std::string::npos) {
    const std::string version = ref.substr(at + 1);
    auto seq = version.size() > 1 && version[0] == 'v'
                   ? ParseInt64(std::string_view(version).substr(1), where, 1,
                                std::numeric_limits<int64_t>::max(), "a version number")
                   : Result<int64_t>(Status::InvalidArgument("", where));
    if (!seq.IsOk()) {
      return Status::InvalidArgument("invalid template version '" + EscapeInvalidUtf8(version) + "' in '" +
                                         EscapeInvalidUtf8(ref) + "' (NAME or NAME@vN)",
                                     where);
    }
    f.seq = *seq;
  }
  KESTREL_ASSIGN_OR_RETURN(auto found, meta_.ListTemplates(f));
  if (found.empty()) {
    return Status::NotFound(f.seq > 0 ? "no template " + ref : "no template named '" + name + "'", where);
  }
  return found.back();
}

Result<std::vector<store::TemplateRecord>> TemplateLibrary::List(const std::string& name) {
  if (!name.empty()) KESTREL_RETURN_IF_ERROR(CheckName(NameKind::kTemplate, name, {kRequestFile, 0, "name"}));
  store::TemplateFilter f;
  f.name = name;
  KESTREL_ASSIGN_OR_RETURN(auto all, meta_.ListTemplates(f));
  if (!name.empty()) {
    if (all.empty()) return Status::NotFound("no template named '" + name + "'", {kRequestFile, 0, "name"});
    return all;
  }
  // Newest version per name (rows come ordered by name, then version).
  std::vector<store::TemplateRecord> newest;
  for (auto& t : all) {
    if (!newest.empty() && newest.back().name == t.name) {
      newest.back() = std::move(t);
    } else {
      newest.push_back(std::move(t));
    }
  }
  return newest;
}

Result<std::vector<std::string>> TemplateLibrary::ExpandArgs(const std::vector<std::string>& args) {
  std::string ref;
  bool found = false;
  std::vector<std::string> rest;
  for (const auto& token : args) {
    std::string k, v;
    if (SplitKeyValue(token, &k, &v) && k == kTemplateKey) {
      if (found) return Usage(kTemplateKey, "template= may be given once");
      if (v.empty()) return Usage(kTemplateKey, "template= needs NAME or NAME@vN");
      found = true;
      ref = v;
    } else {
      rest.push_back(token);
    }
  }
  if (!found) return args;
  KESTREL_ASSIGN_OR_RETURN(auto tpl, Resolve(ref));
  return ExpandTemplate(tpl, rest);
}

Result<nlohmann::json> TemplateLibrary::EffectiveConfig(const std::string& side, std::string* label) {
  if (side.rfind(kJobPrefix, 0) == 0) {
    KESTREL_ASSIGN_OR_RETURN(int64_t id,
                             ParseInt64(std::string_view(side).substr(4), {kRequestFile, 0, "job"}, 1,
                                        std::numeric_limits<int64_t>::max(), "a job id (a positive number)"));
    KESTREL_ASSIGN_OR_RETURN(auto job, meta_.GetJob(id));
    *label = kJobPrefix + std::to_string(job.id);
    return EffectiveConfigOfJob(job);
  }
  KESTREL_ASSIGN_OR_RETURN(auto tpl, Resolve(side));
  *label = TemplateRef(tpl);
  KESTREL_ASSIGN_OR_RETURN(TemplateKeys keys, KeysOf(tpl));
  return EffectiveConfigOfKeys(keys);
}

Result<ConfigDiff> TemplateLibrary::Diff(const std::string& a, const std::string& b) {
  std::string la, lb;
  KESTREL_ASSIGN_OR_RETURN(auto ca, EffectiveConfig(a, &la));
  KESTREL_ASSIGN_OR_RETURN(auto cb, EffectiveConfig(b, &lb));
  return DiffConfigJson(la, ca, lb, cb);
}

nlohmann::json TemplateListJson(const std::vector<store::TemplateRecord>& templates) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& t : templates) rows.push_back(TemplateJson(t, false));
  return {{"ok", true}, {"templates", std::move(rows)}};
}

nlohmann::json TemplateJson(const store::TemplateRecord& t, bool effective) {
  auto keys = nlohmann::json::parse(t.keys_json, nullptr, false);
  nlohmann::json j = {{"name", t.name},
                      {"version", "v" + std::to_string(t.seq)},
                      {"ref", TemplateRef(t)},
                      {"created_ms", t.created_ms},
                      {"content_sha", t.content_sha},
                      {"keys", keys.is_discarded() ? nlohmann::json(nullptr) : keys}};
  if (effective) {
    auto k = KeysOf(t);
    auto e = k.IsOk() ? EffectiveConfigOfKeys(*k) : Result<nlohmann::json>(k.GetStatus());
    j["effective"] = e.IsOk() ? *e : nlohmann::json(nullptr);
  }
  return j;
}

nlohmann::json TemplateSaveJson(const TemplateSaveResult& r) {
  return {{"created", r.created}, {"template", TemplateJson(r.tpl, false)}};
}

nlohmann::json ConfigDiffJson(const ConfigDiff& d) {
  nlohmann::json diffs = nlohmann::json::array();
  for (const auto& x : d.differences) diffs.push_back({{"key", x.key}, {"a", x.a}, {"b", x.b}});
  return {{"a", d.a}, {"b", d.b}, {"same", d.same}, {"differences", diffs}};
}

}  // namespace kestrel::app
