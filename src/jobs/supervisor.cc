#include "jobs/supervisor.h"

#include <csignal>
#include <sstream>

#include "jobs/retry.h"

namespace kestrel::jobs {

Status ValidateSupervisorOptions(const SupervisorOptions& o) {
  auto positive = [](int64_t v, const char* field) -> Status {
    if (v <= 0) return Status::InvalidArgument(std::string(field) + " must be > 0 ms", {"", 0, field});
    return {};
  };
  KESTREL_RETURN_IF_ERROR(positive(o.heartbeat_ms, "heartbeat_ms"));
  KESTREL_RETURN_IF_ERROR(positive(o.hang_timeout_ms, "hang_timeout_ms"));
  KESTREL_RETURN_IF_ERROR(positive(o.poll_ms, "poll_ms"));
  if (o.grace_ms < 0) return Status::InvalidArgument("grace_ms must be >= 0", {"", 0, "grace_ms"});
  if (o.wall_clock_limit_ms < 0) {
    return Status::InvalidArgument("wall_clock_limit_ms must be >= 0", {"", 0, "wall_clock_limit_ms"});
  }
  return {};
}

namespace {

void ParseProgress(const std::string& line, SupervisedRun& run) {
  run.last_progress = line;
  if (line.rfind("result ", 0) == 0) {
    run.result_json = line.substr(7);
    return;
  }
  std::istringstream in(line);
  std::string tok;
  while (in >> tok) {
    if (tok.rfind("stage=", 0) == 0) {
      store::ParseFailureStage(tok.substr(6), &run.stage);
    } else if (tok.rfind("reason=", 0) == 0) {
      run.child_reason = tok.substr(7);
    }
  }
}

}  // namespace

Result<SupervisedRun> Supervisor::Run(const ProcessSpec& spec, const std::function<Status()>& heartbeat) {
  KESTREL_RETURN_IF_ERROR(ValidateSupervisorOptions(options_));
  KESTREL_ASSIGN_OR_RETURN(auto child, runner_.Start(spec));
  SupervisedRun run;
  run.pid = child->Pid();
  auto now_ms = [&] { return env_.NowMicros() / 1000; };
  const int64_t start = now_ms();
  int64_t last_progress = start;
  int64_t next_heartbeat = start + options_.heartbeat_ms;
  int64_t term_at = -1;
  while (true) {
    for (const auto& line : child->ReadProgress()) {
      ++run.progress_lines;
      last_progress = now_ms();
      ParseProgress(line, run);
    }
    if (auto e = child->Poll()) {
      run.exit = *e;
      if (run.end.empty()) run.end = e->signal != 0 ? "signaled" : "exited";
      break;
    }
    int64_t now = now_ms();
    if (term_at < 0) {
      std::string why;
      if (options_.wall_clock_limit_ms > 0 && now - start >= options_.wall_clock_limit_ms) {
        why = "timeout";
      } else if (now - last_progress >= options_.hang_timeout_ms) {
        why = "hung";
      } else if (now >= next_heartbeat) {
        next_heartbeat += options_.heartbeat_ms;
        if (heartbeat && !heartbeat().IsOk()) why = "lease_lost";
      }
      if (!why.empty()) {
        run.end = why;
        term_at = now;
        child->Signal(SIGTERM);
        // A SIGSTOPped (hung) child cannot act on SIGTERM until continued.
        child->Signal(SIGCONT);
        continue;  // look at the child again before sleeping
      }
    } else if (!run.sigkill_needed && now - term_at >= options_.grace_ms) {
      run.sigkill_needed = true;
      child->Signal(SIGKILL);
      continue;
    }
    env_.SleepMicros(options_.poll_ms * 1000);
  }
  run.duration_ms = now_ms() - start;
  return run;
}

store::AttemptOutcome ToOutcome(const SupervisedRun& run) {
  store::AttemptOutcome o;
  o.pid = run.pid;
  o.exit_code = run.exit.exit_code;
  o.signal = run.exit.signal;
  o.stage = run.stage;
  bool by_itself = run.end == "exited" || run.end == "signaled";
  if (by_itself && run.exit.signal == 0 && run.exit.exit_code == 0) {
    o.success = true;
    o.failure_class = store::FailureClass::kNone;
    o.result_json = run.result_json.empty() ? "{}" : run.result_json;
    return o;
  }
  // The supervisor's own verdict wins over what the child said; otherwise the
  // child's reason, else the exit code / signal.
  std::string reason = by_itself ? run.child_reason : run.end;
  Classification c = ClassifyFailure({run.exit.exit_code, run.exit.signal, run.stage, reason});
  o.failure_class = c.failure_class;
  o.infrastructure = c.infrastructure;
  o.reason = c.reason;
  std::ostringstream msg;
  if (run.exit.signal != 0) {
    msg << "child " << run.pid << " killed by signal " << run.exit.signal;
  } else {
    msg << "child " << run.pid << " exited with code " << run.exit.exit_code;
  }
  msg << " after " << run.duration_ms << " ms (" << run.end << ")";
  if (!run.last_progress.empty()) msg << "; last progress: " << run.last_progress;
  // Stored as error: keep the child's own word where a reader can find it.
  if (!reason.empty() && !ParseFailureReason(reason).has_value()) {
    msg << "; reason '" << reason << "' is unknown to this worker, recorded as "
        << FailureReasonToken(FailureReason::kError);
  }
  o.message = msg.str();
  return o;
}

}  // namespace kestrel::jobs
