// `kestrel serve --workers N` (docs/server.md): N local `kestrel worker`
// child processes on the server's store, started before the server and
// stopped after it. Each child is a jobs::PosixProcessRunner child: its own
// process group, killed by the kernel and a guard process if serve dies, so
// no worker outlives serve. A worker that exits (crash, kill, OOM) while
// serve runs is started again by Supervise() with backoff.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "core/status.h"
#include "jobs/process_runner.h"

namespace kestrel::cli {

class LocalWorkers {
 public:
  // Starts `n` (>= 1) workers: `kestrel --home HOME --log-level L worker`,
  // stdout and stderr appended to HOME/logs/serve-worker-<k>.log. (A child
  // starts with no signal blocked, so Supervise may restart one after serve
  // blocked SIGTERM for sigwait.)
  static Result<std::unique_ptr<LocalWorkers>> Start(const Context& ctx, int n, std::ostream& log);
  // Stop(stop_timeout_ms).
  ~LocalWorkers();
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;

  // Called with the worker's number (1-based) after each restart (serve
  // counts them in /metrics).
  void OnRestart(std::function<void(int)> f) { on_restart_ = std::move(f); }

  // Reaps every worker that exited since the last call, logs how, and
  // schedules its restart: after 1 s, then 2 s, 4 s ... at most 30 s for a
  // worker that keeps exiting; a worker that ran kHealthyMs before it exited
  // starts again after 1 s. Starts those whose time came. Call it often
  // (serve: every 200 ms) until Stop(); it does nothing after Stop().
  void Supervise();

  // SIGTERM to every worker (each checkpoints its jobs and hands their
  // leases back, docs/jobs.md "Stop"), waits for them to exit, SIGKILLs
  // what is left after `timeout_ms`, reaps all. Ends the restarts.
  // Idempotent.
  void Stop(int64_t timeout_ms);
  // The running workers' pids (a worker waiting for its restart has none).
  std::vector<int64_t> Pids() const;
  // Restarts of worker `k` (1-based) so far.
  int64_t Restarts(int k) const;
  int Count() const { return static_cast<int>(slots_.size()); }

  // Longer than a worker's default --grace-s (10 s) plus completing its
  // attempts in the store.
  static constexpr int64_t kStopTimeoutMs = 30'000;
  static constexpr int64_t kFirstBackoffMs = 1'000;
  static constexpr int64_t kMaxBackoffMs = 30'000;
  // A worker that ran this long before it exited restarts after
  // kFirstBackoffMs again.
  static constexpr int64_t kHealthyMs = 60'000;

 private:
  using Clock = std::chrono::steady_clock;
  struct Slot {
    std::unique_ptr<jobs::ChildProcess> child;  // null while waiting for a restart
    std::string log;
    Clock::time_point started;
    Clock::time_point restart_at;  // when child is null
    int64_t backoff_ms = kFirstBackoffMs;
    int64_t restarts = 0;
  };

  explicit LocalWorkers(std::ostream& log) : log_(log) {}
  Status StartOne(size_t i);
  void ReportExit(size_t i, const jobs::ExitInfo& e);

  std::ostream& log_;
  std::vector<std::string> argv_;
  // Worker i's CPUs (core/cpu_budget.h SplitCpus of this process's affinity):
  // with n > 1 each worker and its trainers are pinned to their own share,
  // so n trainings do not all spread over every core; empty = not pinned.
  std::vector<std::vector<int>> cpu_shares_;
  jobs::PosixProcessRunner runner_;
  std::vector<Slot> slots_;
  std::function<void(int)> on_restart_;
  bool stopped_ = false;
};

}  // namespace kestrel::cli
