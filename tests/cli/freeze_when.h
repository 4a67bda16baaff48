// Catching a running process in a given state, without racing it.
//
// A test that kills a child "once its first checkpoint exists" by polling has
// a race: between the poll that sees the checkpoint and the kill, a loaded
// machine may deschedule the test long enough for the child to finish (a
// tiny training's remaining epochs take well under a second). FreezeWhen
// closes that window: the process runs in short slices and the condition is
// checked only while every thread of it is stopped with SIGSTOP, so what the
// check saw still holds when the caller acts (SIGKILL, or SIGCONT to let it
// go on).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <thread>

namespace kestrel::testing {

// One state letter per thread of `pid` (R, S, D, T, t, Z, X, ...), read from
// /proc/PID/task/*/stat; empty when the process is gone.
inline std::string ThreadStates(pid_t pid) {
  std::string states;
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/proc/" + std::to_string(pid) + "/task", ec), end;
       !ec && it != end; it.increment(ec)) {
    std::ifstream f(it->path() / "stat");
    std::string line;
    std::getline(f, line);
    const size_t close = line.rfind(')');  // the command name may hold spaces and parentheses
    if (close != std::string::npos && close + 2 < line.size()) states += line[close + 2];
  }
  return states;
}

enum class Freeze {
  kReady,     // ready() held; the process is left stopped (SIGSTOP)
  kEnded,     // the process exited (or is exiting) before ready() held
  kTimedOut,  // ready() never held before the limit; the process was left running
};

// The state letter of `pid`'s main thread, from /proc/PID/stat; 0 when the
// process is gone.
inline char LeaderState(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() ? line[close + 2] : 0;
}

// The pid of the `kestrel --home HOME ... train --job JOB --attempt N` child a
// worker on store `home` started (found by its command line in /proc, which
// is faster than asking the store), polling every millisecond; 0 when none
// appeared within `limit`. The home matters: tests running at the same time
// each have a job 1 attempt 1, and killing another test's trainer fails both.
inline pid_t WaitForTrainAttempt(int64_t job, int attempt, const std::string& home,
                                 std::chrono::milliseconds limit) {
  const std::string needle = std::string("train") + '\0' + "--job" + '\0' + std::to_string(job) + '\0' +
                             "--attempt" + '\0' + std::to_string(attempt) + '\0';
  const std::string home_arg = std::string("--home") + '\0' + home + '\0';
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    std::error_code ec;
    for (std::filesystem::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
      std::ifstream f(it->path() / "cmdline", std::ios::binary);
      const std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      if (cmd.find(needle) != std::string::npos && cmd.find(home_arg) != std::string::npos)
        return static_cast<pid_t>(std::atoll(it->path().filename().c_str()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return 0;
}

// Runs `pid` in slices of `slice`, stopping it (every thread) between slices
// to evaluate `ready()`. The caller owns the stopped process on kReady.
template <class Ready>
Freeze FreezeWhen(pid_t pid, Ready&& ready, std::chrono::milliseconds limit,
                  std::chrono::milliseconds slice = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    if (::kill(pid, SIGSTOP) != 0) return Freeze::kEnded;
    // SIGSTOP is delivered asynchronously, thread by thread: wait until all
    // of them are stopped (a thread inside a syscall such as fsync stops when
    // it returns).
    // A thread that is exiting (Z, X) runs nothing more, so it counts as
    // stopped; only the leader's exit (or no threads at all) ends the process.
    // (Worker threads come and go while a trainer runs: treating one exiting
    // thread as the process's end made a freeze fail at random under load.)
    while (true) {
      const std::string s = ThreadStates(pid);
      const char leader = LeaderState(pid);
      if (s.empty() || leader == 0 || leader == 'Z' || leader == 'X') return Freeze::kEnded;
      if (s.find_first_not_of("TtZX") == std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (ready()) return Freeze::kReady;
    ::kill(pid, SIGCONT);
    if (std::chrono::steady_clock::now() > deadline) return Freeze::kTimedOut;
    std::this_thread::sleep_for(slice);
  }
}

}  // namespace kestrel::testing
