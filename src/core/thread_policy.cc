#include "core/thread_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

namespace kestrel {
namespace {

std::optional<std::string> ReadSmallFile(const char* path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::optional<uint64_t> ToUnsigned(const std::string& s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Cpus(int n) { return std::to_string(n) + (n == 1 ? " CPU" : " CPUs"); }

}  // namespace

std::vector<EnvSetting> OpenMpEnvDefaults(const std::function<const char*(const char*)>& get) {
  if (get("OMP_WAIT_POLICY") != nullptr || get("GOMP_SPINCOUNT") != nullptr) return {};
  return {{"OMP_WAIT_POLICY", std::string(kOmpWaitPolicy)}};
}

std::vector<EnvSetting> ApplyOpenMpEnvDefaults() {
  std::vector<EnvSetting> set = OpenMpEnvDefaults([](const char* n) { return std::getenv(n); });
  for (const EnvSetting& e : set) ::setenv(e.name.c_str(), e.value.c_str(), /*overwrite=*/0);
  return set;
}

ThreadSplit SplitThreadBudget(int usable, int torch_threads, int loader_workers) {
  usable = std::max(1, usable);
  ThreadSplit s;
  const bool loader_given = loader_workers >= 0;
  s.loader = loader_given ? std::max(1, loader_workers) : std::max(1, (usable + 2) / 4);
  if (torch_threads > 0) {
    s.torch = torch_threads;
  } else if (usable <= 3) {
    s.torch = usable;
  } else {
    s.torch = std::max(1, usable - s.loader);
  }
  s.why = std::to_string(s.loader) + " loader " + (s.loader == 1 ? "thread" : "threads") +
          (loader_given ? " (workers=" + std::to_string(loader_workers) + ")"
                        : " (workers: a quarter of " + Cpus(usable) + ", at least 1)") +
          ", " + std::to_string(s.torch) + " intra-op" +
          (torch_threads > 0 ? " (threads=" + std::to_string(torch_threads) + ")"
           : usable <= 3     ? " (every CPU: with 1-3 the loader takes none of its own)"
                             : " (the rest)");
  return s;
}

std::optional<CpuTimes> ParseProcStat(std::string_view text, const std::vector<int>& cpus) {
  const std::set<int> want(cpus.begin(), cpus.end());
  CpuTimes out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 4 || line.compare(0, 3, "cpu") != 0 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream ls(line);
    std::string name;
    ls >> name;
    const auto id = ToUnsigned(name.substr(3));
    if (!id || *id > 1u << 20 || want.count(static_cast<int>(*id)) == 0) continue;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    std::vector<uint64_t> f;
    std::string tok;
    while (ls >> tok) {
      auto v = ToUnsigned(tok);
      if (!v) return std::nullopt;
      f.push_back(*v);
    }
    if (f.size() < 8) return std::nullopt;
    const uint64_t busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    out.busy += busy;
    out.total += busy + f[3] + f[4];
    ++out.cpus;
  }
  if (out.cpus == 0) return std::nullopt;
  return out;
}

std::optional<uint64_t> ParseProcPidStatTicks(std::string_view text) {
  const size_t close = text.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::istringstream in{std::string(text.substr(close + 1))};
  // After ")": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt
  // majflt cmajflt utime(14) stime(15).
  std::string tok;
  std::optional<uint64_t> utime, stime;
  for (int field = 3; field <= 15 && in >> tok; ++field) {
    if (field == 14) utime = ToUnsigned(tok);
    if (field == 15) stime = ToUnsigned(tok);
  }
  if (!utime || !stime) return std::nullopt;
  return *utime + *stime;
}

std::optional<LoadSample> ReadLoadSample(double now_s, const std::vector<int>& cpus) {
  auto stat = ReadSmallFile("/proc/stat");
  auto self = ReadSmallFile("/proc/self/stat");
  if (!stat || !self) return std::nullopt;
  auto times = ParseProcStat(*stat, cpus);
  auto ticks = ParseProcPidStatTicks(*self);
  if (!times || !ticks) return std::nullopt;
  return LoadSample{now_s, *times, *ticks};
}

AdaptiveThreads::AdaptiveThreads(Options o) : o_(o), threads_(std::max(1, o.max_threads)) {
  o_.usable = std::max(1, o_.usable);
  o_.max_threads = threads_;
}

std::string AdaptiveThreads::Describe() const {
  if (o_.fixed) return "fixed: threads=" + std::to_string(threads_);
  return "adaptive: " + std::to_string(o_.max_threads) + (o_.max_threads == 1 ? " thread" : " threads") +
         " while the " + Cpus(o_.usable) + " are free, fewer while other processes use them (checked every " +
         Fixed(o_.interval_s, 0) + " s)";
}

bool AdaptiveThreads::Due(double now_s) const {
  if (o_.fixed) return false;
  return !last_ || now_s - last_->now_s >= o_.interval_s;
}

std::optional<ThreadDecision> AdaptiveThreads::Observe(const LoadSample& s) {
  if (o_.fixed) return std::nullopt;
  const std::optional<LoadSample> prev = last_;
  // A sample from another CPU set or with a counter that went back (a CPU
  // taken offline) restarts the baseline.
  last_ = s;
  if (!prev || s.cpus.cpus != prev->cpus.cpus || s.cpus.total <= prev->cpus.total ||
      s.cpus.busy < prev->cpus.busy || s.self_ticks < prev->self_ticks)
    return std::nullopt;
  const double ticks_per_cpu = static_cast<double>(s.cpus.total - prev->cpus.total) / s.cpus.cpus;
  const double busy = static_cast<double>(s.cpus.busy - prev->cpus.busy);
  const double self = static_cast<double>(s.self_ticks - prev->self_ticks);
  const double others = std::max(0.0, (busy - self) / ticks_per_cpu);
  const double free_cpus = std::max(0.0, std::min<double>(o_.usable, s.cpus.cpus - others));
  const double reserve = o_.usable - o_.max_threads;  // the loader's, negative with threads above the budget
  const double for_torch = free_cpus - std::max(0.0, reserve);
  int next = threads_;
  if (for_torch < threads_ - 0.5) {
    next = std::max(1, static_cast<int>(std::lround(for_torch)));
  } else if (for_torch >= threads_ + 0.75) {
    next = std::min(o_.max_threads, static_cast<int>(std::floor(for_torch + 0.25)));
  }
  next = std::clamp(next, 1, o_.max_threads);
  if (next == threads_) return std::nullopt;
  ThreadDecision d;
  d.threads = next;
  d.why = "other processes used " + Fixed(others, 2) + " of " + Cpus(s.cpus.cpus) + " over " +
          Fixed(s.now_s - prev->now_s, 1) + " s";
  threads_ = next;
  return d;
}

}  // namespace kestrel
