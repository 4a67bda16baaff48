#include "jobs/usage_sampler.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/parse.h"

extern char** environ;

namespace kestrel::jobs {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitOn(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

template <typename T>
bool ParseInt(std::string_view s, T* out) {
  s = Trim(s);
  if (s.empty()) return false;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// A CSV figure of nvidia-smi: a number, or nullopt for "[N/A]" and the like.
Result<std::optional<double>> ParseFigure(std::string_view s, int line, const char* field) {
  s = Trim(s);
  if (!s.empty() && s.front() == '[') return std::optional<double>();
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !(v >= 0))
    return Status::InvalidArgument("nvidia-smi: '" + std::string(s) + "' is not a figure",
                                   {"nvidia-smi", line, field});
  return std::optional<double>(v);
}

// The whole of a small file whose size stat() does not know (/proc).
Result<std::string> ReadSmallFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path + ": " + std::strerror(errno), {path});
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<int64_t> ParseUsageSeconds(const std::string& text, const std::string& origin) {
  KESTREL_ASSIGN_OR_RETURN(double s,
                           ParseFiniteDouble(text, {origin, 0, "usage-s"}, 0, 86400, "seconds (0 = off)"));
  if (s != 0 && s < 1)
    return Status::InvalidArgument(
        "usage sampling interval " + text +
            " s is too short: 0 (off) or at least 1 s (samples are whole seconds apart)",
        {origin, 0, "usage-s"});
  return static_cast<int64_t>(std::llround(s * 1000));
}

Result<int64_t> UsageSampleMsFromEnv() {
  const char* v = std::getenv("KESTREL_USAGE_S");
  if (v == nullptr || *v == '\0') return static_cast<int64_t>(std::llround(kDefaultUsageSeconds * 1000));
  return ParseUsageSeconds(v, "KESTREL_USAGE_S");
}

Result<ProcStat> ParseProcStat(std::string_view text, const std::string& where) {
  auto bad = [&](const std::string& field, const std::string& why) {
    return Status::InvalidArgument("/proc stat: " + why, {where, 1, field});
  };
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return bad("comm", "no '(comm)' in the text");
  ProcStat st;
  if (!ParseInt(text.substr(0, open), &st.pid) || st.pid <= 0) return bad("pid", "no pid before the comm");
  st.comm = std::string(text.substr(open + 1, close - open - 1));
  // Fields 3.. after the comm, separated by single spaces.
  std::vector<std::string_view> f;
  for (std::string_view part : SplitOn(Trim(text.substr(close + 1)), ' '))
    if (!part.empty()) f.push_back(part);
  // f[0] is field 3 (state); field N is f[N - 3]. Field 24 (rss) is the last one read.
  if (f.size() < 22) return bad("rss", "only " + std::to_string(f.size() + 2) + " fields, 24 needed");
  if (f[0].size() != 1) return bad("state", "state '" + std::string(f[0]) + "' is not one letter");
  st.state = f[0][0];
  auto field = [&](int n, const char* name, auto* out) -> Status {
    if (!ParseInt(f[static_cast<size_t>(n - 3)], out))
      return bad(name, "field " + std::to_string(n) + " (" + name + ") '" +
                           std::string(f[static_cast<size_t>(n - 3)]) + "' is not an integer");
    return {};
  };
  KESTREL_RETURN_IF_ERROR(field(4, "ppid", &st.ppid));
  KESTREL_RETURN_IF_ERROR(field(5, "pgrp", &st.pgrp));
  KESTREL_RETURN_IF_ERROR(field(14, "utime", &st.utime));
  KESTREL_RETURN_IF_ERROR(field(15, "stime", &st.stime));
  KESTREL_RETURN_IF_ERROR(field(16, "cutime", &st.cutime));
  KESTREL_RETURN_IF_ERROR(field(17, "cstime", &st.cstime));
  KESTREL_RETURN_IF_ERROR(field(24, "rss", &st.rss_pages));
  return st;
}

Result<std::optional<int64_t>> ParseVmRssKb(std::string_view text, const std::string& where) {
  int line = 0;
  for (std::string_view l : SplitOn(text, '\n')) {
    ++line;
    if (l.substr(0, 6) != "VmRSS:") continue;
    std::string_view v = Trim(l.substr(6));
    if (v.size() >= 2 && v.substr(v.size() - 2) == "kB") v = Trim(v.substr(0, v.size() - 2));
    int64_t kb = 0;
    if (!ParseInt(v, &kb) || kb < 0)
      return Status::InvalidArgument(
          "/proc status: VmRSS '" + std::string(Trim(l.substr(6))) + "' is not a size in kB",
          {where, line, "VmRSS"});
    return std::optional<int64_t>(kb);
  }
  return std::optional<int64_t>();
}

Result<std::vector<GpuDevice>> ParseGpuQueryCsv(std::string_view text) {
  std::vector<GpuDevice> out;
  int line = 0;
  for (std::string_view l : SplitOn(text, '\n')) {
    ++line;
    if (Trim(l).empty()) continue;
    const auto f = SplitOn(l, ',');
    if (f.size() != 4)
      return Status::InvalidArgument("nvidia-smi --query-gpu: " + std::to_string(f.size()) +
                                         " fields, 4 expected (index, uuid, utilization.gpu, memory.used)",
                                     {"nvidia-smi", line, "query-gpu"});
    GpuDevice d;
    if (!ParseInt(f[0], &d.index) || d.index < 0)
      return Status::InvalidArgument(
          "nvidia-smi --query-gpu: index '" + std::string(Trim(f[0])) + "' is not a GPU index",
          {"nvidia-smi", line, "index"});
    d.uuid = std::string(Trim(f[1]));
    KESTREL_ASSIGN_OR_RETURN(d.util_percent, ParseFigure(f[2], line, "utilization.gpu"));
    KESTREL_ASSIGN_OR_RETURN(d.mem_used_mb, ParseFigure(f[3], line, "memory.used"));
    out.push_back(std::move(d));
  }
  return out;
}

Result<std::vector<GpuProcess>> ParseComputeAppsCsv(std::string_view text) {
  std::vector<GpuProcess> out;
  int line = 0;
  for (std::string_view l : SplitOn(text, '\n')) {
    ++line;
    const std::string_view t = Trim(l);
    // Older drivers print this instead of nothing.
    if (t.empty() || t.find("No running") != std::string_view::npos) continue;
    const auto f = SplitOn(l, ',');
    if (f.size() != 3)
      return Status::InvalidArgument("nvidia-smi --query-compute-apps: " + std::to_string(f.size()) +
                                         " fields, 3 expected (pid, gpu_uuid, used_memory)",
                                     {"nvidia-smi", line, "query-compute-apps"});
    GpuProcess p;
    if (!ParseInt(f[0], &p.pid) || p.pid <= 0)
      return Status::InvalidArgument(
          "nvidia-smi --query-compute-apps: pid '" + std::string(Trim(f[0])) + "' is not a pid",
          {"nvidia-smi", line, "pid"});
    p.gpu_uuid = std::string(Trim(f[1]));
    KESTREL_ASSIGN_OR_RETURN(p.used_mb, ParseFigure(f[2], line, "used_memory"));
    out.push_back(std::move(p));
  }
  return out;
}

std::string FindNvidiaSmi() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (std::string_view dir : SplitOn(path, ':')) {
    if (dir.empty() || dir.front() != '/') continue;  // only absolute entries
    std::string candidate = std::string(dir) + "/nvidia-smi";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

namespace {

// Runs argv (argv[0] absolute) with stdout captured, stderr and stdin on
// /dev/null, for at most timeout_ms; its stdout when it exits 0.
Result<std::string> RunCaptured(const std::vector<std::string>& args, int64_t timeout_ms) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Status::IoError(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  argv.reserve(copy.size() + 1);
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  if (rc != 0) {
    ::close(p[0]);
    return Status::IoError(args[0] + ": cannot start: " + std::strerror(rc), {args[0]});
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  char buf[4096];
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd pfd{p[0], POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    const ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > (size_t{1} << 20)) break;  // no query prints a megabyte
  }
  ::close(p[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return Status::Unavailable(args[0] + " did not answer within " + std::to_string(timeout_ms) + " ms",
                               {args[0]});
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    return Status::Unavailable(args[0] + " " + args[1] + " failed (" +
                                   (WIFEXITED(st) ? "exit code " + std::to_string(WEXITSTATUS(st))
                                                  : "signal " + std::to_string(WTERMSIG(st))) +
                                   ")",
                               {args[0]});
  return out;
}

}  // namespace

Result<GpuSnapshot> QueryNvidiaSmi(const std::string& nvidia_smi, int64_t timeout_ms) {
  GpuSnapshot snap;
  KESTREL_ASSIGN_OR_RETURN(const std::string gpus,
                           RunCaptured({nvidia_smi, "--query-gpu=index,uuid,utilization.gpu,memory.used",
                                        "--format=csv,noheader,nounits"},
                                       timeout_ms));
  KESTREL_ASSIGN_OR_RETURN(snap.devices, ParseGpuQueryCsv(gpus));
  KESTREL_ASSIGN_OR_RETURN(const std::string apps,
                           RunCaptured({nvidia_smi, "--query-compute-apps=pid,gpu_uuid,used_memory",
                                        "--format=csv,noheader,nounits"},
                                       timeout_ms));
  KESTREL_ASSIGN_OR_RETURN(snap.processes, ParseComputeAppsCsv(apps));
  return snap;
}

UsageSampler::UsageSampler() : UsageSampler(Options{}) {}

UsageSampler::UsageSampler(Options options) : options_(std::move(options)) {
  if (options_.clock_ticks_per_second <= 0) {
    const long hz = ::sysconf(_SC_CLK_TCK);
    options_.clock_ticks_per_second = hz > 0 ? hz : 100;
  }
  if (!options_.gpu) nvidia_smi_ = FindNvidiaSmi();
}

std::optional<GpuSnapshot> UsageSampler::QueryGpu() {
  if (options_.gpu) return options_.gpu();
  if (nvidia_smi_.empty()) return std::nullopt;
  auto snap = QueryNvidiaSmi(nvidia_smi_, 5'000);
  if (!snap.IsOk()) return std::nullopt;
  return std::move(*snap);
}

Result<UsageSampler::Tree> UsageSampler::ReadTree(int64_t root) {
  // Every process's stat: the tree is found by parent links and group.
  std::map<int64_t, ProcStat> all;
  std::error_code ec;
  std::filesystem::directory_iterator it(options_.proc, ec);
  if (ec) return Status::IoError("cannot list " + options_.proc + ": " + ec.message(), {options_.proc});
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    int64_t pid = 0;
    if (!ParseInt(name, &pid) || pid <= 0) continue;
    const std::string path = options_.proc + "/" + name + "/stat";
    auto text = ReadSmallFile(path);
    if (!text.IsOk()) continue;  // exited since the listing
    auto st = ParseProcStat(*text, path);
    if (!st.IsOk()) continue;  // a text this kernel writes differently: not ours to judge here
    all[st->pid] = std::move(*st);
  }
  auto root_it = all.find(root);
  if (root_it == all.end()) return Status::NotFound("process " + std::to_string(root) + " is gone");
  // Exited but not yet reaped (a zombie has no memory and no status VmRSS):
  // as gone, so a trainer's last interval never reads as 0 MB.
  if (root_it->second.state == 'Z' || root_it->second.state == 'X')
    return Status::NotFound("process " + std::to_string(root) + " has exited");
  std::multimap<int64_t, int64_t> children;
  for (const auto& [pid, st] : all) children.emplace(st.ppid, pid);
  std::set<int64_t> in_tree{root};
  std::vector<int64_t> todo{root};
  while (!todo.empty()) {
    const int64_t p = todo.back();
    todo.pop_back();
    auto [lo, hi] = children.equal_range(p);
    for (auto c = lo; c != hi; ++c)
      if (in_tree.insert(c->second).second) todo.push_back(c->second);
  }
  const int64_t group = root_it->second.pgrp;
  if (group == root)  // the root leads its group: its members are its own
    for (const auto& [pid, st] : all)
      if (st.pgrp == group) in_tree.insert(pid);
  Tree t;
  t.members.push_back(root_it->second);
  for (int64_t pid : in_tree)
    if (pid != root) t.members.push_back(all[pid]);
  for (const auto& st : t.members) t.cpu_ticks += st.utime + st.stime + st.cutime + st.cstime;
  return t;
}

Status UsageSampler::Start(int64_t root, int64_t now_us) {
  KESTREL_ASSIGN_OR_RETURN(Tree t, ReadTree(root));
  baselines_[root] = {t.cpu_ticks, now_us};
  return {};
}

void UsageSampler::Forget(int64_t root) { baselines_.erase(root); }

Result<UsageReading> UsageSampler::Sample(int64_t root, int64_t now_us, const std::optional<GpuSnapshot>& gpu,
                                          int gpu_index) {
  auto base = baselines_.find(root);
  if (base == baselines_.end())
    return Status::FailedPrecondition("process " + std::to_string(root) +
                                      " has no baseline (Start it first)");
  auto tree = ReadTree(root);
  if (!tree.IsOk()) {
    if (tree.GetStatus().Code() == StatusCode::kNotFound) baselines_.erase(base);
    return tree.GetStatus();
  }
  UsageReading r;
  r.root = root;
  r.processes = static_cast<int>(tree->members.size());
  r.wall_seconds = static_cast<double>(now_us - base->second.at_us) / 1e6;
  // A process reaped by someone outside the tree takes its time along: the
  // total can drop. No negative usage: that interval counts from the new total.
  const uint64_t ticks =
      tree->cpu_ticks >= base->second.cpu_ticks ? tree->cpu_ticks - base->second.cpu_ticks : 0;
  r.cpu_seconds = static_cast<double>(ticks) / static_cast<double>(options_.clock_ticks_per_second);
  r.cpu_percent = r.wall_seconds > 0 ? 100.0 * r.cpu_seconds / r.wall_seconds : 0;
  base->second = {tree->cpu_ticks, now_us};
  int64_t rss_kb = 0;
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const auto& st : tree->members) {
    const std::string path = options_.proc + "/" + std::to_string(st.pid) + "/status";
    auto text = ReadSmallFile(path);
    std::optional<int64_t> kb;
    if (text.IsOk()) {
      auto parsed = ParseVmRssKb(*text, path);
      if (parsed.IsOk()) kb = *parsed;
    }
    // No status line (a zombie has none): its stat's resident pages.
    rss_kb += kb ? *kb : st.rss_pages * (page > 0 ? page : 4096) / 1024;
  }
  r.rss_mb = static_cast<double>(rss_kb) / 1024.0;
  if (gpu) {
    std::set<int64_t> pids;
    for (const auto& st : tree->members) pids.insert(st.pid);
    std::set<std::string> uuids;
    double mem = 0;
    bool any_mem = false;
    for (const auto& p : gpu->processes) {
      if (pids.count(p.pid) == 0) continue;
      uuids.insert(p.gpu_uuid);
      if (p.used_mb) {
        mem += *p.used_mb;
        any_mem = true;
      }
    }
    if (!uuids.empty()) {
      // The tree's own memory; the utilisation of the busiest GPU it runs on.
      if (any_mem) r.gpu_mem_mb = mem;
      for (const auto& d : gpu->devices)
        if (uuids.count(d.uuid) != 0 && d.util_percent)
          r.gpu_util_percent = std::max(r.gpu_util_percent.value_or(0), *d.util_percent);
    } else if (gpu_index >= 0) {
      // Not listed (another PID namespace): the device the attempt runs on.
      for (const auto& d : gpu->devices) {
        if (d.index != gpu_index) continue;
        r.gpu_util_percent = d.util_percent;
        r.gpu_mem_mb = d.mem_used_mb;
      }
    }
  }
  return r;
}

}  // namespace kestrel::jobs
