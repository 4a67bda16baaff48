// CpuBudget: the CPU cores this process may really use, for sizing thread
// pools (the trainer's intra-op threads, the loader, a worker's slots). On a
// shared machine that is its affinity mask and its cgroup CPU quota, not
// std::thread::hardware_concurrency(): a container limited to 1.5 CPUs on a
// 64-core host, or a worker slot pinned to cores 2-3, must not start 64
// spinning OpenMP threads (docs/speed.md "Threads on a shared machine").
// Torch-free; the parsers are pure functions for tests.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kestrel {

struct CpuBudget {
  std::vector<int> affinity;  // CPU ids in this process's affinity mask
  double quota_cpus = 0;      // the tightest cgroup CPU quota on its path; 0 = none
  int usable = 1;             // min(|affinity|, ceil(quota_cpus)), at least 1
  std::string why;            // "2 cores (affinity 2, no cgroup quota)"
};

// Reads the affinity mask (sched_getaffinity) and the cgroup quota of this
// process (v2 `cpu.max`, v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us`, the
// process's cgroup and each ancestor up to the mount's root; a file that is
// absent or unreadable counts as no quota). Never fails: with nothing
// readable it falls back to hardware_concurrency.
CpuBudget ProcessCpuBudget();

// cgroup v2 `cpu.max` ("max 100000", "150000 100000") -> CPUs; nullopt for
// "max" or text it does not understand.
std::optional<double> ParseCgroupV2CpuMax(std::string_view text);
// cgroup v1 quota and period in microseconds -> CPUs; nullopt when the quota
// is -1 (unlimited) or either value is not positive.
std::optional<double> CgroupV1QuotaCpus(long long quota_us, long long period_us);
// The cgroup paths of this process from /proc/self/cgroup's text: for v2 the
// "0::" entry, for v1 the entry whose controllers include "cpu".
struct CgroupPaths {
  std::string v2;  // "" when absent
  std::string v1_cpu;
};
CgroupPaths ParseProcCgroup(std::string_view text);

// Splits `cpus` among `slots` consumers: contiguous, sizes differing by at
// most one, in order. With fewer CPUs than slots, slots share CPUs
// round-robin (each slot gets one). REQUIRES: slots >= 1, !cpus.empty().
std::vector<std::vector<int>> SplitCpus(const std::vector<int>& cpus, int slots);

// Pins the calling process (all threads created after it) to `cpus`.
Status SetProcessAffinity(const std::vector<int>& cpus);

// "0-3,6" style list <-> CPU ids (the form `taskset -c` and cpuset use).
std::string FormatCpuList(const std::vector<int>& cpus);
Result<std::vector<int>> ParseCpuList(std::string_view text);

}  // namespace kestrel
