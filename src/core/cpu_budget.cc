#include "core/cpu_budget.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace kestrel {
namespace {

std::optional<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

std::optional<long long> ToInt(std::string_view s) {
  const std::string t = Trim(s);
  if (t.empty()) return std::nullopt;
  size_t i = t[0] == '-' ? 1 : 0;
  if (i == t.size()) return std::nullopt;
  long long v = 0;
  for (; i < t.size(); ++i) {
    if (t[i] < '0' || t[i] > '9') return std::nullopt;
    if (v > (1LL << 50)) return std::nullopt;
    v = v * 10 + (t[i] - '0');
  }
  return t[0] == '-' ? -v : v;
}

// The tightest quota over `rel` and its ancestors below `mount`.
template <typename ReadQuota>
std::optional<double> TightestOnPath(const std::string& mount, std::string rel, ReadQuota read) {
  std::optional<double> best;
  while (true) {
    const std::string dir = rel.empty() || rel == "/" ? mount : mount + rel;
    if (auto q = read(dir); q && (!best || *q < *best)) best = q;
    if (rel.empty() || rel == "/") break;
    const size_t slash = rel.rfind('/');
    rel = slash == 0 || slash == std::string::npos ? "" : rel.substr(0, slash);
  }
  return best;
}

bool Exists(const std::string& path) { return std::ifstream(path).good(); }

}  // namespace

std::optional<double> ParseCgroupV2CpuMax(std::string_view text) {
  const std::string t = Trim(text);
  const size_t sp = t.find(' ');
  if (sp == std::string::npos) return std::nullopt;
  const std::string quota = t.substr(0, sp);
  if (quota == "max") return std::nullopt;
  auto q = ToInt(quota);
  auto p = ToInt(std::string_view(t).substr(sp + 1));
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;
  return static_cast<double>(*q) / static_cast<double>(*p);
}

std::optional<double> CgroupV1QuotaCpus(long long quota_us, long long period_us) {
  if (quota_us <= 0 || period_us <= 0) return std::nullopt;
  return static_cast<double>(quota_us) / static_cast<double>(period_us);
}

CgroupPaths ParseProcCgroup(std::string_view text) {
  CgroupPaths out;
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    // hierarchy-id:controllers:path
    const size_t a = line.find(':');
    if (a == std::string::npos) continue;
    const size_t b = line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string id = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1),
                      path = line.substr(b + 1);
    if (id == "0" && controllers.empty()) {
      out.v2 = path;
      continue;
    }
    std::istringstream cs(controllers);
    std::string c;
    while (std::getline(cs, c, ','))
      if (c == "cpu") out.v1_cpu = path;
  }
  return out;
}

std::vector<std::vector<int>> SplitCpus(const std::vector<int>& cpus, int slots) {
  std::vector<std::vector<int>> out(static_cast<size_t>(std::max(1, slots)));
  const size_t n = cpus.size(), k = out.size();
  if (n == 0) return out;
  if (n < k) {
    for (size_t s = 0; s < k; ++s) out[s].push_back(cpus[s % n]);
    return out;
  }
  size_t at = 0;
  for (size_t s = 0; s < k; ++s) {
    const size_t take = n / k + (s < n % k ? 1 : 0);
    out[s].assign(cpus.begin() + static_cast<std::ptrdiff_t>(at),
                  cpus.begin() + static_cast<std::ptrdiff_t>(at + take));
    at += take;
  }
  return out;
}

Status SetProcessAffinity(const std::vector<int>& cpus) {
  if (cpus.empty()) return Status::InvalidArgument("no CPUs to pin to");
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE)
      return Status::InvalidArgument("CPU id out of range: " + std::to_string(c));
    CPU_SET(c, &set);
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0)
    return Status::Internal(std::string("sched_setaffinity(") + FormatCpuList(cpus) +
                            "): " + std::strerror(errno));
  return {};
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<int> v = cpus;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  std::string out;
  for (size_t i = 0; i < v.size();) {
    size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) out += "-" + std::to_string(v[j]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> out;
  const std::string t = Trim(text);
  if (t.empty()) return Status::InvalidArgument("empty CPU list (expected e.g. 0-3,6)");
  std::istringstream in(t);
  std::string part;
  while (std::getline(in, part, ',')) {
    const size_t dash = part.find('-');
    auto lo = ToInt(dash == std::string::npos ? part : part.substr(0, dash));
    auto hi = dash == std::string::npos ? lo : ToInt(part.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi >= CPU_SETSIZE)
      return Status::InvalidArgument("bad CPU list entry '" + part + "' in '" + t +
                                     "' (expected e.g. 0-3,6)");
    for (long long c = *lo; c <= *hi; ++c) out.push_back(static_cast<int>(c));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

CpuBudget ProcessCpuBudget() {
  CpuBudget b;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) b.affinity.push_back(c);
  }
  if (b.affinity.empty()) {
    const int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    for (int c = 0; c < n; ++c) b.affinity.push_back(c);
  }

  std::optional<double> quota;
  const auto take = [&](std::optional<double> q) {
    if (q && (!quota || *q < *quota)) quota = q;
  };
  if (auto text = ReadSmallFile("/proc/self/cgroup")) {
    const CgroupPaths paths = ParseProcCgroup(*text);
    if (!paths.v2.empty()) {
      for (const char* mount : {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"}) {
        if (!Exists(std::string(mount) + "/cgroup.controllers")) continue;
        take(TightestOnPath(mount, paths.v2, [](const std::string& dir) -> std::optional<double> {
          auto t = ReadSmallFile(dir + "/cpu.max");
          return t ? ParseCgroupV2CpuMax(*t) : std::nullopt;
        }));
        break;
      }
    }
    if (!paths.v1_cpu.empty()) {
      for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
        if (!Exists(std::string(mount) + "/cpu.cfs_period_us")) continue;
        take(TightestOnPath(mount, paths.v1_cpu, [](const std::string& dir) -> std::optional<double> {
          auto q = ReadSmallFile(dir + "/cpu.cfs_quota_us");
          auto p = ReadSmallFile(dir + "/cpu.cfs_period_us");
          if (!q || !p) return std::nullopt;
          auto qi = ToInt(*q), pi = ToInt(*p);
          return qi && pi ? CgroupV1QuotaCpus(*qi, *pi) : std::nullopt;
        }));
        break;
      }
    }
  }
  const int n = static_cast<int>(b.affinity.size());
  b.quota_cpus = quota.value_or(0);
  b.usable = n;
  if (quota) b.usable = std::max(1, std::min(n, static_cast<int>(std::ceil(*quota - 1e-9))));
  std::ostringstream why;
  why << b.usable << (b.usable == 1 ? " core" : " cores") << " (affinity " << FormatCpuList(b.affinity);
  if (quota)
    why << ", cgroup quota " << *quota << " CPUs)";
  else
    why << ", no cgroup quota)";
  b.why = why.str();
  return b;
}

}  // namespace kestrel
