#include "cli/serve_workers.h"

#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <thread>

#include "core/cpu_budget.h"
#include "core/env.h"

namespace kestrel::cli {
namespace {

std::string ExitText(const jobs::ExitInfo& e) {
  return e.signal != 0 ? "killed by signal " + std::to_string(e.signal)
                       : "exited " + std::to_string(e.exit_code);
}

}  // namespace

Result<std::unique_ptr<LocalWorkers>> LocalWorkers::Start(const Context& ctx, int n, std::ostream& log) {
#ifndef KESTREL_WITH_TORCH
  return Status::FailedPrecondition(
      "--workers: this kestrel was built without LibTorch and its workers could not train; run `kestrel "
      "serve --workers` from a build with it",
      {"command line", 0, "workers"});
#endif
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::IoError("--workers: cannot find this executable: " + ec.message());
  const std::string home = std::filesystem::absolute(ctx.home).lexically_normal().string();
  const std::string log_dir = JoinPath(home, "logs");
  KESTREL_RETURN_IF_ERROR(Env::Default().CreateDirs(log_dir));
  std::unique_ptr<LocalWorkers> w(new LocalWorkers(log));
  w->argv_ = {exe.string(), "--home", home, "--log-level", ctx.log_level, "worker"};
  w->slots_.resize(static_cast<size_t>(n));
  if (n > 1) w->cpu_shares_ = SplitCpus(ProcessCpuBudget().affinity, n);
  for (int k = 1; k <= n; ++k) {
    auto& slot = w->slots_[static_cast<size_t>(k - 1)];
    slot.log = JoinPath(log_dir, "serve-worker-" + std::to_string(k) + ".log");
    // On error the destructor stops the ones already started.
    KESTREL_RETURN_IF_ERROR(w->StartOne(static_cast<size_t>(k - 1)));
  }
  return w;
}

Status LocalWorkers::StartOne(size_t i) {
  Slot& slot = slots_[i];
  jobs::ProcessSpec spec;
  spec.argv = argv_;
  spec.log_path = slot.log;
  if (i < cpu_shares_.size()) spec.cpus = cpu_shares_[i];
  KESTREL_ASSIGN_OR_RETURN(slot.child, runner_.Start(spec));
  slot.started = Clock::now();
  log_ << "kestrel serve: worker " << i + 1 << " started (pid " << slot.child->Pid() << ", log " << slot.log
       << (spec.cpus.empty() ? "" : ", CPUs " + FormatCpuList(spec.cpus)) << ")" << std::endl;
  return {};
}

LocalWorkers::~LocalWorkers() { Stop(kStopTimeoutMs); }

std::vector<int64_t> LocalWorkers::Pids() const {
  std::vector<int64_t> out;
  for (const auto& s : slots_) {
    if (s.child) out.push_back(s.child->Pid());
  }
  return out;
}

int64_t LocalWorkers::Restarts(int k) const {
  return k >= 1 && k <= Count() ? slots_[static_cast<size_t>(k - 1)].restarts : 0;
}

void LocalWorkers::ReportExit(size_t i, const jobs::ExitInfo& e) {
  log_ << "kestrel serve: worker " << i + 1 << " (pid " << slots_[i].child->Pid() << ") " << ExitText(e)
       << std::endl;
}

void LocalWorkers::Supervise() {
  if (stopped_) return;
  const auto now = Clock::now();
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (slot.child) {
      auto e = slot.child->Poll();
      if (!e) continue;
      const auto ran_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - slot.started).count();
      if (ran_ms >= kHealthyMs) slot.backoff_ms = kFirstBackoffMs;
      log_ << "kestrel serve: worker " << i + 1 << " (pid " << slot.child->Pid() << ") " << ExitText(*e)
           << " after " << ran_ms / 1000 << " s; restarting it in " << slot.backoff_ms / 1000 << " s (log "
           << slot.log << ")" << std::endl;
      // Destroying it kills what is left of its process group (a trainer
      // it started dies with it anyway: PR_SET_PDEATHSIG and its guard).
      slot.child.reset();
      slot.restart_at = now + std::chrono::milliseconds(slot.backoff_ms);
      slot.backoff_ms = std::min(slot.backoff_ms * 2, kMaxBackoffMs);
      continue;
    }
    if (now < slot.restart_at) continue;
    Status s = StartOne(i);
    if (!s.IsOk()) {
      log_ << "kestrel serve: restarting worker " << i + 1 << " failed, next try in "
           << slot.backoff_ms / 1000 << " s: " << s.ToString() << std::endl;
      slot.restart_at = now + std::chrono::milliseconds(slot.backoff_ms);
      slot.backoff_ms = std::min(slot.backoff_ms * 2, kMaxBackoffMs);
      continue;
    }
    ++slot.restarts;
    log_ << "kestrel serve: worker " << i + 1 << " restarted (restart " << slot.restarts << ")" << std::endl;
    if (on_restart_) on_restart_(static_cast<int>(i + 1));
  }
}

void LocalWorkers::Stop(int64_t timeout_ms) {
  if (stopped_) return;
  stopped_ = true;
  std::vector<bool> done(slots_.size(), false);
  auto report = [&](size_t i, const jobs::ExitInfo& e) {
    done[i] = true;
    ReportExit(i, e);
  };
  // A worker that already ended (crashed, or exited on its own) is reported
  // too, so its log is looked at; one waiting for its restart is not started.
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].child) {
      done[i] = true;
      continue;
    }
    if (auto e = slots_[i].child->Poll()) {
      report(i, *e);
      continue;
    }
    slots_[i].child->Signal(SIGTERM);
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (done[i]) continue;
      if (auto e = slots_[i].child->Poll()) {
        report(i, *e);
      } else {
        all = false;
      }
    }
    if (all) break;
    if (Clock::now() >= deadline) {
      for (size_t i = 0; i < slots_.size(); ++i) {
        if (done[i]) continue;
        log_ << "kestrel serve: worker " << i + 1 << " (pid " << slots_[i].child->Pid()
             << ") did not stop within " << timeout_ms / 1000 << " s: SIGKILL (log " << slots_[i].log << ")"
             << std::endl;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Destroying a child that still runs SIGKILLs its group and reaps it.
  slots_.clear();
}

}  // namespace kestrel::cli
