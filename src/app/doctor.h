// `kestrel doctor` (issue 31, docs/jobs.md "Doctor"): whether this host can
// run jobs, checked in a few seconds before a job finds out the hard way —
// kestrel-torch starts and loads its libraries, a tiny forward and backward
// pass runs on each device, the metadata store and the artifact store are
// reachable and writable (a probe written, read back and deleted), the
// home's filesystem has free space, the clock agrees with the database's,
// and the environment fingerprint's hash. Each finding says what failed,
// why and what to do. A starting `kestrel worker` runs the same checks and
// refuses to claim when one fails (an environment failure of its host).
//
// Torch-free: the LibTorch half's answer (`kestrel-torch --json fingerprint
// --selftest DEVICES`) and every opener come in through DoctorProbes, so a
// test injects an unwritable store, a store that is down, a full disk or a
// skewed clock. Thread-compatible: one RunDoctor per DoctorProbes at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "jobs/disk_space.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

enum class CheckState { kOk, kWarn, kSkip, kFail };
// "ok", "warn", "skip", "fail".
const char* CheckStateName(CheckState s);

struct DoctorCheck {
  // "libraries", "device cpu", "device cuda:0", "metadata store",
  // "artifact store", "disk", "clock", "fingerprint".
  std::string name;
  CheckState state = CheckState::kOk;
  std::string message;  // what was found (the error's own text on a failure)
  std::string fix;      // what to do; "" when there is nothing to do
  int64_t ms = 0;       // how long the check took
  // A failure because a shared service (the database, S3) did not answer
  // (kUnavailable: refused, timed out): not this host's environment.
  bool unavailable = false;
};

struct DoctorOptions {
  std::string host;  // this host's name: the store probe is the setting "doctor.HOST"
  std::string home;  // free space is checked on its filesystem (the job folders live under it)
  // Below this many free bytes the disk check fails (a worker's --min-free-gb,
  // docs/disk.md); 0 = report the free space only.
  int64_t min_free_bytes = 1'000'000'000;
  // A larger difference between this host's clock and the database's fails
  // the clock check: leases and heartbeats compare times written by
  // different hosts. > 0.
  int64_t max_clock_skew_ms = 2'000;
};

// Where the checks reach the world. Every opener may be called once.
struct DoctorProbes {  // NOLINT(bugprone-exception-escape): an aggregate; the check misreads its
                       // implicit members (as app::LoadedSplit's)
  // The LibTorch half (`kestrel-torch`, for messages); "" = this build has
  // none, so the library and device checks are skipped.
  std::string torch_program;
  // Its `--json fingerprint --selftest DEVICES` document ({"fingerprint",
  // "selftest": [{"device", "ok", "ms", "error"}]}), or null and
  // `torch_error` saying why it could not run (the loader's message, a
  // signal such as SIGILL, the exit code).
  nlohmann::json torch;
  std::string torch_error;
  int64_t torch_ms = 0;  // how long that took: the libraries check's time
  std::function<Result<std::unique_ptr<store::MetadataStore>>()> open_meta;
  std::string meta_location;  // the store's URL for messages (no password)
  std::function<Result<std::unique_ptr<store::ArtifactStore>>()> open_artifacts;
  // Free space of the filesystem holding a path (jobs::StatDiskSpace).
  std::function<Result<jobs::DiskSpace>(const std::string&)> disk_space;
  // The database server's clock, Unix ms (PostgreSQL's clock_timestamp());
  // empty for a store without a server clock (SQLite): the check is skipped.
  std::function<Result<int64_t>()> database_clock_ms;
};

struct DoctorReport {               // NOLINT(bugprone-exception-escape): an aggregate; the check misreads its
                                    // implicit members (as app::LoadedSplit's)
  std::vector<DoctorCheck> checks;  // in the order above
  nlohmann::json fingerprint;       // app/fingerprint.h, LibTorch's facts merged in
  std::string fingerprint_hash;
  int64_t elapsed_ms = 0;  // the checks' time, kestrel-torch's run (torch_ms) included
  // No check failed (warnings and skips do not count).
  bool Ok() const;
};

// Runs every check; never stops at the first failure. `env` gives the clock
// and the probe's unique text.
DoctorReport RunDoctor(const DoctorOptions& options, const DoctorProbes& probes, Env& env);

// {"ok", "failed" (count), "checks": [{"name", "state", "message", "fix",
// "ms", "unavailable"}], "hash", "fingerprint", "elapsed_ms"}.
nlohmann::json DoctorJson(const DoctorReport& r);
// One line per check ("ok    disk  …", a failure's "fix:" under it) and a
// closing line with the counts and the time.
std::string DoctorText(const DoctorReport& r);

// OK when no check failed, except those named in `ignore` and, unless
// `count_unavailable`, those of a shared service that did not answer (a
// worker ignores "disk": its low-disk watermark pauses claims instead,
// docs/disk.md; and a database or S3 outage, which it rides out like one
// that starts later, instead of charging it to its host); else
// kFailedPrecondition with reason kEnvironment naming each failed check and
// its message ("artifact store: …; clock: …").
Status DoctorStatus(const DoctorReport& r, const std::vector<std::string>& ignore = {},
                    bool count_unavailable = true);

}  // namespace kestrel::app
