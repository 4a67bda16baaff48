// PostgreSQL connection adapter for SqlStore (libpq, text protocol).
#include "store/postgres_store.h"

#include <libpq-fe.h>

#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "store/internal/sql_store.h"

namespace kestrel::store {
namespace {

// SQLSTATEs a whole transaction may retry: serialization failure, deadlock.
bool IsConflictState(const char* state) {
  return state != nullptr && (std::strcmp(state, "40001") == 0 || std::strcmp(state, "40P01") == 0);
}

class PgResult {
 public:
  explicit PgResult(PGresult* r = nullptr) : r_(r) {}
  ~PgResult() { PQclear(r_); }
  PgResult(PgResult&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  PgResult& operator=(PgResult&& o) noexcept {
    std::swap(r_, o.r_);
    return *this;
  }
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  PGresult* get() const { return r_; }  // NOLINT(readability-identifier-naming): smart-pointer interface

 private:
  PGresult* r_;
};

// Every session (and every reconnect) starts with these settings:
// - client_min_messages: CREATE TABLE IF NOT EXISTS and friends would chatter
//   on stderr.
// - enable_bitmapscan off: a claim must walk jobs_ready in (priority, id)
//   order and stop at the first row it can lock. Right after a burst of
//   submits, before autovacuum has analyzed the table, the planner believes
//   the ready set is a few rows and instead reads every ready job through a
//   bitmap scan and sorts them all, on every claim (auto_explain: 4,000
//   queued jobs read per claim, and the plan flips when the analyzer runs).
//   The store's other statements are single-row lookups and short index
//   ranges, where a plain index scan is what a bitmap scan would do anyway.
// - enable_sort off: the same misbelief with a plain index. Once the table
//   holds many finished jobs, ANALYZE sees (almost) no queued row, and
//   autovacuum analyzes again only after 10 % of the table changed (100,000
//   rows of a million), so a burst of submits stays "1 row" for good. Two
//   partial indexes then cover the ready set, jobs_ready in claim order and
//   jobs_live_dedup in key order, and at "1 row" the planner found reading
//   jobs_live_dedup and sorting as cheap: every claim read and sorted every
//   queued job (1,000,000 finished jobs, 4,000 queued: claim p50 0.57 ->
//   16 ms, 5,736 -> 212 claims/s; bench/claim_throughput --finished). With
//   sorts priced out, an ORDER BY that an index provides is read from it; a
//   statement that has to sort (a job list by name) still sorts.
//   tests/store/postgres_claim_plan_test.cc pins the plan.
// - jit off: a cost estimate that goes astray must not buy seconds of LLVM
//   compilation for a statement that runs in a millisecond (seen: 8 s per
//   claim when a planner setting inflated the cost).
constexpr const char* kSessionSetup =
    "SET client_min_messages TO warning; SET enable_bitmapscan = off; SET enable_sort = off; SET jit = off";

// Round trips, not server work, bound a job transaction here (a claim was
// BEGIN, SELECT, UPDATE, INSERT, INSERT, COMMIT: six waits for the server).
// So inside a transaction PgConn sends nothing it does not have to yet:
// BEGIN waits for the transaction's first statement, and ExecLater() writes
// (whose results nobody reads) wait for the next statement or COMMIT; each
// flush is one libpq pipeline (one round trip). A claim that needs the
// transaction is two round trips: BEGIN + SELECT ... SKIP LOCKED, then the
// writes + COMMIT (the common claim is one statement: SqlStore::ClaimJob). Errors of
// a deferred write surface at the flush, naming that write's SQL, and the
// caller's ROLLBACK discards the transaction as before.
class PgConn final : public SqlConn {
 public:
  PgConn(PGconn* conn, std::string where) : conn_(conn), where_(std::move(where)) {}
  ~PgConn() override { PQfinish(conn_); }
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  SqlDialect Dialect() const override { return SqlDialect::kPostgres; }
  const std::string& Location() const override { return where_; }

