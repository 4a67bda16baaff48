// The job system's health as use cases (docs/jobs.md "Workers", "Circuit
// breaker"), for `kestrel workers`, `kestrel breaker show|reset` and the
// server's GET /api/workers, GET /api/breaker, POST /api/breaker/reset (the
// web UI's System page). Each report has one JSON view, which the CLI prints
// with --json and the server returns.
//
// Times are Unix ms and come in from the caller. Thread-safety: the functions
// borrow one MetadataStore (one per thread).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "jobs/breaker.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// A worker not heard from for longer than this is "stale": crashed, killed,
// or lost with its machine (its running jobs are reclaimed when their leases
// expire); one that exited gracefully says "stopped" at once instead. A worker heartbeats every --heartbeat-s
// (default 30 s); this is three of those, the default lease.
inline constexpr int64_t kWorkerStaleMs = 90'000;

// A running job whose lease a worker holds, with its current attempt.
struct WorkerJob {
  store::JobRecord job;
  int64_t attempt_started_ms = 0;
  int64_t attempt_pid = 0;  // the attempt's child process; 0 until the worker recorded it
};

struct WorkerStatus {
  store::WorkerRecord worker;
  // The worker process's pid when its id is the default "HOST:PID" (`kestrel
  // worker` without --id); 0 when the id is another text.
  int64_t pid = 0;
  int64_t heartbeat_age_ms = 0;  // now - last heartbeat, >= 0 (clocks of other machines may be ahead)
  // "busy" (runs jobs), "idle", "stopped" (exited gracefully: its last
  // write marked it so) or "stale" (no heartbeat for kWorkerStaleMs and not
  // marked stopped: crashed, killed or lost with its machine).
  std::string state;
  std::vector<WorkerJob> jobs;  // by job id
  // `kestrel workers drain` asked it (its id or its host) to finish its
  // running jobs, claim nothing and exit (docs/jobs.md "Quarantine and drain").
  bool draining = false;
  // Its host is quarantined (environment failures): it claims nothing.
  bool quarantined = false;
  std::string quarantine_reason;
  // Its latest usage sample (the setting jobs::kUsageSettingPrefix + id,
  // docs/jobs.md "System usage"): CPU %, RSS and GPU of its running
  // trainers; null when it never sampled (or the setting is unreadable).
  nlohmann::json usage;
};

struct WorkersReport {
  int64_t now_ms = 0;
  std::vector<WorkerStatus>
      workers;  // live ones (busy, idle) first, then stale, then stopped; by id within each
  std::vector<store::HostRecord> hosts;  // hosts with environment failures or a drain, by name
};

// Every registered worker with its running jobs (lease owner = the worker)
// and heartbeat age at `now_ms`.
Result<WorkersReport> ListWorkerStatus(store::MetadataStore& meta, int64_t now_ms);

// {"ok": true, "now_ms", "stale_after_ms", "workers": [{"id", "host", "pid"
// (null when unknown), "devices" (the worker's devices: [{"kind", "index",
// "memory_mb" (gpu)}]), "started_ms", "heartbeat_ms", "heartbeat_age_ms",
// "state", "stopped_ms" (null unless stopped), "jobs": [{"id", "kind", "attempt", "attempt_started_ms",
// "attempt_pid" (null until recorded), "lease_until_ms", "device", "gpu_mem",
// "priority"}], "draining", "quarantined", "quarantine_reason" (null unless
// quarantined), "fingerprint" (its hash, null when none), "usage" (its
// latest usage sample, null when none: {"sampled_ms", "interval_ms",
// "cpu_percent", "rss_mb", "gpu_util"?, "gpu_mem_mb"?, "jobs": [{"job",
// "attempt", "pid", "processes", "cpu_percent", "rss_mb", "gpu_util"?,
// "gpu_mem_mb"?}]})}], "hosts": [{"host",
// "env_failures", "quarantined", "quarantined_ms" (null unless), "quarantine_reason",
// "last_failure", "draining"}]}.
nlohmann::json WorkersJson(const WorkersReport& r);

// One host's standing as WorkersJson's "hosts" lists it.
nlohmann::json HostJson(const store::HostRecord& h);

// `kestrel workers drain|undrain TARGET` (a worker id or a host; docs/jobs.md
// "Quarantine and drain"): {"ok": true, "target", "draining", "workers": [ids]};
// kNotFound naming the target when it is neither.
Result<nlohmann::json> DrainWorkers(store::MetadataStore& meta, const std::string& target, bool drain,
                                    int64_t now_ms);
// `kestrel workers unquarantine HOST`: {"ok": true, "host", "env_failures": 0,
// "quarantined": false}; kNotFound for a host the store has no record of.
Result<nlohmann::json> UnquarantineHost(store::MetadataStore& meta, const std::string& host, int64_t now_ms);

// The circuit breaker as every worker computes it (jobs/breaker.h, default
// options): from the store's shared reset and its last finished attempts.
struct BreakerReport {
  bool open = false;
  std::string reason;  // "" when closed
  double failure_rate = 0;
  int counted = 0;  // finished attempts in the window (ended after the last reset)
  int failed = 0;   // retryable failures among them
  std::map<std::string, int> failed_by_reason;
  jobs::BreakerOptions options;
  int64_t reset_ms = 0;  // the last shared reset (`breaker reset`), 0 = never
  // When the breaker took its current state: the end of the attempt (or the
  // reset) that opened or closed it, found by replaying the last 2 x window
  // attempts. 0 = not within them (or, with fewer in the store, never
  // changed).
  int64_t since_ms = 0;
};

// Reads the breaker's state (refreshing it from the store like a worker
// does) and when it began.
Result<BreakerReport> ReadBreaker(store::MetadataStore& meta);

// {"ok": true, "open", "state" ("open"/"closed"), "reason", "failure_rate",
// "counted", "failed", "failed_by_reason", "threshold", "window",
// "min_attempts", "reset_ms" (null: never), "since_ms" (null: unknown)}.
nlohmann::json BreakerJson(const BreakerReport& r);

// What `kestrel breaker reset` prints and POST /api/breaker/reset returns
// as "message".
inline constexpr const char* kBreakerResetMessage =
    "circuit breaker reset; workers resume retries on their next claim";

// Closes the breaker for every worker (jobs::PersistBreakerReset at
// `now_ms`: attempts ended until then no longer count) and reads it back.
Result<BreakerReport> ResetBreaker(store::MetadataStore& meta, int64_t now_ms);

// {"ok": true, "message": kBreakerResetMessage, "reset_ms", "breaker":
// BreakerJson}.
nlohmann::json BreakerResetJson(const BreakerReport& r);

}  // namespace kestrel::app
