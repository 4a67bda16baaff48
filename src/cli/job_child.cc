#include "cli/job_child.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>

#include "core/env.h"
#include "core/json.h"
#include "core/parse.h"

namespace kestrel::cli {

ProgressPipe::ProgressPipe() {
  const char* v = std::getenv("KESTREL_PROGRESS_FD");
  if (v != nullptr && *v != '\0') {
    auto fd = ParseInt64(v, {"", 0, "KESTREL_PROGRESS_FD"}, 0, std::numeric_limits<int>::max());
    fd_ = fd.IsOk() ? static_cast<int>(*fd) : -1;
  }
  if (fd_ >= 0) signal(SIGPIPE, SIG_IGN);
}

void ProgressPipe::Line(const std::string& line) {
  if (fd_ < 0) return;
  std::string buf = line + "\n";
  const char* p = buf.data();
  size_t left = buf.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

bool JobChild::Begin(Stores* stores, store::JobRecord* job, int* exit_code) {
  progress_.Line("stage=data job=" + std::to_string(job_id_) + " attempt=" + std::to_string(attempt_));
  home_ = std::filesystem::absolute(ctx_.home).lexically_normal().string();
  Context abs_ctx = ctx_;
  abs_ctx.home = home_;
  auto s = OpenStores(abs_ctx);
  if (!s.IsOk()) {
    *exit_code = Fail(FailureReason::kStoreUnavailable, s.GetStatus());
    return false;
  }
  *stores = std::move(s).Value();
  auto j = stores->meta->GetJob(job_id_);
  if (!j.IsOk()) {
    *exit_code = Fail(j.GetStatus().Code() == StatusCode::kNotFound ? FailureReason::kBadConfig
                                                                    : FailureReason::kStoreUnavailable,
                      j.GetStatus());
    return false;
  }
  if (j->attempt != attempt_ || j->state != store::JobState::kRunning) {
    *exit_code = Fail(
        FailureReason::kLeaseLost,
        Status::Aborted("attempt " + std::to_string(attempt_) + " is not current (job is " +
                        store::JobStateName(j->state) + " at attempt " + std::to_string(j->attempt) + ")"));
    return false;
  }
  *job = std::move(j).Value();
  return true;
}

int JobChild::Fail(FailureReason failure, const Status& why) {
  const int code = ExitCodeFor(failure);
  const std::string reason = FailureReasonToken(failure);
  progress_.Line("reason=" + reason);
  std::cerr << "error: job " << job_id_ << " attempt " << attempt_ << ": " << why.ToString() << std::endl;
  if (ctx_.json) {
    const auto& w = why.Where();
    PrintJsonDocument({{"ok", false},
                       {"job_id", job_id_},
                       {"attempt", attempt_},
                       {"reason", reason},
                       {"error",
                        {{"code", code == kExitUsage ? "usage" : StatusCodeName(why.Code())},
                         {"message", why.Message()},
                         {"file", w.file},
                         {"line", w.line},
                         {"field", w.field}}}});
  }
  return code;
}

int JobChild::Succeed(const nlohmann::json& result) {
  progress_.Line("result " + DumpJson(result));
  if (ctx_.json) PrintJsonDocument({{"ok", true}, {"job_id", job_id_}, {"result", result}});
  return kTrainExitOk;
}

std::string JobChild::JobDir() const { return JoinPath(JoinPath(home_, "jobs"), std::to_string(job_id_)); }

std::string JobChild::AttemptDir() const { return JoinPath(JobDir(), "attempt-" + std::to_string(attempt_)); }

}  // namespace kestrel::cli
