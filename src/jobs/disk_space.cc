#include "jobs/disk_space.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/parse.h"

namespace kestrel::jobs {

Result<DiskSpace> StatDiskSpace(const std::string& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) {
    return Status::IoError(std::string("statvfs failed: ") + std::strerror(errno), {path});
  }
  DiskSpace d;
  d.free_bytes = static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  d.total_bytes = static_cast<int64_t>(st.f_blocks) * static_cast<int64_t>(st.f_frsize);
  return d;
}

Result<int64_t> ParseMinFreeGb(const std::string& text, const std::string& origin) {
  KESTREL_ASSIGN_OR_RETURN(double gb,
                           ParseFiniteDouble(text, {origin, 0, "min_free_gb"}, 0, 1e9, "GB (0 = off)"));
  return static_cast<int64_t>(std::llround(gb * 1e9));
}

Result<int64_t> MinFreeBytesFromEnv() {
  const char* v = std::getenv("KESTREL_MIN_FREE_GB");
  if (v == nullptr || *v == '\0') return static_cast<int64_t>(std::llround(kDefaultMinFreeGb * 1e9));
  return ParseMinFreeGb(v, "KESTREL_MIN_FREE_GB");
}

Result<nlohmann::json> DiskStatusJson(store::MetadataStore& store, const std::string& home,
                                      int64_t min_free_bytes) {
  nlohmann::json j = {{"home", home}, {"min_free_bytes", min_free_bytes}};
  auto space = StatDiskSpace(home);
  if (space.IsOk()) {
    j["free_bytes"] = space->free_bytes;
    j["total_bytes"] = space->total_bytes;
    j["low"] = min_free_bytes > 0 && space->free_bytes < min_free_bytes;
  } else {
    j["free_bytes"] = nullptr;
    j["total_bytes"] = nullptr;
    j["low"] = false;
  }
  nlohmann::json paused = nlohmann::json::array();
  KESTREL_ASSIGN_OR_RETURN(auto workers, store.ListWorkers());
  for (const auto& w : workers) {
    auto s = store.GetSetting(kLowDiskSettingPrefix + w.id);
    if (!s.IsOk()) {
      if (s.GetStatus().Code() == StatusCode::kNotFound) continue;
      return s.GetStatus();
    }
    const auto v = nlohmann::json::parse(*s, nullptr, false);
    if (!v.is_object() || !v.value("low", false)) continue;
    paused.push_back({{"worker", w.id},
                      {"free_bytes", v.value("free_bytes", int64_t{0})},
                      {"min_free_bytes", v.value("min_free_bytes", int64_t{0})},
                      {"changed_ms", v.value("changed_ms", int64_t{0})},
                      {"heartbeat_ms", w.heartbeat_ms}});
  }
  j["paused_workers"] = std::move(paused);
  return j;
}

}  // namespace kestrel::jobs
