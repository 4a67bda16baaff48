#include "app/system.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <limits>

#include "app/jobs.h"
#include "jobs/usage_sampler.h"

namespace kestrel::app {
namespace {

using nlohmann::json;

// PID of a default worker id "HOST:PID"; 0 for any other id.
int64_t PidOfId(const std::string& id, const std::string& host) {
  const std::string prefix = host + ":";
  if (id.size() <= prefix.size() || id.compare(0, prefix.size(), prefix) != 0) return 0;
  const std::string digits = id.substr(prefix.size());
  if (digits.size() > 10) return 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return 0;
  }
  return std::strtoll(digits.c_str(), nullptr, 10);
}

int StateRank(const std::string& state) { return state == "stale" ? 1 : state == "stopped" ? 2 : 0; }

// The shared reset time; 0 when none was recorded (or it does not parse:
// RefreshBreaker ignores such a value too).
Result<int64_t> StoredResetMs(store::MetadataStore& meta) {
  auto setting = meta.GetSetting(jobs::kBreakerResetSetting);
  if (!setting.IsOk()) {
    if (setting.GetStatus().Code() == StatusCode::kNotFound) return int64_t{0};
    return setting.GetStatus();
  }
  char* end = nullptr;
  const long long at = std::strtoll(setting->c_str(), &end, 10);
  return end != setting->c_str() && at > 0 ? static_cast<int64_t>(at) : int64_t{0};
}

// When the breaker took its current state `open`: replays the state after
// each event (an attempt's end, the reset) of `recent` (newest first) from
// the newest back, and returns the time of the newest event before which
// the state differed. 0 when none is found among the events whose window
// `recent` covers whole (`complete`: recent is the store's whole history).
int64_t SinceMs(const std::vector<store::AttemptRecord>& recent, bool complete, int64_t reset_ms,
                const jobs::BreakerOptions& options, bool open) {
  std::vector<int64_t> times;
  times.reserve(recent.size() + 1);
  for (const auto& a : recent) times.push_back(a.ended_ms);
  if (reset_ms > 0) times.push_back(reset_ms);
  std::sort(times.begin(), times.end(), std::greater<>());
  times.erase(std::unique(times.begin(), times.end()), times.end());
  // The state once every event at or before `t` happened.
  auto state_at = [&](int64_t t, bool* known) {
    jobs::CircuitBreaker b(options);
    if (reset_ms > 0 && reset_ms <= t) b.Reset(reset_ms);
    std::vector<store::AttemptRecord> upto;
    for (const auto& a : recent) {
      if (a.ended_ms <= t) upto.push_back(a);
    }
    *known = complete || static_cast<int>(upto.size()) >= options.window;
    b.Update(upto);
    return b.IsOpen();
  };
  for (int64_t t : times) {
    bool known = false;
    const bool before = state_at(t - 1, &known);
    if (!known) return 0;
    if (before != open) return t;
  }
  return 0;
}

}  // namespace

