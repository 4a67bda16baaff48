#include "jobs/worker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <limits>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/cpu_budget.h"
#include "jobs/retry.h"

namespace kestrel::jobs {
namespace {

// RenewLease/CompleteAttempt say kAborted both for fencing (the attempt is no
// longer ours) and, with the subcode kStoreConflict, for a lock conflict that
// survived the store's own retries: only the first means "stop".
bool IsFenced(const Status& s) {
  return s.Code() == StatusCode::kAborted && s.Reason() != FailureReason::kStoreConflict;
}

// A child whose worker is stopping: SIGTERM once (it checkpoints), SIGKILL
// after the grace period. Everything runs on the supervising thread, from
// Poll(), so the child object is never touched by two threads.
class StoppableChild final : public ChildProcess {
 public:
  StoppableChild(std::unique_ptr<ChildProcess> inner, const std::atomic<bool>& stop, Env& env,
                 int64_t grace_ms, bool& stopped_by_worker)
      : inner_(std::move(inner)), stop_(stop), env_(env), grace_ms_(grace_ms), stopped_(stopped_by_worker) {}
  int64_t Pid() const override { return inner_->Pid(); }
  std::vector<std::string> ReadProgress() override { return inner_->ReadProgress(); }
  void Signal(int sig) override { inner_->Signal(sig); }
  std::optional<ExitInfo> Poll() override {
    auto e = inner_->Poll();
    if (e || !stop_.load()) return e;
    const int64_t now = env_.NowMicros() / 1000;
    if (term_at_ < 0) {
      stopped_ = true;
      term_at_ = now;
      inner_->Signal(SIGTERM);
      inner_->Signal(SIGCONT);
    } else if (!killed_ && now - term_at_ >= grace_ms_) {
      killed_ = true;
      inner_->Signal(SIGKILL);
    }
    return std::nullopt;
  }

 private:
  std::unique_ptr<ChildProcess> inner_;
  const std::atomic<bool>& stop_;
  Env& env_;
  int64_t grace_ms_;
  bool& stopped_;
  int64_t term_at_ = -1;
  bool killed_ = false;
};

// Starts the attempt's child (serialized with the other slots), tells
// `started` its pid, and wraps it so a stopping worker stops it. Runs on the
// slot thread, which supervises the child to its end: PosixProcessRunner's
// PR_SET_PDEATHSIG is tied to the thread that forks.
class AttemptRunner final : public ProcessRunner {
 public:
  AttemptRunner(ProcessRunner& inner, Mutex& start_mu, const std::atomic<bool>& stop, Env& env,
                int64_t grace_ms, bool& stopped_by_worker, std::function<void(int64_t pid)> started)
      : inner_(inner),
        start_mu_(start_mu),
        stop_(stop),
        env_(env),
        grace_ms_(grace_ms),
        stopped_(stopped_by_worker),
        started_(std::move(started)) {}
  Result<std::unique_ptr<ChildProcess>> Start(const ProcessSpec& spec) override {
    std::unique_ptr<ChildProcess> child;
    {
      MutexLock l(start_mu_);
      KESTREL_ASSIGN_OR_RETURN(child, inner_.Start(spec));
    }
    if (started_) started_(child->Pid());
    return std::unique_ptr<ChildProcess>(
        std::make_unique<StoppableChild>(std::move(child), stop_, env_, grace_ms_, stopped_));
  }