  Status ExecScript(const std::string& sql) override {
    if (sql == "COMMIT") return EndTransaction(true);
    if (sql == "ROLLBACK") return EndTransaction(false);
    KESTREL_RETURN_IF_ERROR(EnsureConnected());
    KESTREL_RETURN_IF_ERROR(Flush());
    PgResult r(PQexec(conn_, sql.c_str()));
    return Check(r.get(), sql);
  }

  Status Begin() override {
    KESTREL_RETURN_IF_ERROR(EnsureConnected());
    begin_pending_ = true;
    in_tx_ = true;
    deferred_.clear();
    return {};
  }

  Result<int64_t> Exec(const std::string& sql, const SqlParams& params) override {
    KESTREL_ASSIGN_OR_RETURN(PgResult r, Run(sql, params));
    const char* n = PQcmdTuples(r.get());
    return static_cast<int64_t>(n != nullptr && *n != '\0' ? std::strtoll(n, nullptr, 10) : 0);
  }

  Status ExecLater(const std::string& sql, const SqlParams& params) override {
    if (!in_tx_) return Exec(sql, params).GetStatus();
    deferred_.push_back({sql, params});
    return {};
  }

  Result<std::vector<SqlRow>> Query(const std::string& sql, const SqlParams& params) override {
    KESTREL_ASSIGN_OR_RETURN(PgResult r, Run(sql, params));
    std::vector<SqlRow> rows;
    int nrows = PQntuples(r.get());
    int ncols = PQnfields(r.get());
    rows.reserve(static_cast<size_t>(nrows));
    for (int i = 0; i < nrows; ++i) {
      std::vector<std::optional<std::string>> cols(static_cast<size_t>(ncols));
      for (int c = 0; c < ncols; ++c) {
        if (PQgetisnull(r.get(), i, c)) continue;
        cols[static_cast<size_t>(c)] =
            std::string(PQgetvalue(r.get(), i, c), static_cast<size_t>(PQgetlength(r.get(), i, c)));
      }
      rows.emplace_back(std::move(cols));
    }
    return rows;
  }

 private:
  struct Stmt {
    std::string sql;
    SqlParams params;
  };

  // Outside a transaction a dead connection (server restarted) is
  // re-established before the statement, without losing anything. Inside one
  // it is not: the transaction died with the connection, so the statement
  // fails (Unavailable) and the caller's rollback ends the transaction.
  Status EnsureConnected() {
    if (PQstatus(conn_) == CONNECTION_OK || in_tx_) return {};
    PQreset(conn_);
    prepared_.clear();  // prepared statements died with the old session
    if (PQstatus(conn_) != CONNECTION_OK) {
      return Status::Unavailable(std::string("postgresql: cannot reconnect: ") + PQerrorMessage(conn_),
                                 {where_});
    }
    PgResult r(PQexec(conn_, kSessionSetup));
    return Check(r.get(), kSessionSetup);
  }

  // One statement; anything held back goes first, in the same round trip.
  Result<PgResult> Run(const std::string& sql, const SqlParams& params) {
    KESTREL_RETURN_IF_ERROR(EnsureConnected());
    if (!begin_pending_ && deferred_.empty()) {
      KESTREL_ASSIGN_OR_RETURN(const std::string* name, Prepared(sql, params.size()));
      ParamText p(params);
      PgResult r(name != nullptr ? PQexecPrepared(conn_, name->c_str(), static_cast<int>(params.size()),
                                                  p.values.data(), nullptr, nullptr, 0)
                                 : PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr,
                                                p.values.data(), nullptr, nullptr, 0));
      KESTREL_RETURN_IF_ERROR(Check(r.get(), sql));
      return r;
    }
    std::vector<Stmt> batch = TakeHeldBack();
    batch.push_back({sql, params});
    return Pipeline(batch);
  }

  // Sends what is held back (BEGIN, deferred writes) now.
  Status Flush() {
    if (!begin_pending_ && deferred_.empty()) return {};
    return Pipeline(TakeHeldBack()).GetStatus();
  }

