// PosixProcessRunner: fork/exec of an attempt's child in its own process
// group, and the two things that make sure no trainer outlives its worker
// (docs/jobs.md "Supervision"):
//
// - The child asks the kernel for SIGKILL when its parent dies
//   (PR_SET_PDEATHSIG) and then checks that its parent is still the process
//   that forked it: a supervisor that died between fork() and prctl() would
//   otherwise leave it running under PID 1 (the race-free pattern).
//   PR_SET_PDEATHSIG fires when the *thread* that forked exits: Start() must
//   be called from a thread that outlives the child (the Worker's slot
//   threads supervise their child to its end on the thread that started it).
// - A guard process per child, forked from the supervisor (no exec: only
//   async-signal-safe calls), blocks reading a pipe whose only write end the
//   supervisor holds. When the supervisor process dies for any reason,
//   SIGKILL included, the kernel closes that end, the read returns, and the
//   guard SIGKILLs the child's whole process group: subprocesses the child
//   started die too, which PDEATHSIG alone (not inherited across fork) would
//   miss. When the child ends normally the supervisor closes the pipe itself
//   and reaps the guard, which kills what the child left in its group.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "core/thread_annotations.h"
#include "jobs/process_runner.h"

extern char** environ;

namespace kestrel::jobs {
namespace {

constexpr int kProgressFd = 3;

// Closes every descriptor from `first` up in a freshly forked child; only
// async-signal-safe calls. `max_fd` was computed before fork.
void CloseFrom(int first, int max_fd) {
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, static_cast<unsigned>(first), ~0U, 0U) == 0) return;
#endif
  for (int fd = first; fd < max_fd; ++fd) ::close(fd);
}

// In the forked guard: ignore the signals a terminal or `kill -TERM` sends to
// the worker's process group (the worker handles them; the guard must stay
// until the worker is really gone), wait for EOF on `fd`, kill `pgid`.
[[noreturn]] void RunGuard(int fd, pid_t pgid, int max_fd) {
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR1, SIGUSR2})
    ::sigaction(sig, &ign, nullptr);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::prctl(PR_SET_NAME, "kestrel-guard", 0, 0, 0);
  if (fd != 0) {
    ::dup2(fd, 0);
    fd = 0;
  }
  CloseFrom(1, max_fd);  // nothing of the worker's (sockets, other guards' pipes) stays open here
  char c;
  while (true) {
    ssize_t n = ::read(fd, &c, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  ::kill(-pgid, SIGKILL);
  ::_exit(0);
}

class PosixChild final : public ChildProcess {
 public:
  PosixChild(pid_t pid, int progress_fd, pid_t guard, int guard_fd)
      : pid_(pid), fd_(progress_fd), guard_(guard), guard_fd_(guard_fd) {}
  ~PosixChild() override {
    if (!exit_) {
      ::kill(-pid_, SIGKILL);
      siginfo_t info{};
      while (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR) {
      }
    }
    // The child is a zombie here (exited, not yet reaped), so its process
    // group id cannot have been reused: killing the group is safe.
    StopGuard();
    ::kill(-pid_, SIGKILL);  // grandchildren left in the group (no guard)
    if (!reaped_) Reap();
    if (fd_ >= 0) ::close(fd_);
  }
  PosixChild(const PosixChild&) = delete;
  PosixChild& operator=(const PosixChild&) = delete;

  int64_t Pid() const override { return pid_; }

  std::optional<ExitInfo> Poll() override {
    if (exit_) return exit_;
    // Look without reaping first: while the child is a zombie its pid (the
    // group id) stays taken, so the guard can kill what is left of the group.
    siginfo_t info{};
    if (::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid != pid_) {
      return std::nullopt;
    }
    StopGuard();
    ExitInfo e = Reap();
    exit_ = e;
    return exit_;
  }

  std::vector<std::string> ReadProgress() override {
    std::vector<std::string> lines;
    if (fd_ < 0) return lines;
    char buf[4096];
    while (true) {
      ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n > 0) {
        partial_.append(buf, static_cast<size_t>(n));
        continue;
      }
      if (n == 0) {  // all writers closed
        ::close(fd_);
        fd_ = -1;
      }
      break;  // EAGAIN or EOF
    }
    size_t start = 0, nl;
    while ((nl = partial_.find('\n', start)) != std::string::npos) {
      lines.push_back(partial_.substr(start, nl - start));
      start = nl + 1;
    }
    partial_.erase(0, start);
    return lines;
  }

  void Signal(int sig) override {
    if (!exit_) ::kill(-pid_, sig);
  }

 private:
  // Closing the pipe wakes the guard: it kills the child's group and exits.
  void StopGuard() {
    if (guard_fd_ >= 0) {
      ::close(guard_fd_);
      guard_fd_ = -1;
    }
    if (guard_ > 0) {
      int st = 0;
      while (::waitpid(guard_, &st, 0) < 0 && errno == EINTR) {
      }
      guard_ = -1;
    }
  }

  ExitInfo Reap() {
    int st = 0;
    pid_t r;
    while ((r = ::waitpid(pid_, &st, 0)) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    ExitInfo e;
    if (r != pid_) return e;
    if (WIFSIGNALED(st)) {
      e.signal = WTERMSIG(st);
    } else {
      e.exit_code = WEXITSTATUS(st);
    }
    return e;
  }

  pid_t pid_;
  int fd_;
  pid_t guard_;
  int guard_fd_;
  bool reaped_ = false;
  std::string partial_;
  std::optional<ExitInfo> exit_;
};

// Serializes Start() within the process: a guard forked while another
// Start() holds a fresh guard pipe would keep that pipe's write end open
// until it closes its descriptors (a moment, but no need for it).
Mutex& StartMutex() {
  static Mutex mu;
  return mu;
}

}  // namespace

