// `kestrel stats` as a use case (docs/jobs.md): job availability, failures,
// retries, MTTR, the circuit breaker and the disk watermark, with its one
// JSON view, which the CLI prints with --json and the server returns at
// /api/stats. Thread-safety: borrows one MetadataStore (one per thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// NOLINTNEXTLINE(bugprone-exception-escape): the implicit members only move a json (noexcept in practice)
struct StatsReport {
  store::JobStats jobs;
  bool breaker_open = false;
  std::string breaker_reason;
  nlohmann::json disk;         // jobs::DiskStatusJson: free_bytes, low, paused_workers, ...
  int64_t min_free_bytes = 0;  // the disk watermark (KESTREL_MIN_FREE_GB), 0 = off
  // Quarantined hosts (docs/jobs.md "Quarantine and drain"): they claim nothing.
  std::vector<store::HostRecord> quarantined_hosts;
};

// Reads the stats and refreshes the breaker from the recent attempts; the
// disk figures are those of the filesystem holding `home`.
Result<StatsReport> JobStatsReport(store::MetadataStore& meta, const std::string& home);

// jobs, succeeded, failed_permanent, cancelled, live, finished (succeeded +
// failed_permanent: availability's denominator; availability is 0 when it
// is 0, which a reader shows as "none finished"), availability, attempts
// (ended, but not cancelled), cancelled_attempts, failed_attempts, retries, infra_retries, failures_by_stage,
// failures_by_class, failures_by_reason, mean_time_to_recovery_ms,
// recovered_jobs, mean_time_to_restart_ms, restarted_attempts,
// breaker {open, reason}, disk, quarantined_hosts [{"host", "env_failures",
// "quarantined_ms", "quarantine_reason", ...}: app::HostJson].
nlohmann::json StatsJson(const StatsReport& r);

}  // namespace kestrel::app