  std::vector<Stmt> TakeHeldBack() {
    std::vector<Stmt> batch;
    batch.reserve(deferred_.size() + 2);
    if (begin_pending_) batch.push_back({"BEGIN", {}});
    begin_pending_ = false;
    for (auto& d : deferred_) batch.push_back(std::move(d));
    deferred_.clear();
    return batch;
  }

  Status EndTransaction(bool commit) {
    const bool sent_begin = !begin_pending_;
    std::vector<Stmt> batch;
    if (commit) {
      batch = TakeHeldBack();
    } else {
      begin_pending_ = false;
      deferred_.clear();
    }
    in_tx_ = false;  // over either way: committed, rolled back, or lost with the connection
    if (!sent_begin && batch.empty()) return {};  // nothing reached the server: nothing to end
    const char* verb = commit ? "COMMIT" : "ROLLBACK";
    if (batch.empty()) {
      PgResult r(PQexec(conn_, verb));
      return Check(r.get(), verb);
    }
    batch.push_back({verb, {}});
    return Pipeline(batch).GetStatus();
  }

  struct ParamText {
    explicit ParamText(const SqlParams& params) : text(params.size()), values(params.size(), nullptr) {
      for (size_t i = 0; i < params.size(); ++i) {
        if (const auto* v = std::get_if<int64_t>(&params[i])) {
          text[i] = std::to_string(*v);
          values[i] = text[i].c_str();
        } else if (const auto* t = std::get_if<std::string>(&params[i])) {
          values[i] = t->c_str();
        }
      }
    }
    std::vector<std::string> text;
    std::vector<const char*> values;
  };

  // Sends `batch` as one pipeline and reads every result. Returns the last
  // statement's result, or the first failure (later statements were skipped
  // by the server: PGRES_PIPELINE_ABORTED).
  Result<PgResult> Pipeline(const std::vector<Stmt>& batch) {
    std::vector<const std::string*> names;
    names.reserve(batch.size());
    for (const auto& st : batch) {  // before the pipeline: PQprepare waits for its answer
      KESTREL_ASSIGN_OR_RETURN(const std::string* name, Prepared(st.sql, st.params.size()));
      names.push_back(name);
    }
    if (PQenterPipelineMode(conn_) != 1) return Lost("cannot enter pipeline mode");
    std::vector<ParamText> params;
    params.reserve(batch.size());
    size_t sent = 0;
    Status first_error;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Stmt& st = batch[i];
      params.emplace_back(st.params);
      const int n = static_cast<int>(st.params.size());
      const int ok = names[i] != nullptr
                         ? PQsendQueryPrepared(conn_, names[i]->c_str(), n, params.back().values.data(),
                                               nullptr, nullptr, 0)
                         : PQsendQueryParams(conn_, st.sql.c_str(), n, nullptr, params.back().values.data(),
                                             nullptr, nullptr, 0);
      if (ok != 1) {
        first_error = Lost("cannot send: " + st.sql.substr(0, 80));
        break;
      }
      ++sent;
    }
    const bool synced = PQpipelineSync(conn_) == 1;
    if (!synced && first_error.IsOk()) first_error = Lost("cannot send the pipeline");
    PgResult last;
    for (size_t i = 0; i < sent; ++i) {
      PgResult r(PQgetResult(conn_));
      if (r.get() == nullptr) {
        if (first_error.IsOk()) first_error = Lost("no result for: " + batch[i].sql.substr(0, 80));
        break;
      }
      while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);      // the NULL that ends this statement
      if (PQresultStatus(r.get()) == PGRES_PIPELINE_ABORTED) continue;  // skipped after an earlier error
      Status s = Check(r.get(), batch[i].sql);
      if (!s.IsOk() && first_error.IsOk()) first_error = s;
      if (i + 1 == batch.size()) last = std::move(r);
    }
    if (synced) {
      // Up to and including the sync's own result.
      for (int guard = 0; guard < 1000; ++guard) {
        PgResult r(PQgetResult(conn_));
        if (r.get() == nullptr || PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) break;
      }
    }
    if (PQexitPipelineMode(conn_) != 1 && first_error.IsOk())
      first_error = Lost("cannot leave pipeline mode");
    if (!first_error.IsOk()) return first_error;
    return last;
  }

