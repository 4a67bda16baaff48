// How a LibTorch process uses its CPU budget (core/cpu_budget.h) on a shared
// machine (issue 30, docs/speed.md "Threads on a shared machine"):
// - OpenMP's wait policy, set in the environment of every LibTorch process
//   before its OpenMP runtime starts (OpenMpEnvDefaults);
// - the split of the budget between the loader's threads and LibTorch's
//   intra-op threads (SplitThreadBudget);
// - the adaptive intra-op thread count: fewer threads while other processes
//   take the budget's CPUs, back up when they leave (AdaptiveThreads, fed
//   from /proc/stat and /proc/self/stat).
// Torch-free; the decisions are pure functions of their inputs for tests.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kestrel {

// ---- OpenMP wait policy -------------------------------------------------

// OMP_WAIT_POLICY Kestrel's LibTorch processes start with. An idle OpenMP
// thread spins (libgomp: GOMP_SPINCOUNT `pause`s) at a barrier before it
// sleeps; libgomp's default, 300000, is milliseconds at every parallel
// region's end: beside a process that holds a core each barrier then waits
// for a descheduled thread while its partner spins. PASSIVE (spin 0) sleeps
// at once. On a quiet 2-core machine it cost nothing idle against a spin of
// 1000 (the default before) and did better beside a busy process and with
// two trainings at once, in three rounds: docs/speed.md "OpenMP wait policy".
inline constexpr std::string_view kOmpWaitPolicy = "PASSIVE";

struct EnvSetting {
  std::string name;
  std::string value;
};

// The variables to add to an environment whose variables `get` reads
// (nullptr = unset): OMP_WAIT_POLICY=kOmpWaitPolicy, unless the user chose a
// wait policy themselves (OMP_WAIT_POLICY or GOMP_SPINCOUNT set, even to an
// empty value): then nothing, their choice stands.
std::vector<EnvSetting> OpenMpEnvDefaults(const std::function<const char*(const char*)>& get);

// Applies OpenMpEnvDefaults to this process's environment (setenv, never
// overwriting). Call before exec'ing a LibTorch program (the `kestrel` front
// before kestrel-torch, a worker before its attempts): the OpenMP runtime
// reads them once, when it is loaded. Returns what it set.
std::vector<EnvSetting> ApplyOpenMpEnvDefaults();

// ---- Loader threads inside the budget -----------------------------------

struct ThreadSplit {
  int loader = 1;  // data loader worker threads
  int torch = 1;   // LibTorch intra-op threads (the most AdaptiveThreads uses)
  std::string why;
};

// The default split of `usable` CPUs (>= 1): the loader gets a quarter,
// rounded, at least one thread (`loader_workers` >= 0 when the user gave
// workers=: that many, 0 meaning one as the loader runs it); the intra-op
// threads the rest, except on 1-3 CPUs where they keep every CPU: one loader
// thread there mostly sleeps on a full prefetch queue, and taking a whole
// CPU of 2 from the intra-op threads costs more than its share.
// `torch_threads` > 0 (threads=N) is kept as given.
ThreadSplit SplitThreadBudget(int usable, int torch_threads, int loader_workers);

// ---- Adaptive intra-op threads ------------------------------------------

// CPU time, in clock ticks, of the CPUs in a set (from /proc/stat) and of
// this process (from /proc/self/stat).
struct CpuTimes {
  uint64_t busy = 0;   // user + nice + system + irq + softirq + steal
  uint64_t total = 0;  // busy + idle + iowait
  int cpus = 0;        // CPUs of the set found in the text
};

// Sums the per-CPU lines ("cpuN ...") of /proc/stat's text for the CPUs in
// `cpus`; nullopt when none of them is there or a line is malformed.
std::optional<CpuTimes> ParseProcStat(std::string_view text, const std::vector<int>& cpus);
// utime + stime (ticks, all threads) from /proc/self/stat's text (the fields
// after the parenthesised command, which may itself hold spaces or ')').
std::optional<uint64_t> ParseProcPidStatTicks(std::string_view text);

struct LoadSample {
  double now_s = 0;  // a monotonic clock
  CpuTimes cpus;     // the budget's CPUs
  uint64_t self_ticks = 0;
};
// Reads /proc/stat and /proc/self/stat now; nullopt when either is unreadable.
std::optional<LoadSample> ReadLoadSample(double now_s, const std::vector<int>& cpus);

struct ThreadDecision {
  int threads = 1;
  std::string why;  // "other processes used 0.93 of 2 CPUs over 3.1 s"
};

// The intra-op thread count while other processes come and go. Every
// `interval_s` (at a step's end) it measures, over the interval, the CPU
// time the budget's CPUs spent on anything but this process ("others", in
// CPUs) and the CPUs left to it, free = min(usable, cpus - others), of which
// the loader's reserve (usable - max_threads) is not LibTorch's:
//   fewer threads when free - reserve < threads - 0.5 (a thread would wait
//   for a core at every barrier): threads = max(1, round(free - reserve));
//   more when free - reserve >= threads + 0.75 (hysteresis, so a process at
//   half a CPU does not flip it every interval): up to max_threads.
// A fixed policy (threads=N given) never changes.
class AdaptiveThreads {
 public:
  struct Options {
    int usable = 1;       // the budget (CpuBudget::usable)
    int max_threads = 1;  // intra-op threads when the CPUs are free (ThreadSplit::torch)
    bool fixed = false;   // threads=N: never change
    double interval_s = 3;
  };
  explicit AdaptiveThreads(Options o);

  int Threads() const { return threads_; }
  // "adaptive: 2 threads while the 2 CPUs are free, fewer while other
  // processes use them (checked every 3 s)" / "fixed: threads=2".
  std::string Describe() const;
  // Whether a sample is due at `now_s` (the first one always is).
  bool Due(double now_s) const;
  // Feeds a sample; the new count when it changes. The first sample only
  // sets the baseline.
  std::optional<ThreadDecision> Observe(const LoadSample& s);

 private:
  Options o_;
  int threads_;
  std::optional<LoadSample> last_;
};

}  // namespace kestrel
