// Job events of SqlStore (the events table: docs/jobs.md "Tables"): the insert
// every job transaction ends with and the paged read the event stream and
// the charts use. Event ids are a counter row on SQLite and a sequence plus
// an advisory lock on PostgreSQL (InsertEvent, ReadEvents). Split from
// job_store.cc.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/json.h"
#include "store/internal/sql_store.h"

namespace kestrel::store {
namespace {

// PostgreSQL event insert, parameters job, attempt, kind, payload, time.
const std::string& PgEventInsert() {
  static const std::string sql = "WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock_shared(" +
                                 std::to_string(kEventLock) +
                                 ")) INSERT INTO events(id, job_id, attempt, kind, payload_json, created_at) "
                                 "SELECT nextval('event_ids'), $1, $2, $3, $4, $5 FROM l";
  return sql;
}

}  // namespace

Result<int64_t> SqlStore::InsertEvent(int64_t job_id, int64_t attempt, const std::string& kind,
                                      const std::string& payload_json, int64_t now_ms) {
  if (conn_->Dialect() == SqlDialect::kPostgres) {
    // Ids come from a sequence (migration 5), so concurrent job transactions
    // do not queue behind one counter row. A sequence alone would let a
    // reader see id 101 committed before id 100 and page past 100; every
    // inserting transaction therefore holds kEventLock *shared* from before
    // it draws its id until it ends, and ReadEvents takes it exclusively:
    // once granted, every id drawn so far belongs to a finished transaction.
    // The MATERIALIZED CTE takes the lock before nextval() runs. Shared, not
    // exclusive: an exclusive lock here would serialize every job
    // transaction from its event insert to its COMMIT again, which is what
    // the counter row did (claims topped out at ~250/s with 32 workers);
    // the waiting falls on readers instead (tests/store/
    // postgres_event_order_test.cc). Callers insert events last in their
    // transactions (StateEvent rides with the COMMIT), so the lock is held
    // for about one round trip.
    KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query(PgEventInsert() + " RETURNING id",
                                                     {job_id, attempt, kind, payload_json, now_ms}));
    if (rows.empty()) return Status::Internal("event insert returned no id");
    return rows[0].Int(0);
  }
  KESTREL_ASSIGN_OR_RETURN(int64_t id, NextId("event"));
  KESTREL_RETURN_IF_ERROR(
      conn_
          ->Exec("INSERT INTO events(id, job_id, attempt, kind, payload_json, created_at) "
                 "VALUES ($1, $2, $3, $4, $5, $6)",
                 {id, job_id, attempt, kind, payload_json, now_ms})
          .GetStatus());
  return id;
}

Status SqlStore::StateEvent(const JobRecord& job, int64_t now_ms) {
  nlohmann::json p = {{"state", JobStateName(job.state)}, {"attempt", job.attempt}};
  if (!job.last_reason.empty() && job.state != JobState::kRunning && job.state != JobState::kQueued) {
    p["reason"] = job.last_reason;
  }
  if (job.state == JobState::kFailedRetryable) p["not_before_ms"] = job.not_before_ms;
  if (conn_->Dialect() == SqlDialect::kPostgres) {
    // InsertEvent's statement without RETURNING: nobody reads the id, so it
    // can ride with the COMMIT (SqlConn::ExecLater).
    return conn_->ExecLater(PgEventInsert(),
                            {job.id, job.attempt, std::string("state"), DumpJson(p), now_ms});
  }
  return InsertEvent(job.id, job.attempt, "state", DumpJson(p), now_ms).GetStatus();
}

Result<int64_t> SqlStore::AppendEvent(const EventRecord& ev) {
  int64_t id = 0;
  Status st = InTransaction([&]() -> Status {
    KESTREL_ASSIGN_OR_RETURN(id, InsertEvent(ev.job_id, ev.attempt, ev.kind, ev.payload_json, ev.created_ms));
    return {};
  });
  if (!st.IsOk()) return st;
  return id;
}

Result<std::vector<EventRecord>> SqlStore::ReadEvents(int64_t after_id, int64_t job_id, int limit) {
  if (conn_->Dialect() != SqlDialect::kPostgres) return SelectEvents(after_id, job_id, limit, 0);
  // Ids are drawn when an INSERT runs, not when its transaction commits, so
  // "every event after after_id that is committed now" is not enough: an id
  // below one we return may still be in flight and commit later, behind a
  // cursor that passed it. Every transaction that draws an event id holds
  // kEventLock shared from before the draw to its end (InsertEvent). This
  // statement takes it exclusively, which waits for each of them to end,
  // and reads the sequence: every id up to `bound` then belongs to a
  // finished transaction (committed or rolled back), and ids drawn later are
  // larger. The lock lives only for this statement (autocommit), not for
  // the page read below, so writers queue behind a reader for one short
  // statement. The page is read in a statement of its own, whose snapshot
  // starts after every transaction up to `bound` ended, whatever the
  // session's default isolation (reading in the lock's transaction would
  // see nothing that committed during the wait under REPEATABLE READ).
  // Events above `bound` wait for the next read. A transaction-scoped lock
  // cannot be left behind by a reader that dies or fails.
  static const std::string bound_sql =
      "WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock(" + std::to_string(kEventLock) +
      ")) SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END "
      "FROM event_ids, l";
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query(bound_sql, {}));
  if (rows.empty()) return Status::Internal("event id sequence returned no row");
  const int64_t bound = rows[0].Int(0);
  if (bound <= after_id) return std::vector<EventRecord>{};
  return SelectEvents(after_id, job_id, limit, bound);
}

Result<std::vector<EventRecord>> SqlStore::SelectEvents(int64_t after_id, int64_t job_id, int limit,
                                                        int64_t bound) {
  std::string sql = "SELECT id, job_id, attempt, kind, payload_json, created_at FROM events WHERE id > $1";
  SqlParams params = {after_id, static_cast<int64_t>(limit)};
  if (job_id != 0) {
    params.push_back(job_id);
    sql += " AND job_id = $" + std::to_string(params.size());
  }
  if (bound > 0) {
    params.push_back(bound);
    sql += " AND id <= $" + std::to_string(params.size());
  }
  sql += " ORDER BY id LIMIT $2";
  KESTREL_ASSIGN_OR_RETURN(auto rows, conn_->Query(sql, params));
  std::vector<EventRecord> out;
  for (const auto& r : rows) {
    out.push_back({r.Int(0), r.Int(1), r.Int(2), r.Text(3), r.Text(4), r.Int(5)});
  }
  return out;
}

}  // namespace kestrel::store
