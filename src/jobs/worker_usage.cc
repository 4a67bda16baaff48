// Worker's usage sampling (split from worker.cc): the children it tracks
// and the loop that samples their CPU, memory and GPU use every
// usage_sample_ms, appends each as a "time" metric event of its attempt
// and publishes the worker's total as the store setting
// kUsageSettingPrefix + id (docs/jobs.md "System usage").
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "jobs/worker.h"

namespace kestrel::jobs {

void Worker::Track(int64_t pid, const Tracked& t) {
  {
    MutexLock l(usage_mu_);
    tracked_[pid] = t;
  }
  usage_changed_.SignalAll();
}

void Worker::Untrack(int64_t pid) {
  {
    MutexLock l(usage_mu_);
    tracked_.erase(pid);
  }
  usage_changed_.SignalAll();
}

namespace {

int64_t SteadyMicros(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// One decimal: a chart or a table needs no more of a CPU % or a MiB figure.
double Tenths(double v) { return std::round(v * 10) / 10; }

}  // namespace

void Worker::UsageLoop() {
  std::unique_ptr<UsageSampler> sampler =
      options_.usage_sampler ? options_.usage_sampler() : std::make_unique<UsageSampler>();
  std::unique_ptr<store::MetadataStore> store;
  bool store_warned = false;
  // Store writes: a failure is logged once until a write succeeds again;
  // the samples of an outage are dropped (the next ones follow).
  auto write = [&](const std::function<Status(store::MetadataStore&)>& fn, const char* what) {
    if (!store) {
      auto s = open_store_();
      if (!s.IsOk()) {
        if (!store_warned)
          spdlog::warn("worker {}: usage samples not stored (cannot open the store): {}", options_.id,
                       s.GetStatus().ToString());
        store_warned = true;
        return;
      }
      store = std::move(*s);
    }
    Status s = fn(*store);
    if (s.IsOk()) {
      store_warned = false;
      return;
    }
    if (!store_warned) spdlog::warn("worker {}: {} failed: {}", options_.id, what, s.ToString());
    store_warned = true;
  };
  const std::string setting = kUsageSettingPrefix + options_.id;
  auto publish = [&](const nlohmann::json& doc) {
    write([&](store::MetadataStore& st) { return st.PutSetting(setting, doc.dump(), NowMs()); },
          "storing the worker's usage");
  };
  bool published_busy = false;           // the setting holds a sample with running trainers
  std::map<int64_t, Tracked> baselined;  // children with a baseline reading
  const auto interval = std::chrono::milliseconds(options_.usage_sample_ms);
  auto same = [](const Tracked& a, const Tracked& b) {
    return a.job_id == b.job_id && a.attempt == b.attempt && a.started == b.started;
  };
  while (true) {
    std::map<int64_t, Tracked> current;
    bool stop = false;
    {
      MutexLock l(usage_mu_);
      // Nothing runs: no reading, no write, until a child starts.
      while (!usage_stop_ && tracked_.empty() && !published_busy) usage_changed_.Wait(usage_mu_);
      stop = usage_stop_;
      current = tracked_;
    }
    for (auto it = baselined.begin(); it != baselined.end();) {
      auto c = current.find(it->first);
      if (c == current.end() || !same(c->second, it->second)) {
        sampler->Forget(it->first);
        it = baselined.erase(it);
      } else {
        ++it;
      }
    }
    if (stop || current.empty()) {
      if (published_busy) {
        // The last trainer ended: the worker's row says so (no jobs, zero use).
        publish({{"sampled_ms", NowMs()},
                 {"interval_ms", options_.usage_sample_ms},
                 {"cpu_percent", 0},
                 {"rss_mb", 0},
                 {"jobs", nlohmann::json::array()}});
        published_busy = false;
      }
      if (stop) return;
      continue;
    }
    const int64_t start_us = SteadyMicros(std::chrono::steady_clock::now());
    for (const auto& [pid, t] : current) {
      if (baselined.count(pid) != 0) continue;
      if (sampler->Start(pid, start_us).IsOk()) baselined[pid] = t;
    }
    {
      // One interval; only the stop cuts it short.
      MutexLock l(usage_mu_);
      const auto until = std::chrono::steady_clock::now() + interval;
      while (!usage_stop_ && std::chrono::steady_clock::now() < until)
        usage_changed_.WaitUntil(usage_mu_, until);
      if (usage_stop_) continue;
      current = tracked_;
    }
    if (baselined.empty()) continue;
    const std::optional<GpuSnapshot> gpu = sampler->QueryGpu();
    const auto at = std::chrono::steady_clock::now();
    double cpu = 0, rss = 0, gpu_mem = 0, gpu_util = 0;
    bool any = false, any_gpu_mem = false, any_gpu_util = false;
    nlohmann::json jobs = nlohmann::json::array();
    for (const auto& [pid, t] : baselined) {
      auto c = current.find(pid);
      if (c == current.end() || !same(c->second, t)) continue;  // ended during the interval
      auto r = sampler->Sample(pid, SteadyMicros(at), gpu, t.gpu_index);
      if (!r.IsOk()) continue;
      nlohmann::json values = {{"sys/cpu_percent", Tenths(r->cpu_percent)},
                               {"sys/rss_mb", Tenths(r->rss_mb)}};
      if (r->gpu_util_percent) values["sys/gpu_util"] = Tenths(*r->gpu_util_percent);
      if (r->gpu_mem_mb) values["sys/gpu_mem_mb"] = Tenths(*r->gpu_mem_mb);
      const int64_t x = std::llround(std::chrono::duration<double>(at - t.started).count());
      store::EventRecord ev;
      ev.job_id = t.job_id;
      ev.attempt = t.attempt;
      ev.kind = "metric";
      ev.payload_json = nlohmann::json{{"type", "time"}, {"x", x}, {"values", values}}.dump();
      ev.created_ms = NowMs();
      // The attempt's own (job, attempt): the series keep only the newest
      // attempt's points, so a sample of a child that lost its lease is inert.
      write([&](store::MetadataStore& st) { return st.AppendEvent(ev).GetStatus(); },
            "appending a usage sample");
      nlohmann::json j = {{"job", t.job_id},
                          {"attempt", t.attempt},
                          {"pid", pid},
                          {"processes", r->processes},
                          {"cpu_percent", values["sys/cpu_percent"]},
                          {"rss_mb", values["sys/rss_mb"]}};
      if (r->gpu_util_percent) {
        j["gpu_util"] = values["sys/gpu_util"];
        gpu_util = std::max(gpu_util, *r->gpu_util_percent);
        any_gpu_util = true;
      }
      if (r->gpu_mem_mb) {
        j["gpu_mem_mb"] = values["sys/gpu_mem_mb"];
        gpu_mem += *r->gpu_mem_mb;
        any_gpu_mem = true;
      }
      jobs.push_back(std::move(j));
      cpu += r->cpu_percent;
      rss += r->rss_mb;
      any = true;
    }
    if (!any) continue;
    nlohmann::json doc = {{"sampled_ms", NowMs()},
                          {"interval_ms", options_.usage_sample_ms},
                          {"cpu_percent", Tenths(cpu)},
                          {"rss_mb", Tenths(rss)},
                          {"jobs", std::move(jobs)}};
    if (any_gpu_util) doc["gpu_util"] = Tenths(gpu_util);
    if (any_gpu_mem) doc["gpu_mem_mb"] = Tenths(gpu_mem);
    publish(doc);
    published_busy = true;
  }
}

}  // namespace kestrel::jobs
