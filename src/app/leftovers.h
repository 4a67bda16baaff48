// Leftovers of crashed writers in the Kestrel home (docs/disk.md
// "Leftovers of crashed writers"): the temp files and folders a process
// killed mid-write (SIGKILL, OOM, power loss) never renamed or removed.
// Every temp name Kestrel writes carries its writer's PID:
//
//   <file>.tmp-<pid>-<n>            Env::WriteFileAtomic/Deferred (blobs in
//                                   objects/<aa>/, job files, checkpoints)
//   <folder>.kestrel-tmp-<pid>-<n>  StagedDir (run folders, dataset trees)
//   <uploads>/upload-<pid>-<n>.part an HTTP upload's body (kestrel serve)
//   <uploads>/import-<pid>-<n>      that upload unpacked for its import
//
// and the collector's own objects/<aa>/<sha>.gc (a blob moved aside,
// no PID; put back when the blob is absent, else removed).
//
// A leftover is reclaimed only when BOTH hold:
//   1. its writer is gone: no process has the PID in its name, or the one
//      that has it started after the leftover was last written (the PID
//      was reused; /proc/<pid>/stat's start time against the mtime);
//   2. nothing in it was written for `min_age_s` (a folder: its newest
//      mtime inside): a writer on another host sharing the home, whose
//      PID means nothing here, is still writing.
// Anything else is kept and counted. Symlinks are never followed.
//
// Thread-safety: free functions; the filesystem is the only shared state.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::app {

// `kestrel serve`'s minimum age of a leftover it reclaims at start (gc uses
// its --grace-s).
inline constexpr int64_t kLeftoverMinAgeS = 600;

struct LeftoverOptions {
  bool dry_run = false;  // count, remove nothing
  int64_t min_age_s = kLeftoverMinAgeS;
  // false: the whole home (gc); true: only objects/ and the upload folder
  // (kestrel serve's start: the big ones, without walking jobs/).
  bool quick = false;
  std::string upload_dir;  // where uploads are written; "" = <home>/uploads
};

struct LeftoverReport {
  int64_t removed = 0;                     // files and folders removed (dry run: would be)
  uint64_t removed_bytes = 0;              // their file bytes
  int64_t restored = 0;                    // <sha>.gc moved back to <sha>
  int64_t kept_running = 0;                // the writer still runs
  int64_t kept_recent = 0;                 // written within min_age_s
  std::vector<std::string> removed_paths;  // relative to the home (absolute outside it), sorted
};

// Finds and reclaims the leftovers under `home` (see the file comment).
// `now_s`: Unix seconds. Errors only when `home` cannot be listed; a
// leftover that cannot be removed stays and is not counted.
Result<LeftoverReport> ReclaimLeftovers(const std::string& home, const LeftoverOptions& options,
                                        int64_t now_s);

// The PID a temp name of the forms above carries, or 0 when `name` is none
// of them (`in_uploads`: whether its folder is the upload folder).
int64_t LeftoverPid(const std::string& name, bool in_uploads);

// Whether process `pid` may be the writer of something last written at
// `mtime_s` (Unix seconds): it exists and did not start after that.
bool WriterMayBeRunning(int64_t pid, int64_t mtime_s);

// {"removed", "removed_bytes", "restored", "kept_running", "kept_recent", "removed_paths"}
nlohmann::json LeftoverReportJson(const LeftoverReport& r);

}  // namespace kestrel::app
