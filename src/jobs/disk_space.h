// The low-disk watermark (docs/disk.md): free space of the Kestrel home's
// filesystem, the threshold below which a worker stops claiming new jobs,
// and what `kestrel stats` shows about it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"
#include "store/metadata_store.h"

namespace kestrel::jobs {

struct DiskSpace {
  int64_t free_bytes = 0;  // available to an unprivileged process (statvfs f_bavail)
  int64_t total_bytes = 0;
};
// statvfs(2) of the filesystem holding `path`.
Result<DiskSpace> StatDiskSpace(const std::string& path);

// The watermark default when neither --min-free-gb nor KESTREL_MIN_FREE_GB is set.
inline constexpr double kDefaultMinFreeGb = 1.0;
// Parses a watermark in GB (10^9 bytes, decimals allowed, 0 = off) into
// bytes; `origin` names the flag or variable in errors.
Result<int64_t> ParseMinFreeGb(const std::string& text, const std::string& origin);
// KESTREL_MIN_FREE_GB, else kDefaultMinFreeGb, in bytes.
Result<int64_t> MinFreeBytesFromEnv();

// Each worker publishes its watermark state, on every change, as the store
// setting kLowDiskSettingPrefix + worker id: {"low", "free_bytes",
// "min_free_bytes", "changed_ms"}.
inline constexpr const char* kLowDiskSettingPrefix = "disk.low.";

// `kestrel stats`' "disk" object: {"home", "free_bytes", "total_bytes",
// "min_free_bytes", "low" (this filesystem is below the watermark now),
// "paused_workers": [{"worker", "free_bytes", "min_free_bytes", "changed_ms",
// "heartbeat_ms"}] (registered workers whose last published state is low)}.
// A failing statvfs leaves free/total null and low false.
Result<nlohmann::json> DiskStatusJson(store::MetadataStore& store, const std::string& home,
                                      int64_t min_free_bytes);

}  // namespace kestrel::jobs
