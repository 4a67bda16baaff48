// `kestrel serve --workers N` (docs/server.md): N local `kestrel worker`
// child processes on the server's store, started before the server and
// stopped after it. Each child is a jobs::PosixProcessRunner child: its own
// process group, killed by the kernel and a guard process if serve dies, so
// no worker outlives serve.
#pragma once

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
  // stdout and stderr appended to HOME/logs/serve-worker-<k>.log. Start
  // them before blocking signals: a child inherits the signal mask.
  static Result<std::unique_ptr<LocalWorkers>> Start(const Context& ctx, int n, std::ostream& log);
  // Stop(stop_timeout_ms).
  ~LocalWorkers();
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;

  // SIGTERM to every worker (each checkpoints its jobs and hands their
  // leases back, docs/jobs.md "Stop"), waits for them to exit, SIGKILLs
  // what is left after `timeout_ms`, reaps all. Idempotent.
  void Stop(int64_t timeout_ms);
  std::vector<int64_t> Pids() const;

  // Longer than a worker's default --grace-s (10 s) plus completing its
  // attempts in the store.
  static constexpr int64_t kStopTimeoutMs = 30'000;

 private:
  LocalWorkers(std::ostream& log) : log_(log) {}
  std::ostream& log_;
  jobs::PosixProcessRunner runner_;
  std::vector<std::unique_ptr<jobs::ChildProcess>> children_;
  std::vector<std::string> logs_;
  bool stopped_ = false;
};

}  // namespace kestrel::cli