  // The session's prepared statement for `sql` (prepared on first use), so
  // the server parses and plans each of the store's fixed statements once per
  // connection instead of on every call. nullptr (run unprepared) once the
  // cache is full: SQL built from user filters must not grow it forever.
  Result<const std::string*> Prepared(const std::string& sql, size_t nparams) {
    auto it = prepared_.find(sql);
    if (it != prepared_.end()) return &it->second;
    if (prepared_.size() >= kMaxPrepared) return static_cast<const std::string*>(nullptr);
    std::string name = "k" + std::to_string(prepared_.size() + 1);
    PgResult r(PQprepare(conn_, name.c_str(), sql.c_str(), static_cast<int>(nparams), nullptr));
    KESTREL_RETURN_IF_ERROR(Check(r.get(), sql));
    return &prepared_.emplace(sql, std::move(name)).first->second;
  }

  Status Lost(const std::string& what) const {
    std::string msg = PQerrorMessage(conn_);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    return Status::Unavailable("postgresql: " + what + (msg.empty() ? "" : ": " + msg), {where_});
  }

  Status Check(PGresult* r, const std::string& sql) const {
    ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return {};
    std::string msg = r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    if (IsConflictState(state)) {
      return Status::Aborted("database conflict: " + msg, {where_}).WithReason(FailureReason::kStoreConflict);
    }
    if (PQstatus(conn_) != CONNECTION_OK) {
      return Status::Unavailable("postgresql connection lost: " + msg, {where_});
    }
    return Status::IoError("postgresql: " + msg + " (in: " + sql.substr(0, 80) + ")", {where_});
  }

  PGconn* conn_;
  std::string where_;
  bool in_tx_ = false;          // between Begin() and COMMIT/ROLLBACK
  bool begin_pending_ = false;  // BEGIN not sent yet: waits for the first statement
  std::vector<Stmt> deferred_;  // ExecLater() writes not sent yet
  static constexpr size_t kMaxPrepared = 200;
  std::unordered_map<std::string, std::string> prepared_;  // SQL -> statement name in this session
};

}  // namespace

std::string RedactPostgresUrl(const std::string& url) {
  size_t scheme = url.find("://");
  size_t at = url.find('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) return url;
  size_t colon = url.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon) + ":***" + url.substr(at);
}

Result<std::unique_ptr<SqlConn>> ConnectPostgres(const std::string& url) {
  std::string where = RedactPostgresUrl(url);
  PGconn* conn = PQconnectdb(url.c_str());
  if (conn == nullptr) return Status::Unavailable("postgresql: out of memory", {where});
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string msg = PQerrorMessage(conn);
    while (!msg.empty() && msg.back() == '\n') msg.pop_back();
    PQfinish(conn);
    return Status::Unavailable("cannot connect to postgresql: " + msg, {where});
  }
  auto pg = std::make_unique<PgConn>(conn, where);
  KESTREL_RETURN_IF_ERROR(pg->ExecScript(kSessionSetup));
  return std::unique_ptr<SqlConn>(std::move(pg));
}

Status ExecPostgres(const std::string& url, const std::string& sql) {
  KESTREL_ASSIGN_OR_RETURN(auto conn, ConnectPostgres(url));
  return conn->ExecScript(sql);
}

Result<int64_t> PostgresClockMs(const std::string& url) {
  KESTREL_ASSIGN_OR_RETURN(auto conn, ConnectPostgres(url));
  // clock_timestamp(), not now(): now() is the transaction's start.
  KESTREL_ASSIGN_OR_RETURN(
      auto rows,
      conn->Query("SELECT CAST(FLOOR(EXTRACT(EPOCH FROM clock_timestamp()) * 1000) AS BIGINT)", {}));
  if (rows.empty() || rows[0].IsNull(0))
    return Status::Internal("PostgreSQL returned no clock_timestamp() at " + RedactPostgresUrl(url));
  return rows[0].Int(0);
}

}  // namespace kestrel::store