Result<WorkersReport> ListWorkerStatus(store::MetadataStore& meta, int64_t now_ms) {
  WorkersReport r;
  r.now_ms = now_ms;
  KESTREL_ASSIGN_OR_RETURN(auto workers, meta.ListWorkers());
  store::JobFilter running;
  running.states = {store::JobState::kRunning};
  running.limit = std::numeric_limits<int64_t>::max();
  KESTREL_ASSIGN_OR_RETURN(auto jobs, meta.ListJobs(running));
  KESTREL_ASSIGN_OR_RETURN(r.hosts, meta.ListHosts());
  auto host_of = [&](const std::string& name) -> const store::HostRecord* {
    for (const auto& h : r.hosts)
      if (h.host == name) return &h;
    return nullptr;
  };
  std::sort(jobs.begin(), jobs.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  for (auto& w : workers) {
    WorkerStatus s;
    s.pid = PidOfId(w.id, w.host);
    s.heartbeat_age_ms = std::max<int64_t>(0, now_ms - w.heartbeat_ms);
    for (const auto& j : jobs) {
      if (j.lease_owner != w.id) continue;
      WorkerJob wj;
      wj.job = j;
      KESTREL_ASSIGN_OR_RETURN(auto attempts, meta.ListAttempts(j.id));
      for (const auto& a : attempts) {
        if (a.attempt != j.attempt) continue;
        wj.attempt_started_ms = a.started_ms;
        wj.attempt_pid = a.pid;
      }
      s.jobs.push_back(std::move(wj));
    }
    // A stop mark counts while no heartbeat came after it (UpsertWorker
    // clears it on the next heartbeat of the same id anyway).
    const bool stopped = w.stopped_ms > 0 && w.stopped_ms >= w.heartbeat_ms;
    s.state = stopped                               ? "stopped"
              : s.heartbeat_age_ms > kWorkerStaleMs ? "stale"
              : s.jobs.empty()                      ? "idle"
                                                    : "busy";
    const store::HostRecord* h = host_of(w.host);
    s.draining = w.drain_ms > 0 || (h != nullptr && h->drain_ms > 0);
    s.quarantined = h != nullptr && h->quarantined_ms > 0;
    if (s.quarantined) s.quarantine_reason = h->quarantine_reason;
    // Its latest usage sample: an absent or unreadable one is no reason to
    // refuse the list.
    if (auto usage = meta.GetSetting(jobs::kUsageSettingPrefix + w.id); usage.IsOk()) {
      json u = json::parse(*usage, nullptr, false);
      if (u.is_object()) s.usage = std::move(u);
    }
    s.worker = std::move(w);
    r.workers.push_back(std::move(s));
  }
  std::stable_sort(r.workers.begin(), r.workers.end(), [](const WorkerStatus& a, const WorkerStatus& b) {
    return StateRank(a.state) < StateRank(b.state);
  });
  return r;
}

json WorkersJson(const WorkersReport& r) {
  json arr = json::array();
  for (const auto& s : r.workers) {
    json devices = json::parse(s.worker.devices_json, nullptr, false);
    if (!devices.is_array()) devices = json::array();
    json jobs = json::array();
    for (const auto& wj : s.jobs) {
      jobs.push_back({{"id", wj.job.id},
                      {"kind", JobKindText(wj.job)},
                      {"attempt", wj.job.attempt},
                      {"attempt_started_ms", wj.attempt_started_ms},
                      {"attempt_pid", wj.attempt_pid > 0 ? json(wj.attempt_pid) : json(nullptr)},
                      {"lease_until_ms", wj.job.lease_until_ms},
                      {"device", wj.job.spec.device_kind},
                      {"gpu_mem", wj.job.spec.device_memory_mb},
                      {"priority", store::JobPriorityName(wj.job.spec.priority)}});
    }
    arr.push_back({{"id", s.worker.id},
                   {"host", s.worker.host},
                   {"pid", s.pid > 0 ? json(s.pid) : json(nullptr)},
                   {"devices", devices},
                   {"started_ms", s.worker.started_ms},
                   {"heartbeat_ms", s.worker.heartbeat_ms},
                   {"heartbeat_age_ms", s.heartbeat_age_ms},
                   {"state", s.state},
                   {"stopped_ms", s.state == "stopped" ? json(s.worker.stopped_ms) : json(nullptr)},
                   {"jobs", jobs},
                   {"draining", s.draining},
                   {"quarantined", s.quarantined},
                   {"quarantine_reason", s.quarantined ? json(s.quarantine_reason) : json(nullptr)},
                   {"fingerprint", s.worker.fingerprint.empty() ? json(nullptr) : json(s.worker.fingerprint)},
                   {"usage", s.usage}});
  }
  json hosts = json::array();
  for (const auto& h : r.hosts) hosts.push_back(HostJson(h));
  return {{"ok", true},
          {"now_ms", r.now_ms},
          {"stale_after_ms", kWorkerStaleMs},
          {"workers", arr},
          {"hosts", hosts}};
}

json HostJson(const store::HostRecord& h) {
  return {{"host", h.host},
          {"env_failures", h.env_failures},
          {"quarantined", h.quarantined_ms > 0},
          {"quarantined_ms", h.quarantined_ms > 0 ? json(h.quarantined_ms) : json(nullptr)},
          {"quarantine_reason", h.quarantine_reason},
          {"last_failure", h.last_failure},
          {"draining", h.drain_ms > 0}};
}

Result<json> DrainWorkers(store::MetadataStore& meta, const std::string& target, bool drain, int64_t now_ms) {
  auto ids = meta.SetDrain(target, drain, now_ms);
  if (!ids.IsOk()) return ids.GetStatus();
  return json{{"ok", true}, {"target", target}, {"draining", drain}, {"workers", *ids}};
}

Result<json> UnquarantineHost(store::MetadataStore& meta, const std::string& host, int64_t now_ms) {
  KESTREL_ASSIGN_OR_RETURN(store::HostRecord h, meta.UnquarantineHost(host, now_ms));
  json out = HostJson(h);
  out["ok"] = true;
  return out;
}

Result<BreakerReport> ReadBreaker(store::MetadataStore& meta) {
  BreakerReport r;
  jobs::CircuitBreaker breaker(r.options);
  KESTREL_RETURN_IF_ERROR(jobs::RefreshBreaker(breaker, meta));
  r.open = breaker.IsOpen();
  r.reason = breaker.Reason();
  r.failure_rate = breaker.FailureRate();
  r.counted = breaker.Counted();
  r.failed = breaker.Failed();
  r.failed_by_reason = breaker.FailedByReason();
  KESTREL_ASSIGN_OR_RETURN(r.reset_ms, StoredResetMs(meta));
  const int lookback = 2 * r.options.window;
  KESTREL_ASSIGN_OR_RETURN(auto recent, meta.RecentAttempts(lookback));
  const bool complete = static_cast<int>(recent.size()) < lookback;
  r.since_ms = SinceMs(recent, complete, r.reset_ms, r.options, r.open);
  return r;
}

json BreakerJson(const BreakerReport& r) {
  auto ms = [](int64_t v) { return v > 0 ? json(v) : json(nullptr); };
  return {{"ok", true},
          {"open", r.open},
          {"state", r.open ? "open" : "closed"},
          {"reason", r.reason},
          {"failure_rate", r.failure_rate},
          {"counted", r.counted},
          {"failed", r.failed},
          {"failed_by_reason", r.failed_by_reason},
          {"threshold", r.options.threshold},
          {"window", r.options.window},
          {"min_attempts", r.options.min_attempts},
          {"reset_ms", ms(r.reset_ms)},
          {"since_ms", ms(r.since_ms)}};
}

Result<BreakerReport> ResetBreaker(store::MetadataStore& meta, int64_t now_ms) {
  KESTREL_RETURN_IF_ERROR(jobs::PersistBreakerReset(meta, now_ms));
  return ReadBreaker(meta);
}

json BreakerResetJson(const BreakerReport& r) {
  json breaker = BreakerJson(r);
  breaker.erase("ok");
  return {{"ok", true}, {"message", kBreakerResetMessage}, {"reset_ms", r.reset_ms}, {"breaker", breaker}};
}

}  // namespace kestrel::app
