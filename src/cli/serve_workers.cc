#include "cli/serve_workers.h"

#include <signal.h>

#include <chrono>
#include <filesystem>
#include <system_error>
#include <thread>

#include "core/env.h"

namespace kestrel::cli {

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
  for (int k = 1; k <= n; ++k) {
    jobs::ProcessSpec spec;
    spec.argv = {exe.string(), "--home", home, "--log-level", ctx.log_level, "worker"};
    spec.log_path = JoinPath(log_dir, "serve-worker-" + std::to_string(k) + ".log");
    KESTREL_ASSIGN_OR_RETURN(auto child, w->runner_.Start(spec));  // on error the others are stopped
    log << "kestrel serve: worker " << k << " started (pid " << child->Pid() << ", log " << spec.log_path
        << ")" << std::endl;
    w->children_.push_back(std::move(child));
    w->logs_.push_back(spec.log_path);
  }
  return w;
}

LocalWorkers::~LocalWorkers() { Stop(kStopTimeoutMs); }

std::vector<int64_t> LocalWorkers::Pids() const {
  std::vector<int64_t> out;
  for (const auto& c : children_) out.push_back(c->Pid());
  return out;
}

void LocalWorkers::Stop(int64_t timeout_ms) {
  if (stopped_) return;
  stopped_ = true;
  std::vector<bool> done(children_.size(), false);
  auto report = [&](size_t i, const jobs::ExitInfo& e) {
    done[i] = true;
    log_ << "kestrel serve: worker " << i + 1 << " (pid " << children_[i]->Pid() << ") "
         << (e.signal != 0 ? "killed by signal " + std::to_string(e.signal)
                           : "exited " + std::to_string(e.exit_code))
         << std::endl;
  };
  // A worker that already ended (crashed, or exited on its own) is reported
  // too, so its log is looked at.
  for (size_t i = 0; i < children_.size(); ++i) {
    if (auto e = children_[i]->Poll()) {
      report(i, *e);
      continue;
    }
    children_[i]->Signal(SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < children_.size(); ++i) {
      if (done[i]) continue;
      if (auto e = children_[i]->Poll()) {
        report(i, *e);
      } else {
        all = false;
      }
    }
    if (all) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (size_t i = 0; i < children_.size(); ++i) {
        if (done[i]) continue;
        log_ << "kestrel serve: worker " << i + 1 << " (pid " << children_[i]->Pid()
             << ") did not stop within " << timeout_ms / 1000 << " s: SIGKILL (log " << logs_[i] << ")"
             << std::endl;
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Destroying a child that still runs SIGKILLs its group and reaps it.
  children_.clear();
}

}  // namespace kestrel::cli
