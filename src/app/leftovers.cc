#include "app/leftovers.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>
#include <vector>

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

bool AllDigits(std::string_view s) {
  return !s.empty() && s.size() <= 18 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

bool StartsWith(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool EndsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// The <pid> of a name ending in "<pid>-<n>" from `start` on; 0 when it does not.
int64_t PidAt(std::string_view name, size_t start) {
  const std::string_view rest = name.substr(start);
  const size_t dash = rest.find('-');
  if (dash == std::string_view::npos) return 0;
  const std::string_view pid = rest.substr(0, dash), n = rest.substr(dash + 1);
  if (!AllDigits(pid) || !AllDigits(n)) return 0;
  return std::stoll(std::string(pid));
}

bool IsHex64(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// The boot time (Unix seconds) from /proc/stat, 0 when unknown.
int64_t BootTimeS() {
  std::ifstream in("/proc/stat");
  std::string key;
  int64_t value = 0;
  while (in >> key) {
    if (key == "btime" && (in >> value)) return value;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

// When process `pid` started (Unix seconds, within a second), if /proc says.
std::optional<int64_t> ProcessStartS(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // "pid (comm) state ..." where comm may hold spaces and parentheses.
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return std::nullopt;
  std::istringstream fields(line.substr(close + 2));
  std::string f;
  for (int i = 0; i < 20; ++i) {  // field 3 (state) ... field 22 (starttime, clock ticks after boot)
    if (!(fields >> f)) return std::nullopt;
  }
  static const int64_t boot = BootTimeS();
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (boot <= 0 || hz <= 0 || !AllDigits(f)) return std::nullopt;
  return boot + std::stoll(f) / hz;
}

// The newest mtime and the file bytes of `p` and, for a folder, all under it
// (symlinks not followed).
struct TreeStat {
  int64_t newest_mtime_s = 0;
  uint64_t bytes = 0;
};
TreeStat StatTree(const fs::path& p) {
  TreeStat t;
  std::vector<fs::path> todo{p};
  while (!todo.empty()) {
    const fs::path cur = todo.back();
    todo.pop_back();
    struct stat st {};
    if (::lstat(cur.c_str(), &st) != 0) continue;
    t.newest_mtime_s = std::max<int64_t>(t.newest_mtime_s, st.st_mtime);
    if (S_ISREG(st.st_mode)) t.bytes += static_cast<uint64_t>(st.st_size);
    if (!S_ISDIR(st.st_mode)) continue;
    std::error_code ec;
    for (fs::directory_iterator it(cur, ec), end; !ec && it != end; it.increment(ec))
      todo.push_back(it->path());
  }
  return t;
}

// `p` without trailing separators, "." and ".." folded: how two spellings of
// one folder compare equal.
std::string Normal(const fs::path& p) {
  std::string s = p.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

class Reclaimer {
 public:
  Reclaimer(const std::string& home, const LeftoverOptions& o, int64_t now_s)
      : home_(Normal(home)),
        uploads_(Normal(o.upload_dir.empty() ? fs::path(home) / "uploads" : fs::path(o.upload_dir))),
        objects_(Normal(fs::path(home) / "objects")),
        o_(o),
        now_s_(now_s) {}

  void Walk(const fs::path& top) {
    std::vector<fs::path> todo{top};
    while (!todo.empty()) {
      const fs::path dir = todo.back();
      todo.pop_back();
      const std::string dir_text = Normal(dir);
      const bool in_uploads = dir_text == uploads_;
      const bool in_objects = Normal(dir.parent_path()) == objects_;
      std::error_code ec;
      for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const fs::path p = it->path();
        const std::string name = p.filename().string();
        std::error_code sec;
        const fs::file_status st = it->symlink_status(sec);
        if (sec) continue;
        if (const int64_t pid = LeftoverPid(name, in_uploads); pid > 0) {
          Leftover(p, pid);
        } else if (in_objects && EndsWith(name, ".gc") &&
                   IsHex64(std::string_view(name).substr(0, name.size() - 3)) &&
                   StartsWith(name, dir.filename().string())) {
          Aside(p);
        } else if (fs::is_directory(st)) {
          todo.push_back(p);
        }
      }
    }
  }

  LeftoverReport Report() {
    std::sort(r_.removed_paths.begin(), r_.removed_paths.end());
    return r_;
  }

 private:
  std::string Shown(const fs::path& p) const {
    std::string s = Normal(p);
    if (s.size() > home_.size() && s.compare(0, home_.size(), home_) == 0 && s[home_.size()] == '/')
      return s.substr(home_.size() + 1);
    return s;
  }
  bool Recent(int64_t mtime_s) const { return now_s_ - mtime_s < o_.min_age_s; }

  void Leftover(const fs::path& p, int64_t pid) {
    const TreeStat t = StatTree(p);
    if (WriterMayBeRunning(pid, t.newest_mtime_s)) {
      ++r_.kept_running;
      return;
    }
    if (Recent(t.newest_mtime_s)) {
      ++r_.kept_recent;
      return;
    }
    if (!o_.dry_run) {
      std::error_code ec;
      fs::remove_all(p, ec);
      if (ec) return;
    }
    ++r_.removed;
    r_.removed_bytes += t.bytes;
    r_.removed_paths.push_back(Shown(p));
  }

  // objects/<aa>/<sha>.gc: a collector stopped between moving a blob aside
  // and deleting it. Putting it back is always safe (a later gc decides
  // again); when the blob exists (a writer stored it anew), the copy goes.
  void Aside(const fs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
    if (Recent(st.st_mtime)) {
      ++r_.kept_recent;
      return;
    }
    std::string blob = p.string();
    blob.resize(blob.size() - 3);
    struct stat bst {};
    if (::lstat(blob.c_str(), &bst) != 0) {
      if (!o_.dry_run && ::rename(p.c_str(), blob.c_str()) != 0) return;
      ++r_.restored;
      return;
    }
    if (!o_.dry_run && ::unlink(p.c_str()) != 0) return;
    ++r_.removed;
    r_.removed_bytes += static_cast<uint64_t>(st.st_size);
    r_.removed_paths.push_back(Shown(p));
  }

  std::string home_, uploads_, objects_;
  const LeftoverOptions& o_;
  int64_t now_s_;
  LeftoverReport r_;
};

}  // namespace

int64_t LeftoverPid(const std::string& name, bool in_uploads) {
  const std::string_view n(name);
  if (in_uploads) {
    if (StartsWith(n, "upload-") && EndsWith(n, ".part")) return PidAt(n.substr(0, n.size() - 5), 7);
    if (StartsWith(n, "import-")) return PidAt(n, 7);
  }
  for (std::string_view marker : {std::string_view(".kestrel-tmp-"), std::string_view(".tmp-")}) {
    const size_t at = n.rfind(marker);
    if (at != std::string_view::npos && at > 0) {
      if (const int64_t pid = PidAt(n, at + marker.size()); pid > 0) return pid;
    }
  }
  return 0;
}

bool WriterMayBeRunning(int64_t pid, int64_t mtime_s) {
  if (pid <= 0 || pid > INT_MAX) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;  // EPERM: someone's, running
  // A process that started after the leftover was last written is not its
  // writer: the PID was reused. (2 s: the start time is known to a second.)
  const std::optional<int64_t> start = ProcessStartS(pid);
  return !(start && *start > mtime_s + 2);
}

Result<LeftoverReport> ReclaimLeftovers(const std::string& home, const LeftoverOptions& options,
                                        int64_t now_s) {
  std::error_code ec;
  if (!fs::is_directory(home, ec)) return LeftoverReport{};  // nothing written yet
  Reclaimer r(home, options, now_s);
  const fs::path uploads =
      options.upload_dir.empty() ? fs::path(home) / "uploads" : fs::path(options.upload_dir);
  if (options.quick) {
    r.Walk(fs::path(home) / "objects");
    r.Walk(uploads);
  } else {
    r.Walk(home);
    // An upload folder outside the home is walked for its own names only.
    const std::string h = Normal(home), u = Normal(uploads);
    if (!(u.size() > h.size() && u.compare(0, h.size(), h) == 0 && u[h.size()] == '/')) r.Walk(uploads);
  }
  return r.Report();
}

nlohmann::json LeftoverReportJson(const LeftoverReport& r) {
  return {{"removed", r.removed},         {"removed_bytes", r.removed_bytes},
          {"restored", r.restored},       {"kept_running", r.kept_running},
          {"kept_recent", r.kept_recent}, {"removed_paths", r.removed_paths}};
}

}  // namespace kestrel::app
