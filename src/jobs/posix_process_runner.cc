#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "jobs/process_runner.h"

extern char** environ;

namespace kestrel::jobs {
namespace {

constexpr int kProgressFd = 3;

class PosixChild final : public ChildProcess {
 public:
  PosixChild(pid_t pid, int progress_fd) : pid_(pid), fd_(progress_fd) {}
  ~PosixChild() override {
    if (!exit_) {
      ::kill(-pid_, SIGKILL);
      int st = 0;
      while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
      }
    } else {
      ::kill(-pid_, SIGKILL);  // grandchildren left in the group
    }
    if (fd_ >= 0) ::close(fd_);
  }
  PosixChild(const PosixChild&) = delete;
  PosixChild& operator=(const PosixChild&) = delete;

  int64_t Pid() const override { return pid_; }

  std::optional<ExitInfo> Poll() override {
    if (exit_) return exit_;
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r != pid_) return std::nullopt;
    ExitInfo e;
    if (WIFSIGNALED(st)) {
      e.signal = WTERMSIG(st);
    } else {
      e.exit_code = WEXITSTATUS(st);
    }
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
  pid_t pid_;
  int fd_;
  std::string partial_;
  std::optional<ExitInfo> exit_;
};

}  // namespace

Result<std::unique_ptr<ChildProcess>> PosixProcessRunner::Start(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty() || spec.argv[0][0] != '/') {
    return Status::InvalidArgument("child argv[0] must be an absolute path", {"", 0, "argv"});
  }
  // Everything the child needs is built before fork: after fork in a
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

  int log_fd = ::open(spec.log_path.empty() ? "/dev/null" : spec.log_path.c_str(),
                      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0)
    return Status::IoError(std::string("cannot open child log: ") + std::strerror(errno), {spec.log_path});
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    ::close(log_fd);
    return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log_fd);
    ::close(p[0]);
    ::close(p[1]);
    return Status::ResourceExhausted(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
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
  return std::unique_ptr<ChildProcess>(std::make_unique<PosixChild>(pid, p[0]));
}

}  // namespace kestrel::jobs
