// No trainer outlives its worker (issue 10, "orphaned trainers"): a
// supervisor killed with SIGKILL takes its child and the child's own
// subprocesses with it (PR_SET_PDEATHSIG + the guard process of
// PosixProcessRunner), and the attempt names the real pid and host.
//
// The test process makes itself a child subreaper, so whatever the killed
// supervisor leaves behind is re-parented here and can be reaped and timed
// exactly (rather than trusting a container's PID 1 to reap zombies).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "jobs/process_runner.h"

namespace kestrel::jobs {
namespace {

using Clock = std::chrono::steady_clock;

bool Alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  // A zombie answers kill(0) but runs no more.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

class SubreaperTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0) << std::strerror(errno); }
  void TearDown() override {
    for (pid_t p : {supervisor_}) {
      if (p > 0) ::kill(p, SIGKILL);
    }
    // Whatever is still ours: kill and reap, so no test leaks a sleep.
    for (pid_t p : watched_) {
      if (Alive(p)) ::kill(p, SIGKILL);
    }
    ReapFor(std::chrono::milliseconds(500));
    ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
  }

  // Reaps every exited child (ours or re-parented to us) without blocking.
  std::set<pid_t> Reap() {
    std::set<pid_t> out;
    int st = 0;
    pid_t p;
    while ((p = ::waitpid(-1, &st, WNOHANG)) > 0) {
      out.insert(p);
      if (WIFSIGNALED(st)) signals_[p] = WTERMSIG(st);
    }
    return out;
  }
  void ReapFor(std::chrono::milliseconds d) {
    auto end = Clock::now() + d;
    while (Clock::now() < end) {
      Reap();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  // Waits until every pid in `pids` was reaped here (or is gone); returns the
  // seconds that took, or -1 after `limit_s`.
  double WaitGone(const std::set<pid_t>& pids, double limit_s) {
    auto t0 = Clock::now();
    std::set<pid_t> left = pids;
    while (true) {
      for (pid_t p : Reap()) left.erase(p);
      for (auto it = left.begin(); it != left.end();) it = Alive(*it) ? std::next(it) : left.erase(it);
      double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (left.empty()) return s;
      if (s > limit_s) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

  pid_t supervisor_ = -1;
  std::set<pid_t> watched_;
  std::map<pid_t, int> signals_;
};

// A supervisor process starts `sh` through PosixProcessRunner from a second
// thread (as a worker's slot thread does); the shell starts a `sleep`
// grandchild in its group and reports its pid on the progress pipe. SIGKILL
// the supervisor: both must be gone within 2 s, killed by SIGKILL.
TEST_F(SubreaperTest, SigkilledSupervisorTakesItsChildAndGrandchildWithIt) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  supervisor_ = ::fork();
  ASSERT_GE(supervisor_, 0);
  if (supervisor_ == 0) {
    ::close(p[0]);
    std::thread slot([&] {
      PosixProcessRunner runner;
      auto child = runner.Start({{"/bin/sh", "-c", "sleep 1000 & echo grandchild=$! >&3; wait"}, {}, ""});
      if (!child.IsOk()) ::_exit(3);
      std::string line;
      for (int i = 0; i < 1000 && line.empty(); ++i) {
        for (const auto& l : (*child)->ReadProgress()) line = l;
        if (line.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      std::string msg = std::to_string((*child)->Pid()) + " " + line.substr(line.find('=') + 1) + "\n";
      if (::write(p[1], msg.data(), msg.size()) != static_cast<ssize_t>(msg.size())) ::_exit(4);
      while (true) ::pause();  // supervising until killed
    });
    slot.join();
    ::_exit(0);
  }
  ::close(p[1]);
  std::string got;
  char buf[128];
  ssize_t n;
  while (got.find('\n') == std::string::npos && (n = ::read(p[0], buf, sizeof buf)) > 0) got.append(buf, n);
  ::close(p[0]);
  std::istringstream in(got);
  pid_t child = 0, grandchild = 0;
  in >> child >> grandchild;
  ASSERT_GT(child, 0) << "supervisor said: " << got;
  ASSERT_GT(grandchild, 0) << "supervisor said: " << got;
  watched_ = {child, grandchild};
  ASSERT_TRUE(Alive(child));
  ASSERT_TRUE(Alive(grandchild));
  EXPECT_EQ(::getpgid(grandchild), child) << "the grandchild shares the child's process group";

  ASSERT_EQ(::kill(supervisor_, SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(supervisor_, &st, 0), supervisor_);
  supervisor_ = -1;
  double s = WaitGone({child, grandchild}, 2.0);
  std::printf("child and grandchild gone %.3f s after the supervisor's SIGKILL\n", s);
  ASSERT_GE(s, 0) << "child " << child << (Alive(child) ? " alive" : " gone") << ", grandchild " << grandchild
                  << (Alive(grandchild) ? " alive" : " gone") << " 2 s after the supervisor died";
  // Both were re-parented here and reaped: they died of SIGKILL.
  if (signals_.count(child)) {
    EXPECT_EQ(signals_[child], SIGKILL);
  }
  if (signals_.count(grandchild)) {
    EXPECT_EQ(signals_[grandchild], SIGKILL);
  }
}

// While the supervisor lives nothing is killed early, and a child that ends
// by itself takes what it left in its group along (the guard, stopped).
TEST_F(SubreaperTest, LiveSupervisorKeepsItsChildAndCleansUpAfterANormalExit) {
  PosixProcessRunner runner;
  auto child = runner.Start(
      {{"/bin/sh", "-c", "sleep 1000 & echo grandchild=$! >&3; read x < /dev/null; sleep 0.3; exit 5"},
       {},
       ""});
  ASSERT_TRUE(child.IsOk()) << child.GetStatus().ToString();
  pid_t grandchild = 0;
  auto t0 = Clock::now();
  std::optional<ExitInfo> e;
  while (!e && Clock::now() - t0 < std::chrono::seconds(10)) {
    for (const auto& l : (*child)->ReadProgress()) grandchild = std::stoi(l.substr(l.find('=') + 1));
    e = (*child)->Poll();
    if (!e) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->exit_code, 5);
  ASSERT_GT(grandchild, 0);
  watched_ = {grandchild};
  // The orphaned sleep is re-parented here: killed with the group on exit.
  EXPECT_GE(WaitGone({grandchild}, 2.0), 0) << "grandchild left running after its parent exited";
}

#ifdef KESTREL_CLI

// The whole thing through `kestrel worker`: a long tiny training job, the
// worker SIGKILLed while the attempt trains. The attempt names the trainer's
// real pid and this host, and the trainer is gone within 2 s.
std::string Shell(const std::string& cmd) {
  std::string out;
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  ::pclose(f);
  return out;
}

class WorkerOrphanTest : public SubreaperTest {
 protected:
  void SetUp() override {
    SubreaperTest::SetUp();
    dir_ = "/tmp/kestrel_orphan_" + std::to_string(::getpid());
    Shell("rm -rf " + dir_ + " && mkdir -p " + dir_);
  }
  void TearDown() override {
    SubreaperTest::TearDown();
    Shell("rm -rf " + dir_);
  }
  std::string Kestrel(const std::string& args) {
    return Shell("cd " + dir_ + " && KESTREL_HOME=" + dir_ + "/home " + KESTREL_CLI + " " + args +
                 " 2>/dev/null");
  }
  std::string dir_;
};

TEST_F(WorkerOrphanTest, SigkilledWorkerTakesItsTrainerWithIt) {
  Kestrel("dataset synth data --images 12 --imgsz 64 --seed 3");
  Kestrel("dataset import data --name tiny");
  std::string sub = Kestrel(
      "--json submit data=tiny model=t imgsz=64 batch=4 workers=1 threads=1 plots=false optimizer=AdamW "
      "lr0=0.01 "
      "warmup_epochs=0 epochs=300");
  auto subj = nlohmann::json::parse(sub, nullptr, false);
  ASSERT_TRUE(subj.is_object() && subj.contains("job_id")) << sub;
  const std::string id = std::to_string(subj["job_id"].get<int64_t>());

  pid_t worker = ::fork();
  ASSERT_GE(worker, 0);
  if (worker == 0) {
    ::setenv("KESTREL_HOME", (dir_ + "/home").c_str(), 1);
    if (::chdir(dir_.c_str()) != 0) ::_exit(126);
    FILE* log = std::fopen((dir_ + "/worker.log").c_str(), "w");
    if (log != nullptr) {
      ::dup2(fileno(log), 1);
      ::dup2(fileno(log), 2);
    }
    ::execl(KESTREL_CLI, KESTREL_CLI, "worker", "--poll-s", "0.1", "--heartbeat-s", "1", "--lease-s", "5",
            "--id", "w1", "--no-webhooks", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  supervisor_ = worker;
  // Wait until the attempt runs and names its child.
  pid_t trainer = 0;
  std::string show;
  nlohmann::json attempt;
  auto t0 = Clock::now();
  while (trainer == 0 && Clock::now() - t0 < std::chrono::seconds(60)) {
    show = Kestrel("--json jobs show " + id);
    auto j = nlohmann::json::parse(show, nullptr, false);
    if (j.is_object() && j["attempts"].is_array() && !j["attempts"].empty()) {
      attempt = j["attempts"][0];
      trainer = static_cast<pid_t>(attempt.value("pid", int64_t{0}));
    }
    if (trainer == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_GT(trainer, 0) << "the running attempt never named its pid: " << show;
  watched_ = {trainer};
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  EXPECT_EQ(attempt.value("host", ""), std::string(host));
  EXPECT_EQ(attempt.value("ended_ms", int64_t{-1}), 0) << "still running";
  ASSERT_TRUE(Alive(trainer));
  std::ifstream cmdline("/proc/" + std::to_string(trainer) + "/cmdline");
  std::string args((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  EXPECT_NE(args.find("train"), std::string::npos) << "pid " << trainer << " is not the trainer";
  // Let it get into training proper (loaders, model) before the kill.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_TRUE(Alive(trainer)) << "the trainer ended by itself";

  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  int st = 0;
  ASSERT_EQ(::waitpid(worker, &st, 0), worker);
  supervisor_ = -1;
  double s = WaitGone({trainer}, 2.0);
  std::printf("trainer %d gone %.3f s after `kestrel worker` was SIGKILLed\n", trainer, s);
  ASSERT_GE(s, 0) << "trainer " << trainer << " still running 2 s after its worker was SIGKILLed";
  // The attempt keeps the pid (the lease has not expired yet: nobody closed it).
  show = Kestrel("--json jobs show " + id);
  auto after = nlohmann::json::parse(show, nullptr, false);
  ASSERT_TRUE(after.is_object()) << show;
  EXPECT_EQ(after["attempts"][0].value("pid", int64_t{0}), trainer) << show;
}

#endif  // KESTREL_CLI

}  // namespace
}  // namespace kestrel::jobs
