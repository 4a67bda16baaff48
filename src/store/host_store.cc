// Host operations of SqlStore (docs/jobs.md "Quarantine and drain",
// "Environment fingerprint"; migration 15): environment failures counted per
// host up to a quarantine, drains by worker id or host, the control a worker
// reads before it claims, and fingerprints stored once per hash.
#include "store/internal/sql_store.h"

namespace kestrel::store {
namespace {

constexpr const char* kHostColumns =
    "host, env_failures, quarantined_at, quarantine_reason, last_failure, drain_at, cleared_at, updated_at";

HostRecord ReadHost(const SqlRow& r) {
  HostRecord h;
  h.host = r.Text(0);
  h.env_failures = r.Int(1);
  h.quarantined_ms = r.Int(2);
  h.quarantine_reason = r.Text(3);
  h.last_failure = r.Text(4);
  h.drain_ms = r.Int(5);
  h.cleared_ms = r.Int(6);
  h.updated_ms = r.Int(7);
  return h;
}

Status CheckHost(const std::string& host) {
  if (host.empty()) return Status::InvalidArgument("host name is empty", {"", 0, "host"});
  return {};
}

}  // namespace

Result<std::optional<HostRecord>> SqlStore::LoadHost(const std::string& host, bool lock) {
  KESTREL_ASSIGN_OR_RETURN(
      auto rows, conn_->Query(std::string("SELECT ") + kHostColumns + " FROM hosts WHERE host = $1" +
                                  (lock && conn_->Dialect() == SqlDialect::kPostgres ? " FOR UPDATE" : ""),
                              {host}));
  if (rows.empty()) return std::optional<HostRecord>();
  return std::optional<HostRecord>(ReadHost(rows[0]));
}

Result<HostRecord> SqlStore::RecordEnvironmentFailure(const std::string& host, const std::string& message,
                                                      int quarantine_after, int64_t now_ms) {
  KESTREL_RETURN_IF_ERROR(CheckHost(host));
  if (quarantine_after < 1) {
    return Status::InvalidArgument("quarantine_after must be >= 1", {"", 0, "quarantine_after"});
  }
  HostRecord out;
  Status st = InTransaction([&]() -> Status {
    // Insert-or-count in one statement, so two workers of one host failing
    // at once both count (the row lock serialises them).
    KESTREL_RETURN_IF_ERROR(conn_
                                ->Exec("INSERT INTO hosts(host, env_failures, last_failure, updated_at) "
                                       "VALUES ($1, 1, $2, $3) ON CONFLICT (host) DO UPDATE SET "
                                       "env_failures = hosts.env_failures + 1, last_failure = "
                                       "excluded.last_failure, updated_at = excluded.updated_at",
                                       {host, message, now_ms})
                                .GetStatus());
    KESTREL_ASSIGN_OR_RETURN(auto h, LoadHost(host, true));
    if (!h) return Status::Internal("host row '" + host + "' vanished inside its transaction");
    if (h->quarantined_ms == 0 && h->env_failures >= quarantine_after) {
      h->quarantined_ms = now_ms;
      h->quarantine_reason = std::to_string(h->env_failures) +
                             " environment failure(s) on this host (limit " +
                             std::to_string(quarantine_after) + "); last: " + message;
      KESTREL_RETURN_IF_ERROR(
          conn_
              ->Exec("UPDATE hosts SET quarantined_at = $1, quarantine_reason = $2 WHERE host = $3",
                     {h->quarantined_ms, h->quarantine_reason, host})
              .GetStatus());
    }
    out = *h;
    return {};
  });
  if (!st.IsOk()) return st;
  return out;
}

Result<HostRecord> SqlStore::UnquarantineHost(const std::string& host, int64_t now_ms) {
  KESTREL_RETURN_IF_ERROR(CheckHost(host));
  HostRecord out;
  Status st = InTransaction([&]() -> Status {
    KESTREL_ASSIGN_OR_RETURN(auto h, LoadHost(host, true));
    if (!h) {
      return Status::NotFound("host '" + host +
                              "' has no record: it never had an environment failure or a drain (kestrel "
                              "workers lists the hosts)");
    }
    KESTREL_RETURN_IF_ERROR(conn_
                                ->Exec("UPDATE hosts SET quarantined_at = 0, quarantine_reason = '', "
                                       "env_failures = 0, cleared_at = $1, updated_at = $1 WHERE host = $2",
                                       {now_ms, host})
                                .GetStatus());
    h->quarantined_ms = 0;
    h->quarantine_reason.clear();
    h->env_failures = 0;
    h->cleared_ms = now_ms;
    h->updated_ms = now_ms;
    out = *h;
    return {};
  });
  if (!st.IsOk()) return st;
  return out;
}

Result<std::vector<std::string>> SqlStore::SetDrain(const std::string& target, bool drain, int64_t now_ms) {
  if (target.empty()) return Status::InvalidArgument("worker id or host is empty", {"", 0, "target"});
  std::vector<std::string> ids;
  Status st = InTransaction([&]() -> Status {
    ids.clear();
    const int64_t at = drain ? now_ms : 0;
    KESTREL_ASSIGN_OR_RETURN(int64_t n,
                             conn_->Exec("UPDATE workers SET drain_at = $1 WHERE id = $2", {at, target}));
    if (n > 0) {
      ids.push_back(target);
      return {};
    }
    KESTREL_ASSIGN_OR_RETURN(auto rows,
                             conn_->Query("SELECT id FROM workers WHERE host = $1 ORDER BY id", {target}));
    KESTREL_ASSIGN_OR_RETURN(auto h, LoadHost(target, true));
    if (rows.empty() && !h) {
      return Status::NotFound("no worker has the id '" + target + "' and no worker registered from a host '" +
                              target + "' (kestrel workers lists both)");
    }
    for (const auto& r : rows) ids.push_back(r.Text(0));
    // The host's own flag, so workers started there later drain too; an
    // undrain of a host also lifts the drains of its workers one by one.
    KESTREL_RETURN_IF_ERROR(conn_
                                ->Exec("INSERT INTO hosts(host, drain_at, updated_at) VALUES ($1, $2, $3) "
                                       "ON CONFLICT (host) DO UPDATE SET drain_at = excluded.drain_at, "
                                       "updated_at = excluded.updated_at",
                                       {target, at, now_ms})
                                .GetStatus());
    if (!drain) {
      KESTREL_RETURN_IF_ERROR(
          conn_->Exec("UPDATE workers SET drain_at = 0 WHERE host = $1", {target}).GetStatus());
    }
    return {};
  });
  if (!st.IsOk()) return st;
  return ids;
}

Result<std::vector<HostRecord>> SqlStore::ListHosts() {
  KESTREL_ASSIGN_OR_RETURN(
      auto rows, conn_->Query(std::string("SELECT ") + kHostColumns + " FROM hosts ORDER BY host", {}));
  std::vector<HostRecord> out;
  for (const auto& r : rows) out.push_back(ReadHost(r));
  return out;
}

Result<WorkerControl> SqlStore::GetWorkerControl(const std::string& worker, const std::string& host) {
  // One round trip: the worker's own drain beside its host's row.
  KESTREL_ASSIGN_OR_RETURN(
      auto rows,
      conn_->Query("SELECT COALESCE((SELECT drain_at FROM workers WHERE id = $1), 0), h.drain_at, "
                   "h.quarantined_at, h.quarantine_reason, h.cleared_at FROM (SELECT 1 AS one) o LEFT JOIN "
                   "hosts h ON h.host = $2",
                   {worker, host}));
  WorkerControl c;
  if (rows.empty()) return c;
  const SqlRow& r = rows[0];
  c.draining = r.Int(0) > 0 || (!r.IsNull(1) && r.Int(1) > 0);
  c.quarantined = !r.IsNull(2) && r.Int(2) > 0;
  if (c.quarantined) c.reason = r.Text(3);
  c.cleared_ms = r.IsNull(4) ? 0 : r.Int(4);
  return c;
}

Status SqlStore::PutFingerprint(const std::string& hash, const std::string& json, int64_t now_ms) {
  if (hash.empty()) return Status::InvalidArgument("fingerprint hash is empty", {"", 0, "fingerprint"});
  return conn_
      ->Exec(
          "INSERT INTO fingerprints(hash, json, created_at) VALUES ($1, $2, $3) ON CONFLICT (hash) DO "
          "NOTHING",
          {hash, json, now_ms})
      .GetStatus();
}

Result<std::string> SqlStore::GetFingerprint(const std::string& hash) {
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query("SELECT json FROM fingerprints WHERE hash = $1", {hash}));
  if (rows.empty()) return Status::NotFound("no environment fingerprint '" + hash + "' in the store");
  return rows[0].Text(0);
}

}  // namespace kestrel::store
