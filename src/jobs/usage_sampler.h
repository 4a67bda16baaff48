// Resource usage of a running trainer (docs/jobs.md "System usage"): the
// worker samples each attempt's process tree every few seconds and writes
// the readings as metric events of the job (sys/cpu_percent, sys/rss_mb and,
// only when a GPU is really in use, sys/gpu_util, sys/gpu_mem_mb).
//
// - CPU: utime + stime (+ cutime + cstime: the time of children already
//   reaped) from /proc/PID/stat of every live process of the tree, as a
//   delta over the wall time since the previous reading; 100 % = one core.
// - Memory: VmRSS from /proc/PID/status, summed over the tree (pages shared
//   between processes count once per process, as `ps` adds them up).
// - The tree: the root and every process whose parent chain reaches it, plus
//   every process in the root's process group (the worker starts each child
//   as a group leader; a daemonised grandchild stays in the group).
// - GPU: `nvidia-smi` when it is on PATH (absent: no GPU reading at all,
//   never a zero). The tree's processes among the compute apps give their
//   memory and the utilisation of the GPUs they run on; when none of them is
//   listed (another PID namespace) a GPU attempt falls back to its device's
//   figures (whole device).
//
// Torch-free; /proc and the GPU query are injectable, so the parsers and the
// arithmetic are tested on fixture text.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kestrel::jobs {

// The setting that holds a worker's latest usage sample: kUsageSettingPrefix
// + worker id, {"sampled_ms", "interval_ms", "cpu_percent", "rss_mb",
// "gpu_util" and "gpu_mem_mb" (only with a GPU reading), "jobs": [{"job",
// "attempt", "pid", "processes", "cpu_percent", "rss_mb", "gpu_util",
// "gpu_mem_mb"}]}: the sum over its running trainers; written with each
// sample, and once with zeros and no jobs when the last one ended.
inline constexpr const char* kUsageSettingPrefix = "usage.";

// The worker's sampling interval (`kestrel worker --usage-s`, else
// KESTREL_USAGE_S, else 5 s): seconds, 0 = off, else 1..86400; returned in
// ms. `origin` names the flag or variable in the error.
inline constexpr double kDefaultUsageSeconds = 5;
Result<int64_t> ParseUsageSeconds(const std::string& text, const std::string& origin);
Result<int64_t> UsageSampleMsFromEnv();

// The fields of /proc/PID/stat the sampler reads (proc(5) numbering).
struct ProcStat {
  int64_t pid = 0;        // 1
  std::string comm;       // 2, without its parentheses (may hold spaces and ')')
  char state = '?';       // 3
  int64_t ppid = 0;       // 4
  int64_t pgrp = 0;       // 5
  uint64_t utime = 0;     // 14, clock ticks
  uint64_t stime = 0;     // 15
  uint64_t cutime = 0;    // 16: reaped children's user time
  uint64_t cstime = 0;    // 17
  int64_t rss_pages = 0;  // 24
};

// Parses one /proc/PID/stat text. The comm is whatever lies between the
// first '(' and the last ')'. `where` names the file in errors, which also
// name the field.
Result<ProcStat> ParseProcStat(std::string_view text, const std::string& where = "");

// VmRSS of a /proc/PID/status text, in kB; nullopt when the text has no
// VmRSS line (a kernel thread, a zombie). An unreadable value is an error
// naming the line.
Result<std::optional<int64_t>> ParseVmRssKb(std::string_view text, const std::string& where = "");

// `nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used
// --format=csv,noheader,nounits`, one line per GPU. A figure the driver
// does not report ("[N/A]", "[Not Supported]") is nullopt.
struct GpuDevice {
  int index = 0;
  std::string uuid;
  std::optional<double> util_percent;
  std::optional<double> mem_used_mb;
};
// `nvidia-smi --query-compute-apps=pid,gpu_uuid,used_memory
// --format=csv,noheader,nounits`, one line per process on a GPU.
struct GpuProcess {
  int64_t pid = 0;
  std::string gpu_uuid;
  std::optional<double> used_mb;
};
struct GpuSnapshot {
  std::vector<GpuDevice> devices;
  std::vector<GpuProcess> processes;
};
Result<std::vector<GpuDevice>> ParseGpuQueryCsv(std::string_view text);
Result<std::vector<GpuProcess>> ParseComputeAppsCsv(std::string_view text);

// The nvidia-smi on PATH ("" when there is none).
std::string FindNvidiaSmi();
// Runs both queries of `nvidia_smi` (an absolute path), each for at most
// `timeout_ms`; an error when either fails, times out or prints what the
// parsers refuse.
Result<GpuSnapshot> QueryNvidiaSmi(const std::string& nvidia_smi, int64_t timeout_ms);

// One reading of a process tree.
struct UsageReading {
  int64_t root = 0;
  int processes = 0;                       // live processes in the tree
  double cpu_percent = 0;                  // since the previous reading; 100 = one core
  double cpu_seconds = 0;                  // CPU time the tree used since the previous reading
  double wall_seconds = 0;                 // since the previous reading
  double rss_mb = 0;                       // summed VmRSS, MiB
  std::optional<double> gpu_util_percent;  // only when a GPU reading applies
  std::optional<double> gpu_mem_mb;
};

class UsageSampler {
 public:
  struct Options {
    std::string proc = "/proc";
    // The GPU query; unset = nvidia-smi from PATH when there is one (else
    // none). nullopt = no GPU reading this time.
    std::function<std::optional<GpuSnapshot>()> gpu;
    int64_t clock_ticks_per_second = 0;  // 0 = sysconf(_SC_CLK_TCK)
  };
  UsageSampler();
  explicit UsageSampler(Options options);

  // The baseline of `root`'s tree at `now_us` (a monotonic clock): the next
  // Sample of it reports the usage since. kNotFound when the root is gone.
  Status Start(int64_t root, int64_t now_us);
  void Forget(int64_t root);
  // The GPU figures for this round of samples (one query for every tree).
  std::optional<GpuSnapshot> QueryGpu();
  // Reads `root`'s tree at `now_us` and makes this the new baseline.
  // `gpu_index`: the GPU the attempt was placed on (-1: none), for the
  // whole-device fallback. kFailedPrecondition without Start; kNotFound
  // when the root is gone.
  Result<UsageReading> Sample(int64_t root, int64_t now_us, const std::optional<GpuSnapshot>& gpu,
                              int gpu_index = -1);

 private:
  struct Tree {
    std::vector<ProcStat> members;  // root first
    uint64_t cpu_ticks = 0;
  };
  Result<Tree> ReadTree(int64_t root);
  struct Baseline {
    uint64_t cpu_ticks = 0;
    int64_t at_us = 0;
  };
  Options options_;
  std::string nvidia_smi_;  // resolved once when options_.gpu is unset
  std::map<int64_t, Baseline> baselines_;
};

}  // namespace kestrel::jobs
