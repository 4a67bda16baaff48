// Worker: runs jobs from the MetadataStore on this machine's devices
// (`kestrel worker`). It registers itself, then each of its `slots` threads
// loops: refresh the circuit breaker (honouring a shared `kestrel breaker
// reset`), claim a job that fits the devices still free, run the attempt as
// a supervised child (`kestrel <kind> --job ID --attempt N`, the kind's
// command word from options.kinds) whose heartbeat
// renews the lease, and complete the attempt with the quality gate applied.
//
// Failure handling (docs/jobs.md "Worker"):
// - RenewLease kAborted (lease stolen, job cancelled): the child is stopped
//   (SIGTERM, grace, SIGKILL) and its result is never committed (fencing).
// - The store unreachable while renewing: the child keeps running until the
//   lease it holds would really have expired; then it is stopped.
// - Store errors in the loop are logged and retried with backoff; the worker
//   never exits because the store restarted.
// - Stop (SIGTERM to the worker): no more claims; children get SIGTERM (they
//   checkpoint), SIGKILL after the grace period; their attempts complete as
//   infrastructure failures `worker_stopped`, so another worker resumes them.
//   When Run() returns (stopped, max_jobs, exit_when_idle) the worker's row
//   is marked stopped (WorkerRecord::stopped_ms): `kestrel workers` shows it
//   `stopped` at once; a crashed worker only goes stale.
//
// Webhooks: Run() also runs a webhook dispatcher beside the slots (unless
// options.webhooks is false) and drains it before returning.
//
// All time goes through Env: with FakeClockEnv and FakeProcessRunner a test
// drives hours of work exactly. Thread-safety: Run() once per Worker; the
// accessors (Counters, BreakerOpen, ...) from any thread. Locking (checked by
// clang -Wthread-safety, `scripts/lint.sh threads`): mu_ guards the claim
// state below it and is held across a whole claim (breaker refresh, disk
// check, ClaimJob, device reservation), so two slots never offer the same
// device; it is never held while a child runs or a hook is called.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "core/thread_annotations.h"
#include "jobs/breaker.h"
#include "jobs/device_pool.h"
#include "jobs/disk_space.h"
#include "jobs/job_keys.h"
#include "jobs/process_runner.h"
#include "jobs/supervisor.h"
#include "jobs/usage_sampler.h"
#include "jobs/webhook.h"
#include "store/metadata_store.h"

