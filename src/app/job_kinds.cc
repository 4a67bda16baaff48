#include "app/job_kinds.h"

#include <filesystem>
#include <utility>

#include "core/failure_of.h"
#include "core/json.h"
#include "core/utf8.h"

namespace kestrel::app {

using nlohmann::json;

// ---- AttemptResult

json AttemptResult::ToJson() const {
  json j = details.is_object() ? details : json::object();
  auto text = [&j](const char* key, const std::string& v) {
    if (!v.empty()) j[key] = v;
  };
  text("kind", kind);
  if (attempt > 0) j["attempt"] = attempt;
  text("run_dir", run_dir);
  text("model", model);
  text("best", best);
  text("last", last);
  text("checkpoint", checkpoint);
  if (validated) j["validated"] = *validated;
  text("not_validated", not_validated);
  if (map50) j["map50"] = *map50;
  if (map50_95) j["map50_95"] = *map50_95;
  text("path", path);
  if (verified) j["verified"] = *verified;
  return j;
}

Result<AttemptResult> AttemptResult::FromJson(const json& j) {
  if (!j.is_object()) return Status::InvalidArgument("the result is not a JSON object", {"", 0, "result"});
  AttemptResult r;
  auto wrong = [](const std::string& key, const char* type) {
    return Status::InvalidArgument("the result's " + key + " is not " + type, {"", 0, key});
  };
  for (const auto& [key, v] : j.items()) {
    std::string* text = key == "kind"            ? &r.kind
                        : key == "run_dir"       ? &r.run_dir
                        : key == "model"         ? &r.model
                        : key == "best"          ? &r.best
                        : key == "last"          ? &r.last
                        : key == "checkpoint"    ? &r.checkpoint
                        : key == "not_validated" ? &r.not_validated
                        : key == "path"          ? &r.path
                                                 : nullptr;
    if (text != nullptr) {
      // An empty string would not come back from ToJson: kept as a detail.
      if (!v.is_string()) return wrong(key, "a string");
      if (v.get<std::string>().empty()) {
        r.details[key] = v;
      } else {
        *text = v.get<std::string>();
      }
    } else if (key == "attempt") {
      if (!v.is_number_integer()) return wrong(key, "an integer");
      if (v.get<int64_t>() > 0) {
        r.attempt = v.get<int64_t>();
      } else {
        r.details[key] = v;
      }
    } else if (key == "validated" || key == "verified") {
      if (!v.is_boolean()) return wrong(key, "true or false");
      (key == "validated" ? r.validated : r.verified) = v.get<bool>();
    } else if (key == "map50" || key == "map50_95") {
      if (!v.is_number()) return wrong(key, "a number");
      (key == "map50" ? r.map50 : r.map50_95) = v.get<double>();
    } else {
      r.details[key] = v;
    }
  }
  return r;
}

Result<AttemptResult> AttemptResult::Parse(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return Status::InvalidArgument("the result line is not a JSON object", {"", 0, "result"});
  return FromJson(j);
}

// ---- AttemptContext

void AttemptContext::Progress(const std::string& line) const {
  if (io != nullptr && io->progress) io->progress(line);
}

std::ostream& AttemptContext::Out() const { return io != nullptr && io->out != nullptr ? *io->out : sink_; }

std::string AttemptContext::JobDir() const {
  return JoinPath(JoinPath(home, "jobs"), std::to_string(job_id));
}

std::string AttemptContext::AttemptDir() const {
  return JoinPath(JobDir(), "attempt-" + std::to_string(attempt));
}

Status AttemptContext::ApplyConfig(OptionSet& set) const {
  auto cfg = json::parse(job.spec.config_json, nullptr, false);
  if (!cfg.is_object()) {
    return Status::InvalidArgument("stored config is not a JSON object")
        .WithReason(FailureReason::kBadConfig);
  }
  cfg.erase(jobs::kJobKindKey);  // the job's own key; the rest are the kind's
  Status s = set.ApplyJson(cfg, "job " + std::to_string(job_id) + " config");
  return s.IsOk() ? s : s.WithReason(FailureReason::kBadConfig);
}

nlohmann::json AttemptOutcomeJson(int64_t job_id, int64_t attempt, const AttemptOutcome& o) {
  if (o.failure == FailureReason::kNone)
    return {{"ok", true}, {"job_id", job_id}, {"result", o.result.ToJson()}};
  const auto& w = o.error.Where();
  return {{"ok", false},
          {"job_id", job_id},
          {"attempt", attempt},
          {"reason", FailureReasonToken(o.failure)},
          {"error",
           {{"code", o.exit_code == kTrainExitBadConfig ? "usage" : StatusCodeName(o.error.Code())},
            {"message", o.error.Message()},
            {"file", w.file},
            {"line", w.line},
            {"field", w.field}}}};
}

// ---- JobKindTable

namespace {
bool IsKindName(std::string_view n) {
  if (n.empty() || n.size() > 32) return false;
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  return true;
}
}  // namespace

Status JobKindTable::Add(JobKindSpec spec) {
  if (!IsKindName(spec.name))
    return Status::InvalidArgument(
        "job kind name '" + EscapeForDisplayCut(spec.name) + "' is not 1-32 of a-z, 0-9, _ and -",
        {"", 0, "kind"});
  if (Find(spec.name) != nullptr)
    return Status::InvalidArgument("job kind '" + spec.name + "' is already in the table", {"", 0, "kind"});
  if (!spec.keys)
    return Status::InvalidArgument("job kind '" + spec.name + "' has no key schema", {"", 0, "kind"});
  kinds_.push_back(std::make_unique<JobKindSpec>(std::move(spec)));
  return {};
}

Status JobKindTable::SetRunner(std::string_view name, AttemptRunner run) {
  for (auto& k : kinds_) {
    if (k->name == name) {
      k->run = std::move(run);
      return {};
    }
  }
  return Status::NotFound("no job kind '" + std::string(name) + "' in the table", {"", 0, "kind"});
}

const JobKindSpec* JobKindTable::Find(std::string_view name) const {
  for (const auto& k : kinds_) {
    if (k->name == name) return k.get();
  }
  return nullptr;
}

std::vector<std::string> JobKindTable::Names() const {
  std::vector<std::string> out;
  for (const auto& k : kinds_) out.push_back(k->name);
  return out;
}

Result<const JobKindSpec*> JobKindTable::KindOf(const store::JobRecord& job) const {
  const std::string text = JobKindText(job);
  if (const JobKindSpec* k = Find(text)) return k;
  std::string known;
  for (const auto& n : Names()) known += (known.empty() ? "" : ", ") + n;
  return Status::InvalidArgument("job " + std::to_string(job.id) + " has kind '" + EscapeForDisplayCut(text) +
                                     "', which this kestrel does not run (it knows " + known + ")",
                                 {"", 0, jobs::kJobKindKey});
}

JobKindTable& JobKinds() {
  static JobKindTable table = BuiltinJobKinds();
  return table;
}

std::string JobKindText(const store::JobRecord& job) {
  auto cfg = json::parse(job.spec.config_json, nullptr, false);
  if (!cfg.is_object() || !cfg.contains(jobs::kJobKindKey)) return JobKindTable::kDefaultKind;
  const json& k = cfg[jobs::kJobKindKey];
  return k.is_string() ? k.get<std::string>() : k.dump();
}

// ---- Readers

AttemptOutcome RunAttempt(const JobKindTable& kinds, std::string_view kind, const std::string& home_arg,
                          int64_t job_id, int64_t attempt, const AttemptIo& io) {
  AttemptContext ctx;
  ctx.job_id = job_id;
  ctx.attempt = attempt;
  ctx.io = &io;
  auto fail = [&](FailureReason failure, const Status& why) {
    ctx.Progress(std::string("reason=") + FailureReasonToken(failure));
    AttemptOutcome o;
    o.exit_code = ExitCodeFor(failure);
    o.failure = failure;
    o.error = why;
    return o;
  };
  ctx.Progress("stage=data job=" + std::to_string(job_id) + " attempt=" + std::to_string(attempt));
  const JobKindSpec* spec = kinds.Find(kind);
  if (spec == nullptr || !spec->run) {
    return fail(FailureReason::kBadConfig,
                Status::InvalidArgument("this program runs no '" + std::string(kind) + "' job attempts",
                                        {"", 0, jobs::kJobKindKey}));
  }
  ctx.home = std::filesystem::absolute(home_arg).lexically_normal().string();
  auto meta = store::MetadataStore::Open(store::MetadataUrl(ctx.home));
  if (!meta.IsOk()) return fail(FailureReason::kStoreUnavailable, meta.GetStatus());
  ctx.meta = std::move(meta).Value();
  auto job = ctx.meta->GetJob(job_id);
  if (!job.IsOk()) {
    return fail(job.GetStatus().Code() == StatusCode::kNotFound ? FailureReason::kBadConfig
                                                                : FailureReason::kStoreUnavailable,
                job.GetStatus());
  }
  if (job->attempt != attempt || job->state != store::JobState::kRunning) {
    return fail(FailureReason::kLeaseLost,
                Status::Aborted("attempt " + std::to_string(attempt) + " is not current (job is " +
                                store::JobStateName(job->state) + " at attempt " +
                                std::to_string(job->attempt) + ")"));
  }
  ctx.job = std::move(job).Value();
  auto of = kinds.KindOf(ctx.job);
  if (!of.IsOk()) return fail(FailureReason::kBadConfig, of.GetStatus());
  if ((*of)->name != kind) {
    const std::string& n = (*of)->name;
    return fail(FailureReason::kBadConfig,
                Status::InvalidArgument("job " + std::to_string(job_id) + " is a " + n + " job, not a " +
                                            std::string(kind) + " job (`kestrel " + n + " --job` runs it)",
                                        {"", 0, jobs::kJobKindKey}));
  }
  auto r = spec->run(ctx);
  if (!r.IsOk()) return fail(FailureReasonOf(r.GetStatus()), r.GetStatus());
  AttemptOutcome o;
  o.result = std::move(r).Value();
  o.result.kind = spec->name;
  o.result.attempt = attempt;
  ctx.Progress("result " + DumpJson(o.result.ToJson()));
  return o;
}

jobs::AttemptKinds WorkerKinds(const JobKindTable& kinds, Env& env) {
  jobs::AttemptKinds w;
  w.command = [&kinds](const store::JobRecord& job) -> Result<std::string> {
    KESTREL_ASSIGN_OR_RETURN(const JobKindSpec* k, kinds.KindOf(job));
    return k->name;
  };
  w.gate = [&kinds, &env](const store::JobRecord& job, const std::string& result_json) -> Status {
    KESTREL_ASSIGN_OR_RETURN(const JobKindSpec* k, kinds.KindOf(job));
    if (result_json.empty()) return Status::FailedPrecondition("the child exited 0 without a result line");
    auto r = AttemptResult::Parse(result_json);
    if (!r.IsOk()) return Status::FailedPrecondition(r.GetStatus().Message());
    return k->gate ? k->gate(*r, job, env) : Status();
  };
  return w;
}

Result<std::string> RegisterSucceededJob(const JobKindTable& kinds, store::MetadataStore& meta,
                                         const std::string& home, const store::JobRecord& job,
                                         int64_t now_ms) {
  KESTREL_ASSIGN_OR_RETURN(const JobKindSpec* k, kinds.KindOf(job));
  if (!k->on_succeeded) return std::string();
  KESTREL_ASSIGN_OR_RETURN(AttemptResult result, AttemptResult::Parse(job.result_json));
  return k->on_succeeded(SucceededJob{meta, home, job, result, now_ms});
}

json JobKindsJson(const JobKindTable& kinds) {
  json k = json::array();
  for (const auto& spec : kinds.Kinds()) {
    k.push_back({{"name", spec->name},
                 {"summary", spec->summary},
                 {"default", spec->name == JobKindTable::kDefaultKind}});
  }
  json states = json::array();
  for (store::JobState s :
       {store::JobState::kQueued, store::JobState::kRunning, store::JobState::kSucceeded,
        store::JobState::kFailedRetryable, store::JobState::kFailedPermanent, store::JobState::kCancelled}) {
    json actions = json::array();
    // CancelJob takes a live job; RetryJob a failed or cancelled one (store/job_store.cc).
    if (store::IsLive(s)) actions.push_back("cancel");
    if (s == store::JobState::kFailedRetryable || s == store::JobState::kFailedPermanent ||
        s == store::JobState::kCancelled)
      actions.push_back("retry");
    states.push_back({{"name", store::JobStateName(s)},
                      {"live", store::IsLive(s)},
                      {"finished", !store::IsLive(s)},
                      {"actions", std::move(actions)}});
  }
  return {{"kinds", std::move(k)}, {"states", std::move(states)}};
}

}  // namespace kestrel::app
