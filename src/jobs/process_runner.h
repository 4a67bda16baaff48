// ProcessRunner: how a worker starts the child that runs one attempt. Two
// implementations: PosixProcessRunner (fork/exec in its own process group)
// and FakeProcessRunner (scripted children on a fake clock, for exact tests).
//
// Progress protocol: the child gets a pipe on fd 3 and KESTREL_PROGRESS_FD=3
// in its environment, and writes one line per progress report, e.g.
//   "stage=train epoch=3 iter=120 mem_mb=812"
//   "reason=diverged"          (why it is about to fail, optional)
//   "result {...json...}"     (what to commit on success)
// Any line counts as a sign of life for hang detection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::jobs {

struct ProcessSpec {
  std::vector<std::string> argv;  // argv[0] is an absolute path (no PATH search)
  std::vector<std::string> env;   // extra "KEY=VALUE" on top of the parent's
  std::string log_path;           // stdout+stderr appended here; "" = /dev/null
  // CPUs the child is pinned to before exec (sched_setaffinity; its threads
  // inherit it, and core/cpu_budget.h sizes its pools from it); empty = the
  // parent's affinity. A worker's CPU slots each get their own share.
  std::vector<int> cpus;
};

struct ExitInfo {
  int exit_code = 0;  // when signal == 0
  int signal = 0;     // terminating signal, 0 when the child exited
};

class ChildProcess {
 public:
  virtual ~ChildProcess() = default;
  virtual int64_t Pid() const = 0;
  // Non-blocking; the exit once the child has ended (and was reaped).
  virtual std::optional<ExitInfo> Poll() = 0;
  // Complete progress lines received since the last call, without '\n'.
  virtual std::vector<std::string> ReadProgress() = 0;
  // Sends `sig` to the child's whole process group.
  virtual void Signal(int sig) = 0;
};

class ProcessRunner {
 public:
  virtual ~ProcessRunner() = default;
  virtual Result<std::unique_ptr<ChildProcess>> Start(const ProcessSpec& spec) = 0;
};

// Real children. Destroying a ChildProcess that still runs SIGKILLs its
// group and reaps it, so a worker never leaks a trainer.
class PosixProcessRunner final : public ProcessRunner {
 public:
  Result<std::unique_ptr<ChildProcess>> Start(const ProcessSpec& spec) override;
};

}  // namespace kestrel::jobs