Result<std::unique_ptr<ChildProcess>> PosixProcessRunner::Start(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return Status::InvalidArgument("child argv[0] must be an absolute path", {"", 0, "argv"});
  }
  // Everything the children need is built before fork: after fork in a
  // threaded process only async-signal-safe calls are allowed.
  std::vector<std::string> env_strings;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) env_strings.emplace_back(*e);
  for (const auto& e : spec.env) env_strings.push_back(e);
  env_strings.push_back("KESTREL_PROGRESS_FD=" + std::to_string(kProgressFd));
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int c : spec.cpus) {
    if (c < 0 || c >= CPU_SETSIZE)
      return Status::InvalidArgument("CPU id out of range: " + std::to_string(c), {"", 0, "cpus"});
    CPU_SET(c, &cpus);
  }
  const bool pin = !spec.cpus.empty();
  const long open_max = ::sysconf(_SC_OPEN_MAX);
  const int max_fd = open_max > 0 && open_max < 65536 ? static_cast<int>(open_max) : 65536;

  MutexLock lock(StartMutex());
  int log_fd = ::open(spec.log_path.empty() ? "/dev/null" : spec.log_path.c_str(),
                      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0)
    return Status::IoError(std::string("cannot open child log: ") + std::strerror(errno), {spec.log_path});
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    ::close(log_fd);
    return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    ::close(p[0]);
    ::close(p[1]);
    return Status::ResourceExhausted(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    // Die with the supervisor; if it already died (we were re-parented
    // before the prctl took effect), do not start at all.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::getppid() != parent) ::_exit(127);
    // Start with no signal blocked: a parent that waits in sigwait (kestrel
    // serve, restarting a local worker) has SIGTERM blocked, and a child
    // inheriting that mask could never be stopped by it.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // A raw syscall, async-signal-safe; a refusal (CPUs taken offline since
    // the worker started) leaves the parent's affinity, never a failed start.
    if (pin) (void)::sched_setaffinity(0, sizeof(cpus), &cpus);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::dup2(p[1], kProgressFd);  // dup2 clears FD_CLOEXEC on the copy
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, so Signal() works at once
  ::close(log_fd);
  ::close(p[1]);
  ::fcntl(p[0], F_SETFL, ::fcntl(p[0], F_GETFL) | O_NONBLOCK);

  // The guard. Without one (fork failed) the child still dies with us
  // through PDEATHSIG; only its own subprocesses could outlive us.
  pid_t guard = -1;
  int g[2] = {-1, -1};
  if (::pipe2(g, O_CLOEXEC) == 0) {
    guard = ::fork();
    if (guard == 0) RunGuard(g[0], pid, max_fd);
    ::close(g[0]);
    if (guard < 0) {
      ::close(g[1]);
      g[1] = -1;
    }
  }
  return std::unique_ptr<ChildProcess>(std::make_unique<PosixChild>(pid, p[0], guard, g[1]));
}

}  // namespace kestrel::jobs
