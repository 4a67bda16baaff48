#include "app/stats.h"

#include "app/system.h"
#include "jobs/breaker.h"
#include "jobs/disk_space.h"

namespace kestrel::app {

Result<StatsReport> JobStatsReport(store::MetadataStore& meta, const std::string& home) {
  StatsReport r;
  KESTREL_ASSIGN_OR_RETURN(r.jobs, meta.Stats());
  jobs::CircuitBreaker breaker;
  KESTREL_RETURN_IF_ERROR(jobs::RefreshBreaker(breaker, meta));
  r.breaker_open = breaker.IsOpen();
  r.breaker_reason = breaker.Reason();
  KESTREL_ASSIGN_OR_RETURN(r.min_free_bytes, jobs::MinFreeBytesFromEnv());
  KESTREL_ASSIGN_OR_RETURN(r.disk, jobs::DiskStatusJson(meta, home, r.min_free_bytes));
  KESTREL_ASSIGN_OR_RETURN(auto hosts, meta.ListHosts());
  for (auto& h : hosts)
    if (h.quarantined_ms > 0) r.quarantined_hosts.push_back(std::move(h));
  return r;
}

nlohmann::json StatsJson(const StatsReport& r) {
  const store::JobStats& s = r.jobs;
  nlohmann::json quarantined = nlohmann::json::array();
  for (const auto& h : r.quarantined_hosts) quarantined.push_back(HostJson(h));
  return {{"jobs", s.jobs},
          {"succeeded", s.succeeded},
          {"failed_permanent", s.failed_permanent},
          {"cancelled", s.cancelled},
          {"live", s.live},
          {"finished", s.succeeded + s.failed_permanent},
          {"availability", s.availability},
          {"attempts", s.attempts},
          {"failed_attempts", s.failed_attempts},
          {"cancelled_attempts", s.cancelled_attempts},
          {"retries", s.retries},
          {"infra_retries", s.infra_retries},
          {"failures_by_stage", s.failures_by_stage},
          {"failures_by_class", s.failures_by_class},
          {"failures_by_reason", s.failures_by_reason},
          {"mean_time_to_recovery_ms", s.mean_time_to_recovery_ms},
          {"recovered_jobs", s.recovered_jobs},
          {"mean_time_to_restart_ms", s.mean_time_to_restart_ms},
          {"restarted_attempts", s.restarted_attempts},
          {"breaker", {{"open", r.breaker_open}, {"reason", r.breaker_reason}}},
          {"disk", r.disk},
          {"quarantined_hosts", quarantined}};
}

}  // namespace kestrel::app