 private:
  ProcessRunner& inner_;
  Mutex& start_mu_;
  const std::atomic<bool>& stop_;
  Env& env_;
  int64_t grace_ms_;
  bool& stopped_;
  std::function<void(int64_t pid)> started_;
};

bool Fits(const store::JobRecord& job, const std::vector<Device>& devices) {
  for (const auto& d : devices) {
    if (d.kind != job.spec.device_kind) continue;
    if (d.kind == "cpu" || job.spec.device_memory_mb <= d.memory_mb) return true;
  }
  return false;
}

}  // namespace

Status ValidateWorkerOptions(const WorkerOptions& o) {
  auto bad = [](const std::string& field, const std::string& msg) {
    return Status::InvalidArgument(msg, {"command line", 0, field});
  };
  if (o.id.empty()) return bad("id", "worker id is empty");
  if (!o.kinds.command || !o.kinds.gate)
    return bad("kinds", "the worker needs the job-kind table's command and gate");
  if (o.child_command.empty() || o.child_command[0].empty() || o.child_command[0][0] != '/') {
    return bad("child_command", "the child command needs an absolute argv[0]");
  }
  if (o.slots < 1 || o.slots > 256) return bad("slots", "slots must be 1..256");
  if (o.lease_ms <= 0) return bad("lease-s", "lease must be > 0");
  if (o.poll_ms <= 0) return bad("poll-s", "poll interval must be > 0");
  if (o.max_jobs < 0) return bad("max-jobs", "max-jobs must be >= 0");
  if (o.supervisor.heartbeat_ms >= o.lease_ms) {
    return bad("heartbeat-s",
               "the heartbeat must be shorter than the lease, or the lease expires between renewals");
  }
  if (o.store_retry_max_ms <= 0) return bad("store_retry_max_ms", "must be > 0");
  if (o.webhook_drain_ms < 0) return bad("webhook_drain_ms", "must be >= 0");
  if (o.quarantine_after < 1) return bad("quarantine-after", "must be >= 1");
  if (o.usage_sample_ms != 0 && o.usage_sample_ms < 1000)
    return bad("usage-s", "the usage sampling interval must be 0 (off) or at least 1 s");
  if (o.fingerprint_hash.empty() != o.fingerprint_json.empty())
    return bad("fingerprint", "the fingerprint's JSON and hash come together");
  if (o.webhooks) KESTREL_RETURN_IF_ERROR(ValidateWebhookOptions(o.webhook));
  KESTREL_RETURN_IF_ERROR(ValidateSupervisorOptions(o.supervisor));
  return ValidateBreakerOptions(o.breaker);
}

struct Worker::Claim {
  store::ClaimedJob job;
  int token = -1;
};

Worker::Worker(StoreFactory open_store, ProcessRunner& runner, Env& env, WorkerOptions options)
    : open_store_(std::move(open_store)),
      runner_(runner),
      env_(env),
      options_(std::move(options)),
      pool_(options_.devices),
      breaker_(options_.breaker) {
  if (options_.devices.empty()) {
    for (int i = 0; i < options_.slots; ++i) options_.devices.push_back({"cpu", i, 0});
    pool_ = DevicePool(options_.devices);
  }
  if (options_.pin_cpus) {
    std::vector<int> cpu_devices;
    for (const Device& d : options_.devices)
      if (d.kind == "cpu") cpu_devices.push_back(d.index);
    const std::vector<int> cpus = options_.cpus.empty() ? ProcessCpuBudget().affinity : options_.cpus;
    if (cpu_devices.size() > 1 && !cpus.empty()) {
      const auto shares = SplitCpus(cpus, static_cast<int>(cpu_devices.size()));
      for (size_t k = 0; k < cpu_devices.size(); ++k) cpu_shares_[cpu_devices[k]] = shares[k];
    }
  }
  anchor_mono_us_ = env_.NowMicros();
  anchor_wall_ms_ = options_.wall_anchor_ms > 0 ? options_.wall_anchor_ms : env_.UnixMillis();
}

Worker::~Worker() = default;

int64_t Worker::NowMs() { return anchor_wall_ms_ + (env_.NowMicros() - anchor_mono_us_) / 1000; }

void Worker::SleepMs(int64_t ms) {
  // In slices, so a stop request is seen within 100 ms.
  while (ms > 0 && !stopping_.load()) {
    int64_t step = std::min<int64_t>(ms, 100);
    env_.SleepMicros(step * 1000);
    ms -= step;
  }
}

bool Worker::Finished() {
  MutexLock l(mu_);
  return done_ || stopping_.load() || (options_.max_jobs > 0 && claims_ >= options_.max_jobs);
}

WorkerCounters Worker::Counters() const {
  MutexLock l(mu_);
  return counters_;
}

bool Worker::LowDisk() const {
  MutexLock l(mu_);
  return low_disk_;
}

bool Worker::BreakerOpen() const {
  MutexLock l(mu_);
  return breaker_.IsOpen();
}

std::string Worker::BreakerReason() const {
  MutexLock l(mu_);
  return breaker_.Reason();
}

int64_t Worker::GpuUsedMb(int index) const {
  MutexLock l(mu_);
  return pool_.UsedMb(index);
}

bool Worker::Draining() const {
  MutexLock l(mu_);
  return control_.draining;
}

bool Worker::Quarantined() const {
  MutexLock l(mu_);
  return control_.quarantined;
}

Result<bool> Worker::HeldBack(store::MetadataStore& store, int64_t now_ms) {
  if (!control_fresh_ || now_ms - control_refreshed_ms_ >= options_.poll_ms) {
    KESTREL_ASSIGN_OR_RETURN(store::WorkerControl c, store.GetWorkerControl(options_.id, options_.host));
    if (c.draining != control_.draining) {
      spdlog::info("worker {}: {}", options_.id,
                   c.draining ? "draining: claiming nothing more, exiting when the running attempts end"
                              : "undrained: claiming again");
    }
    if (c.quarantined != control_.quarantined) {
      if (c.quarantined) {
        spdlog::warn(
            "worker {}: host {} is quarantined, claiming nothing (kestrel workers unquarantine {}): {}",
            options_.id, options_.host, options_.host, c.reason);
      } else {
        spdlog::info("worker {}: host {} is no longer quarantined: claiming again", options_.id,
                     options_.host);
      }
    }
    control_ = std::move(c);
    control_fresh_ = true;
    control_refreshed_ms_ = now_ms;
  }
  return control_.draining || control_.quarantined;
}

bool Worker::DrainDone() {
  MutexLock l(mu_);
  if (!control_.draining || busy_ > 0) return false;
  if (!done_) spdlog::info("worker {}: drained: nothing running; exiting", options_.id);
  done_ = true;
  return true;
}

Result<bool> Worker::ExcludedHere(store::MetadataStore& store, const store::JobRecord& job) {
  if (job.attempt == 0) return false;
  KESTREL_ASSIGN_OR_RETURN(auto attempts, store.ListAttempts(job.id));
  for (const auto& a : attempts) {
    if (a.host == options_.host && a.reason == FailureReasonToken(FailureReason::kEnvironment) &&
        a.ended_ms > control_.cleared_ms) {
      return true;
    }
  }
  return false;
}

void Worker::NoteEnvironmentFailure(store::MetadataStore& store, const std::string& message) {
  auto h = store.RecordEnvironmentFailure(options_.host, message, options_.quarantine_after, NowMs());
  if (!h.IsOk()) {
    spdlog::warn("worker {}: counting an environment failure of host {} failed: {}", options_.id,
                 options_.host, h.GetStatus().ToString());
    return;
  }
  spdlog::warn("worker {}: environment failure {} of {} on host {}: {}", options_.id, h->env_failures,
               options_.quarantine_after, options_.host, message);
  if (h->quarantined_ms > 0) {
    MutexLock l(mu_);
    control_.quarantined = true;
    control_.reason = h->quarantine_reason;
    control_fresh_ = false;  // the next claim reads the store again
    spdlog::warn("worker {}: host {} is quarantined, claiming nothing (kestrel workers unquarantine {}): {}",
                 options_.id, options_.host, options_.host, h->quarantine_reason);
  }
}

Status Worker::Run(const std::atomic<bool>& stop) {
  KESTREL_RETURN_IF_ERROR(ValidateWorkerOptions(options_));
  std::unique_ptr<store::MetadataStore> store;
  store::WorkerRecord rec{options_.id, options_.host, DevicesJson(options_.devices), NowMs(), NowMs()};
  rec.fingerprint = options_.fingerprint_hash;
  int64_t next_heartbeat = NowMs();
  auto heartbeat = [&] {
    if (NowMs() < next_heartbeat) return;
    next_heartbeat = NowMs() + options_.supervisor.heartbeat_ms;
    if (!store) {
      auto s = open_store_();
      if (!s.IsOk()) {
        spdlog::warn("worker {}: cannot open the store: {}", options_.id, s.GetStatus().ToString());
        return;
      }
      store = std::move(*s);
    }
    rec.heartbeat_ms = NowMs();
    Status s = store->UpsertWorker(rec);
    if (!s.IsOk()) spdlog::warn("worker {}: registering failed (will retry): {}", options_.id, s.ToString());
  };
  heartbeat();
  if (store && !options_.fingerprint_hash.empty()) {
    Status s = store->PutFingerprint(options_.fingerprint_hash, options_.fingerprint_json, NowMs());
    if (!s.IsOk()) spdlog::warn("worker {}: storing its fingerprint failed: {}", options_.id, s.ToString());
  }
  if (options_.preflight) {
    // The doctor's checks before any claim: a host that cannot run jobs
    // refuses them instead of failing each one (docs/jobs.md "Doctor").
    Status pre = options_.preflight();
    if (!pre.IsOk()) {
      if (!store) {
        if (auto s = open_store_(); s.IsOk()) store = std::move(*s);
      }
      if (store) NoteEnvironmentFailure(*store, "doctor: " + pre.Message());
      if (store) {
        rec.heartbeat_ms = NowMs();
        rec.stopped_ms = rec.heartbeat_ms;
        if (Status s = store->UpsertWorker(rec); !s.IsOk())
          spdlog::warn("worker {}: marking it stopped failed: {}", options_.id, s.ToString());
      }
      return Status::FailedPrecondition("worker " + options_.id +
                                        " claims nothing: its doctor check failed: " + pre.Message())
          .WithReason(FailureReason::kEnvironment);
    }
  }
  // Webhook delivery runs beside the slots on its own connection and thread;
  // the store lease makes exactly one process deliver at a time.
  std::unique_ptr<WebhookDispatcher> webhooks;
  if (options_.webhooks) {
    auto s = open_store_();
    if (s.IsOk()) {
      webhooks = std::make_unique<WebhookDispatcher>(std::move(*s), env_, options_.webhook);
      webhooks->Start();
    } else {
      spdlog::warn("worker {}: webhooks disabled: {}", options_.id, s.GetStatus().ToString());
    }
  }
  spdlog::info("worker {}: {} slot(s), devices {}", options_.id, options_.slots,
               DevicesJson(options_.devices));
  std::vector<std::thread> threads;
  {
    MutexLock l(mu_);
    slots_running_ = options_.slots;
  }
  for (int i = 0; i < options_.slots; ++i) threads.emplace_back([this] { SlotLoop(); });
  std::thread usage;
  if (options_.usage_sample_ms > 0) usage = std::thread([this] { UsageLoop(); });
  while (true) {
    {
      MutexLock l(mu_);
      if (slots_running_ > 0) slots_changed_.WaitFor(mu_, std::chrono::milliseconds(20));
      if (slots_running_ == 0) break;
    }
    if (stop.load() && !stopping_.load()) {
      spdlog::info("worker {}: stopping: no more claims, running attempts are stopped and handed back",
                   options_.id);
      stopping_.store(true);
    }
    heartbeat();
  }
  for (auto& t : threads) t.join();
  if (usage.joinable()) {
    {
      MutexLock l(usage_mu_);
      usage_stop_ = true;
    }
    usage_changed_.SignalAll();
    usage.join();
  }
  // Every slot has handed its attempt back or finished it: the row says
  // `stopped` at once (app::ListWorkerStatus), not `idle` until stale.
  if (!store) {
    if (auto s = open_store_(); s.IsOk()) store = std::move(*s);
  }
  if (store) {
    rec.heartbeat_ms = NowMs();
    rec.stopped_ms = rec.heartbeat_ms;
    Status s = store->UpsertWorker(rec);
    if (!s.IsOk()) spdlog::warn("worker {}: marking it stopped failed: {}", options_.id, s.ToString());
  }
  if (store && LowDisk()) {
    // A stopped worker holds nothing back: `kestrel stats` must not list it.
    const nlohmann::json v = {{"low", false}, {"stopped", true}, {"changed_ms", NowMs()}};
    Status s = store->PutSetting(kLowDiskSettingPrefix + options_.id, v.dump(), NowMs());
    if (!s.IsOk())
      spdlog::warn("worker {}: clearing the low-disk state failed: {}", options_.id, s.ToString());
  }
  if (webhooks) {
    Status d = webhooks->Drain(options_.webhook_drain_ms);
    if (!d.IsOk()) spdlog::warn("worker {}: {}", options_.id, d.ToString());
  }
  return {};
}

void Worker::SlotLoop() {
  std::unique_ptr<store::MetadataStore> store;
  int64_t backoff_ms = options_.poll_ms;
  auto store_error = [&](const Status& s, const char* what) {
    {
      MutexLock l(mu_);
      ++counters_.store_errors;
    }
    spdlog::warn("worker {}: {} failed, retrying in {} ms: {}", options_.id, what, backoff_ms, s.ToString());
    SleepMs(backoff_ms);
    backoff_ms = std::min(backoff_ms * 2, std::max(options_.store_retry_max_ms, options_.poll_ms));
  };
  while (!Finished()) {
    if (!store) {
      auto s = open_store_();
      if (!s.IsOk()) {
        store_error(s.GetStatus(), "opening the store");
        continue;
      }
      store = std::move(*s);
    }
    Claim claim;
    auto got = TryClaim(*store, &claim);
    if (!got.IsOk()) {
      store_error(got.GetStatus(), "claiming");
      continue;
    }
    backoff_ms = options_.poll_ms;
    if (*got) {
      RunAttempt(*store, claim);
      continue;
    }
    if (DrainDone()) break;
    if (options_.exit_when_idle) {
      auto idle = IdleDone(*store);
      if (!idle.IsOk()) {
        store_error(idle.GetStatus(), "checking for work");
        continue;
      }
      if (*idle) break;
    }
    SleepMs(options_.poll_ms);
  }
  MutexLock l(mu_);
  --slots_running_;
  slots_changed_.SignalAll();
}

Result<bool> Worker::TryClaim(store::MetadataStore& store, Claim* out) {
  MutexLock l(mu_);
  if (done_ || stopping_.load() || (options_.max_jobs > 0 && claims_ >= options_.max_jobs)) return false;
  const int64_t now = NowMs();
  if (!breaker_fresh_ || now - breaker_refreshed_ms_ >= options_.poll_ms) {
    const bool was_open = breaker_.IsOpen();
    KESTREL_RETURN_IF_ERROR(RefreshBreaker(breaker_, store));
    breaker_fresh_ = true;
    breaker_refreshed_ms_ = now;
    if (breaker_.IsOpen() != was_open) {
      spdlog::warn("worker {}: circuit breaker {}{}", options_.id, breaker_.IsOpen() ? "open: " : "closed",
                   breaker_.Reason());
    }
  }
  if (DiskTooFull(store, now)) return false;
  KESTREL_ASSIGN_OR_RETURN(bool held, HeldBack(store, now));
  if (held) return false;
  store::ClaimRequest req;
  req.worker = options_.id;
  req.host = options_.host;
  req.devices = pool_.FreeOffers();
  req.now_ms = now;
  req.lease_ms = options_.lease_ms;
  req.allow_retries = !breaker_.IsOpen();
  req.fingerprint = options_.fingerprint_hash;
  if (req.devices.empty()) return false;
  auto c = store.ClaimJob(req);
  if (!c.IsOk()) {
    if (c.GetStatus().Code() == StatusCode::kNotFound) return false;
    return c.GetStatus();
  }
  out->job = std::move(*c);
  out->token = pool_.Acquire(out->job.device, out->job.job.spec.device_memory_mb);
  ++claims_;
  ++busy_;
  ++counters_.claimed;
  return true;
}

bool Worker::DiskTooFull(store::MetadataStore& store, int64_t now_ms) {
  if (options_.min_free_bytes <= 0) return false;
  auto space = options_.disk_space ? options_.disk_space()
                                   : StatDiskSpace(options_.home.empty() ? "." : options_.home);
  if (!space.IsOk()) {
    // Unknown free space: keep the last state (a probe error is no reason
    // to stop or to start claiming).
    if (!disk_probe_failing_) {
      spdlog::warn("worker {}: cannot measure free disk space: {}", options_.id,
                   space.GetStatus().ToString());
    }
    disk_probe_failing_ = true;
    return low_disk_;
  }
  disk_probe_failing_ = false;
  last_disk_ = *space;
  const bool low = space->free_bytes < options_.min_free_bytes;
  if (low != low_disk_) {
    low_disk_ = low;
    low_disk_unpublished_ = true;
    const std::string where = options_.home.empty() ? "." : options_.home;
    if (low) {
      spdlog::warn(
          "worker {}: low disk: {} bytes free on the filesystem of {} (watermark {}): not claiming new "
          "jobs until space is freed (kestrel du, kestrel gc)",
          options_.id, space->free_bytes, where, options_.min_free_bytes);
    } else {
      spdlog::info(
          "worker {}: disk space recovered: {} bytes free on the filesystem of {} (watermark {}): "
          "claiming again",
          options_.id, space->free_bytes, where, options_.min_free_bytes);
    }
  }
  if (low_disk_unpublished_) {
    const nlohmann::json v = {{"low", low_disk_},
                              {"free_bytes", space->free_bytes},
                              {"min_free_bytes", options_.min_free_bytes},
                              {"changed_ms", now_ms}};
    Status s = store.PutSetting(kLowDiskSettingPrefix + options_.id, v.dump(), now_ms);
    if (s.IsOk()) {
      low_disk_unpublished_ = false;
    } else {
      spdlog::warn("worker {}: publishing the low-disk state failed (will retry): {}", options_.id,
                   s.ToString());
    }
  }
  return low_disk_;
}

Result<bool> Worker::IdleDone(store::MetadataStore& store) {
  MutexLock l(mu_);
  if (done_) return true;
  if (busy_ > 0) return false;
  // Nothing is running here, so every attempt this worker ran is committed:
  // a job it failed is visible below as failed_retryable.
  KESTREL_RETURN_IF_ERROR(RefreshBreaker(breaker_, store));
  breaker_fresh_ = true;
  breaker_refreshed_ms_ = NowMs();
  KESTREL_ASSIGN_OR_RETURN(bool held, HeldBack(store, NowMs()));
  if (held) {
    // Quarantined (a drain ends in DrainDone): nothing here may run.
    spdlog::info("worker {}: idle, {}; exiting", options_.id,
                 control_.quarantined ? "the host is quarantined" : "draining");
    done_ = true;
    return true;
  }
  store::JobFilter f;
  f.states = {store::JobState::kQueued};
  if (!breaker_.IsOpen()) f.states.push_back(store::JobState::kFailedRetryable);
  f.limit = 100000;
  KESTREL_ASSIGN_OR_RETURN(auto waiting, store.ListJobs(f));
  for (const auto& j : waiting) {
    if (!Fits(j, options_.devices)) continue;
    KESTREL_ASSIGN_OR_RETURN(bool excluded, ExcludedHere(store, j));
    if (!excluded) return false;
  }
  spdlog::info("worker {}: idle, nothing left that fits this worker; exiting", options_.id);
  done_ = true;
  return true;
}

void Worker::RunAttempt(store::MetadataStore& store, const Claim& claim) {
  const store::JobRecord& job = claim.job.job;
  const std::string ids = std::to_string(job.id), attempt = std::to_string(job.attempt);
  const auto share =
      claim.job.device.kind == "cpu" ? cpu_shares_.find(claim.job.device.index) : cpu_shares_.end();
  spdlog::info("worker {}: job {} attempt {} on {}:{}{}", options_.id, ids, attempt, claim.job.device.kind,
               claim.job.device.index,
               share == cpu_shares_.end() ? "" : " (CPUs " + FormatCpuList(share->second) + ")");
  store::AttemptOutcome outcome;
  const Result<std::string> kind = options_.kinds.command(job);
  if (claim.token < 0) {
    // Cannot happen while claims hold mu_ (the offer was computed under it);
    // hand the job back rather than oversubscribe a device.
    outcome = FailedOutcome(FailureReason::kWorkerLost, "device accounting refused the placement on " +
                                                            claim.job.device.kind + ":" +
                                                            std::to_string(claim.job.device.index));
  } else if (!kind.IsOk()) {
    // A kind this worker does not know (a newer kestrel submitted it): no
    // child could run it.
    outcome = FailedOutcome(FailureReason::kBadConfig, kind.GetStatus().Message());
  } else {
    ProcessSpec spec;
    spec.argv = options_.child_command;
    // The kind's command: `train --job ID --attempt N`, `val --job ...`, `export --job ...`.
    spec.argv.push_back(*kind);
    spec.argv.push_back("--job");
    spec.argv.push_back(ids);
    spec.argv.push_back("--attempt");
    spec.argv.push_back(attempt);
    if (share != cpu_shares_.end()) spec.cpus = share->second;
    if (claim.job.device.kind == "gpu") {
      spec.env.push_back("CUDA_VISIBLE_DEVICES=" + std::to_string(claim.job.device.index));
    }
    if (!options_.home.empty()) {
      const std::string dir = JoinPath(JoinPath(options_.home, "jobs"), ids);
      Status s = env_.CreateDirs(dir);
      if (s.IsOk()) {
        spec.log_path = JoinPath(dir, "attempt-" + attempt + ".log");
      } else {
        spdlog::warn("worker {}: no log for job {}: {}", options_.id, ids, s.ToString());
      }
    }
    SupervisorOptions so = options_.supervisor;
    so.wall_clock_limit_ms = job.spec.wall_clock_limit_ms;
    bool stopped_by_worker = false;
    // The attempt row names the child's pid as soon as it runs (the host came
    // with the claim), so a lost worker's attempt still says which process
    // it was. Only a record: a store error here does not stop the child.
    int64_t tracked_pid = 0;
    auto started = [&](int64_t pid) {
      if (options_.usage_sample_ms > 0) {
        Track(pid, {job.id, job.attempt, claim.job.device.kind == "gpu" ? claim.job.device.index : -1,
                    std::chrono::steady_clock::now()});
        tracked_pid = pid;
      }
      Status s = store.RecordAttemptPid(job.id, job.attempt, options_.id, pid);
      if (!s.IsOk()) {
        spdlog::warn("worker {}: job {} attempt {}: recording child pid {} failed: {}", options_.id, ids,
                     attempt, pid, s.ToString());
      }
    };
    AttemptRunner runner(runner_, start_mu_, stopping_, env_, so.grace_ms, stopped_by_worker, started);
    Supervisor sup(runner, env_, so);
    int64_t lease_until = NowMs() + options_.lease_ms;
    auto heartbeat = [&]() -> Status {
      const int64_t now = NowMs();
      Status s = store.RenewLease(job.id, job.attempt, options_.id, now, options_.lease_ms);
      if (s.IsOk()) {
        lease_until = now + options_.lease_ms;
        return s;
      }
      if (IsFenced(s)) {
        spdlog::warn("worker {}: job {} attempt {}: {}; stopping the child", options_.id, ids, attempt,
                     s.Message());
        return s;
      }
      {
        MutexLock l(mu_);
        ++counters_.store_errors;
      }
      if (now < lease_until) {
        spdlog::warn(
            "worker {}: job {} attempt {}: renewing the lease failed ({}); the lease holds for {} ms more",
            options_.id, ids, attempt, s.ToString(), lease_until - now);
        return {};
      }
      spdlog::warn(
          "worker {}: job {} attempt {}: lease expired while the store was unreachable; stopping the child",
          options_.id, ids, attempt);
      return s;
    };
    auto run = sup.Run(spec, heartbeat);
    if (tracked_pid > 0) Untrack(tracked_pid);
    if (!run.IsOk()) {
      outcome =
          FailedOutcome(FailureReason::kWorkerLost, "cannot start the child: " + run.GetStatus().ToString());
    } else {
      outcome = GateOutcome(*run, job, options_.kinds);
      if (!outcome.success && outcome.reason == FailureReason::kEnvironment && !spec.log_path.empty()) {
        // The loader's own words ("error while loading shared libraries:
        // libX.so ...") are the finding an operator needs: the log's last line.
        if (auto log = env_.ReadFile(spec.log_path, uint64_t{64} * 1024); log.IsOk()) {
          std::string text = *log;
          while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
          const size_t nl = text.rfind('\n');
          const std::string last = nl == std::string::npos ? text : text.substr(nl + 1);
          if (!last.empty()) outcome.message += "; log: " + last.substr(0, 300);
        }
      }
      if (stopped_by_worker && !outcome.success) {
        store::AttemptOutcome stopped = FailedOutcome(
            FailureReason::kWorkerStopped, "worker " + options_.id + " stopped; " + outcome.message);
        stopped.exit_code = outcome.exit_code;
        stopped.signal = outcome.signal;
        stopped.pid = outcome.pid;
        stopped.stage = outcome.stage;
        outcome = std::move(stopped);
      }
    }
  }
  Complete(store, job, outcome);
  if (!outcome.success && outcome.reason == FailureReason::kEnvironment) {
    NoteEnvironmentFailure(store, "job " + ids + " attempt " + attempt + ": " + outcome.message);
  }
  MutexLock l(mu_);
  pool_.Release(claim.token);
  --busy_;
}

void Worker::Complete(store::MetadataStore& store, const store::JobRecord& job,
                      const store::AttemptOutcome& outcome) {
  int64_t backoff_ms = options_.poll_ms;
  for (int tries = 1;; ++tries) {
    // The store call, the log line and the hook run without mu_: only the
    // counters are shared.
    auto r = store.CompleteAttempt(job.id, job.attempt, options_.id, outcome, NowMs());
    if (r.IsOk()) {
      {
        MutexLock l(mu_);
        if (outcome.success) {
          ++counters_.succeeded;
        } else {
          ++counters_.failed;
          if (outcome.reason == FailureReason::kWorkerStopped) ++counters_.stopped;
        }
      }
      spdlog::info("worker {}: job {} attempt {} -> {}{}{}", options_.id, job.id, job.attempt,
                   store::JobStateName(r->state),
                   outcome.success ? "" : std::string(" (") + FailureReasonToken(outcome.reason) + ") ",
                   outcome.success ? "" : outcome.message);
      if (r->state == store::JobState::kSucceeded && options_.on_job_succeeded) {
        options_.on_job_succeeded(store, *r, NowMs());  // talks to the store and the disk
      }
      return;
    }
    const bool fenced = IsFenced(r.GetStatus());
    {
      MutexLock l(mu_);
      ++(fenced ? counters_.fenced : counters_.store_errors);
    }
    if (fenced) {
      spdlog::warn("worker {}: job {} attempt {}: result not committed: {}", options_.id, job.id, job.attempt,
                   r.GetStatus().Message());
      return;
    }
    if (stopping_.load() && tries >= 3) {
      spdlog::warn(
          "worker {}: job {} attempt {}: giving up completing while stopping ({}); its lease will expire",
          options_.id, job.id, job.attempt, r.GetStatus().ToString());
      return;
    }
    spdlog::warn("worker {}: completing job {} attempt {} failed, retrying in {} ms: {}", options_.id, job.id,
                 job.attempt, backoff_ms, r.GetStatus().ToString());
    env_.SleepMicros(backoff_ms * 1000);
    backoff_ms = std::min(backoff_ms * 2, std::max(options_.store_retry_max_ms, options_.poll_ms));
  }
}

store::AttemptOutcome GateOutcome(const SupervisedRun& run, const store::JobRecord& job,
                                  const AttemptKinds& kinds) {
  store::AttemptOutcome o = ToOutcome(run);
  if (!o.success) return o;
  const Status verdict = kinds.gate(job, run.result_json);
  if (verdict.IsOk()) return o;
  store::AttemptOutcome g = FailedOutcome(FailureReason::kQualityGate, "quality gate: " + verdict.Message());
  g.exit_code = o.exit_code;
  g.signal = o.signal;
  g.pid = o.pid;
  g.stage = store::FailureStage::kEval;
  return g;
}

}  // namespace kestrel::jobs