namespace kestrel::jobs {

// What the worker needs of the job-kind table (app/job_kinds.h WorkerKinds,
// which src/jobs cannot include): the worker itself has no kind branch.
struct AttemptKinds {
  // The child's command word for `job` (its kind's name: `<word> --job ID
  // --attempt N`); an error: no child could run it (a permanent bad_config).
  std::function<Result<std::string>(const store::JobRecord& job)> command;
  // The quality gate on a finished child's `result` line (the text after
  // "result "; "" when it wrote none): OK, or why the attempt fails it.
  std::function<Status(const store::JobRecord& job, const std::string& result_json)> gate;
};

struct WorkerOptions {
  std::string id;    // unique worker id (the CLI uses host:pid unless --id)
  std::string host;  // recorded with attempts
  std::string home;  // attempt logs go to home/jobs/<job>/attempt-<n>.log
  // argv of the child without the attempt part; the worker appends the job
  // kind's command: "train --job ID --attempt N", "val --job ...". argv[0]
  // must be an absolute path.
  std::vector<std::string> child_command;
  AttemptKinds kinds;           // both functions required
  int slots = 1;                // concurrent attempts (threads), >= 1
  std::vector<Device> devices;  // empty = `slots` CPU slots
  // The CPUs the CPU devices share out (core/cpu_budget.h): the k-th CPU
  // device's attempts are pinned to the k-th share of SplitCpus(cpus, number
  // of CPU devices), so two slots on 4 cores train on 2 cores each instead of
  // both on all 4 (each trainer sizes its threads from its pinned set).
  // Empty = this process's affinity mask. pin_cpus=false: children inherit
  // the worker's affinity (`kestrel worker --no-pin`).
  std::vector<int> cpus;
  bool pin_cpus = true;
  int64_t lease_ms = 90'000;     // lease per claim / renewal
  int64_t poll_ms = 1'000;       // idle wait between claim attempts
  SupervisorOptions supervisor;  // heartbeat (lease renewal), hang, grace, child poll
  int64_t max_jobs = 0;          // stop after this many claims have finished (0 = no limit)
  bool exit_when_idle = false;   // stop when no waiting job fits and no slot is busy
  BreakerOptions breaker;
  int64_t store_retry_max_ms = 5'000;  // backoff cap after store errors
  // Deliver webhooks (docs/webhooks.md) while Run() runs: a dispatcher on its
  // own store connection and thread (`kestrel worker --no-webhooks` = false).
  // When Run() ends it first delivers what is pending (WebhookDispatcher::
  // Drain), for at most webhook_drain_ms, so a worker's last state changes
  // reach the receivers before it exits.
  bool webhooks = true;
  WebhookOptions webhook;
  int64_t webhook_drain_ms = 5'000;
  // Unix ms at construction; 0 = env.UnixMillis(). Store times are
  // this anchor plus the Env's monotonic clock since construction.
  int64_t wall_anchor_ms = 0;
  // Low-disk watermark (docs/disk.md): no new claims while the filesystem of
  // `home` has less than this many bytes available (0 = off); running
  // attempts go on. The state is logged once per change and published as the
  // store setting kLowDiskSettingPrefix + id (`kestrel stats`).
  int64_t min_free_bytes = 0;
  // Free-space probe; unset = StatDiskSpace(home). Tests fake it.
  std::function<Result<DiskSpace>()> disk_space;
  // Called on the slot's thread, with its store, after a job's success was
  // committed (the CLI registers the job's model: app/models.h). Its errors
  // are its own to log; it must not throw. Unset = nothing.
  std::function<void(store::MetadataStore& store, const store::JobRecord& job, int64_t now_ms)>
      on_job_succeeded;
  // The environment (docs/jobs.md "Environment fingerprint", "Quarantine and
  // drain"). The fingerprint's JSON and its hash ("" = none): stored once
  // (MetadataStore::PutFingerprint), named on the worker's row at start and
  // on every attempt it claims.
  std::string fingerprint_json, fingerprint_hash;
  // Runs once before the first claim (the CLI: `kestrel doctor`'s checks).
  // An error counts as an environment failure of `host` and Run() returns
  // it without claiming anything. Unset = no check.
  std::function<Status()> preflight;
  // Environment failures of this host (every worker and job on it, counted in
  // the store) that quarantine it: it claims nothing until `kestrel workers
  // unquarantine HOST`. >= 1.
  int quarantine_after = 3;
  // Resource usage of the running trainers (docs/jobs.md "System usage";
  // `kestrel worker --usage-s`): every usage_sample_ms a thread of the
  // worker reads each running attempt's process tree (jobs/usage_sampler.h)
  // and appends a "metric" event {"type": "time", "x": whole seconds since
  // the child started, "values": {"sys/cpu_percent", "sys/rss_mb",
  // "sys/gpu_util", "sys/gpu_mem_mb"}} for that attempt (GPU values only
  // when a GPU reading applies), and puts the worker's total in the setting
  // kUsageSettingPrefix + id (`kestrel workers`). 0 = off; else >= 1000.
  // The thread waits on real time (std::chrono), so tests on a fake clock
  // leave it off; it sleeps without reading anything while nothing runs.
  int64_t usage_sample_ms = 0;
  // Makes the sampler (on the sampling thread); unset = UsageSampler() on
  // /proc and nvidia-smi. Tests give a fake /proc or GPU query.
  std::function<std::unique_ptr<UsageSampler>()> usage_sampler;
};

Status ValidateWorkerOptions(const WorkerOptions& o);

struct WorkerCounters {
  int64_t claimed = 0;
  int64_t succeeded = 0;     // committed as succeeded
  int64_t failed = 0;        // committed as a failure (any class)
  int64_t fenced = 0;        // CompleteAttempt refused: the attempt was no longer current
  int64_t stopped = 0;       // completed as worker_stopped
  int64_t store_errors = 0;  // store calls that failed and were retried
};

// Opens a store connection; called once per thread (one connection each).
using StoreFactory = std::function<Result<std::unique_ptr<store::MetadataStore>>()>;

class Worker {
 public:
  Worker(StoreFactory open_store, ProcessRunner& runner, Env& env, WorkerOptions options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Runs until `stop` becomes true, `max_jobs` claims have finished, or
  // (exit_when_idle) nothing is left that this worker could run. Fails only
  // on invalid options.
  Status Run(const std::atomic<bool>& stop);

  WorkerCounters Counters() const;
  bool BreakerOpen() const;
  std::string BreakerReason() const;
  // Whether the low-disk watermark holds claims back now.
  bool LowDisk() const;
  // Memory reserved on GPU `index` right now.
  int64_t GpuUsedMb(int index) const;
  // The last drain / quarantine state read from the store (refreshed before
  // claims, every poll_ms).
  bool Draining() const;
  bool Quarantined() const;

 private:
  struct Claim;
  void SlotLoop() EXCLUDES(mu_);
  Result<bool> TryClaim(store::MetadataStore& store, Claim* out) EXCLUDES(mu_);
  Result<bool> IdleDone(store::MetadataStore& store) EXCLUDES(mu_);
  // The watermark check before a claim: true = do not claim.
  bool DiskTooFull(store::MetadataStore& store, int64_t now_ms) REQUIRES(mu_);
  // Reads the drain and quarantine state (every poll_ms); true = do not claim.
  Result<bool> HeldBack(store::MetadataStore& store, int64_t now_ms) REQUIRES(mu_);
  // A draining worker with nothing running is done (Run() returns OK).
  bool DrainDone() EXCLUDES(mu_);
  // Whether an environment failure keeps `job` off this host (the store's
  // claim rule, for IdleDone).
  Result<bool> ExcludedHere(store::MetadataStore& store, const store::JobRecord& job) REQUIRES(mu_);
  // Counts an environment failure of this host in the store; logs a quarantine.
  void NoteEnvironmentFailure(store::MetadataStore& store, const std::string& message) EXCLUDES(mu_);
  void RunAttempt(store::MetadataStore& store, const Claim& claim) EXCLUDES(mu_);
  void Complete(store::MetadataStore& store, const store::JobRecord& job,
                const store::AttemptOutcome& outcome) EXCLUDES(mu_);
  // The usage sampling thread (options_.usage_sample_ms > 0).
  struct Tracked {
    int64_t job_id = 0, attempt = 0;
    int gpu_index = -1;  // the GPU it was placed on, -1: a CPU attempt
    std::chrono::steady_clock::time_point started;
  };
  void UsageLoop() EXCLUDES(usage_mu_);
  void Track(int64_t pid, const Tracked& t) EXCLUDES(usage_mu_);
  void Untrack(int64_t pid) EXCLUDES(usage_mu_);
  int64_t NowMs();
  void SleepMs(int64_t ms);
  bool Finished() EXCLUDES(mu_);

  // Set in the constructor, read-only afterwards: no lock.
  StoreFactory open_store_;
  ProcessRunner& runner_;
  Env& env_;
  WorkerOptions options_;
  int64_t anchor_wall_ms_ = 0;
  int64_t anchor_mono_us_ = 0;
  std::map<int, std::vector<int>> cpu_shares_;  // CPU device index -> its pinned CPUs

  std::atomic<bool> stopping_{false};
  mutable Mutex mu_;
  CondVar slots_changed_;  // signalled when slots_running_ drops
  DevicePool pool_ GUARDED_BY(mu_);
  CircuitBreaker breaker_ GUARDED_BY(mu_);
  bool breaker_fresh_ GUARDED_BY(mu_) = false;
  int64_t breaker_refreshed_ms_ GUARDED_BY(mu_) = 0;
  bool low_disk_ GUARDED_BY(mu_) = false;
  bool low_disk_unpublished_ GUARDED_BY(mu_) = false;  // the last change is not in the store yet
  bool disk_probe_failing_ GUARDED_BY(mu_) = false;
  DiskSpace last_disk_ GUARDED_BY(mu_);
  store::WorkerControl control_ GUARDED_BY(mu_);
  bool control_fresh_ GUARDED_BY(mu_) = false;
  int64_t control_refreshed_ms_ GUARDED_BY(mu_) = 0;
  int64_t claims_ GUARDED_BY(mu_) = 0;
  int busy_ GUARDED_BY(mu_) = 0;
  int slots_running_ GUARDED_BY(mu_) = 0;
  bool done_ GUARDED_BY(mu_) = false;
  WorkerCounters counters_ GUARDED_BY(mu_);
  // Serializes ProcessRunner::Start across slots (guards no member: the
  // runner's fork). Never taken together with mu_.
  Mutex start_mu_;
  // The running children the usage thread samples (pid -> attempt). Never
  // taken together with mu_.
  Mutex usage_mu_;
  CondVar usage_changed_;  // a child tracked or untracked, or the stop
  std::map<int64_t, Tracked> tracked_ GUARDED_BY(usage_mu_);
  bool usage_stop_ GUARDED_BY(usage_mu_) = false;
};

// The quality gate: what to commit for a finished run. Success only when the
// child exited 0 by itself and its kind's gate (kinds.gate: the job-kind
// table's, app/job_kinds.h) passes its result; otherwise a permanent
// `quality_gate` failure, stage eval, "quality gate: <why>".
store::AttemptOutcome GateOutcome(const SupervisedRun& run, const store::JobRecord& job,
                                  const AttemptKinds& kinds);

}  // namespace kestrel::jobs
