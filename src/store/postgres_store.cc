// PostgreSQL connection adapter for SqlStore (libpq, text protocol).
#include "store/postgres_store.h"

#include <libpq-fe.h>

#include <cstring>

#include "store/sql_store.h"

namespace kestrel::store {
namespace {

// SQLSTATEs a whole transaction may retry: serialization failure, deadlock.
bool IsConflictState(const char* state) {
  return state != nullptr && (std::strcmp(state, "40001") == 0 || std::strcmp(state, "40P01") == 0);
}

class PgResult {
 public:
  explicit PgResult(PGresult* r) : r_(r) {}
  ~PgResult() { PQclear(r_); }
  PgResult(const PgResult&) = delete;
  PgResult& operator=(const PgResult&) = delete;
  PGresult* get() const { return r_; }

 private:
  PGresult* r_;
};

class PgConn final : public SqlConn {
 public:
  PgConn(PGconn* conn, std::string where) : conn_(conn), where_(std::move(where)) {}
  ~PgConn() override { PQfinish(conn_); }
  PgConn(const PgConn&) = delete;
  PgConn& operator=(const PgConn&) = delete;

  SqlDialect Dialect() const override { return SqlDialect::kPostgres; }
  const std::string& Location() const override { return where_; }

  Status ExecScript(const std::string& sql) override {
    const bool ends_tx = sql == "COMMIT" || sql == "ROLLBACK";
    if (!ends_tx) KESTREL_RETURN_IF_ERROR(EnsureConnected());
    PgResult r(PQexec(conn_, sql.c_str()));
    Status s = Check(r.get(), sql);
    if (ends_tx) in_tx_ = false;  // over either way: committed, rolled back, or lost with the connection
    return s;
  }

  Status Begin() override {
    KESTREL_RETURN_IF_ERROR(ExecScript("BEGIN"));
    in_tx_ = true;
    return {};
  }

  Result<int64_t> Exec(const std::string& sql, const SqlParams& params) override {
    KESTREL_RETURN_IF_ERROR(EnsureConnected());
    PgResult r(Run(sql, params));
    KESTREL_RETURN_IF_ERROR(Check(r.get(), sql));
    const char* n = PQcmdTuples(r.get());
    return static_cast<int64_t>(n != nullptr && *n != '\0' ? std::strtoll(n, nullptr, 10) : 0);
  }

  Result<std::vector<SqlRow>> Query(const std::string& sql, const SqlParams& params) override {
    KESTREL_RETURN_IF_ERROR(EnsureConnected());
    PgResult r(Run(sql, params));
    KESTREL_RETURN_IF_ERROR(Check(r.get(), sql));
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
  // Outside a transaction a dead connection (server restarted) is
  // re-established before the statement, without losing anything. Inside one
  // it is not: the transaction died with the connection, so the statement
  // fails (Unavailable) and the caller's rollback ends the transaction.
  Status EnsureConnected() {
    if (PQstatus(conn_) == CONNECTION_OK || in_tx_) return {};
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK) {
      return Status::Unavailable(std::string("postgresql: cannot reconnect: ") + PQerrorMessage(conn_), {where_});
    }
    PgResult r(PQexec(conn_, "SET client_min_messages TO warning"));
    return Check(r.get(), "SET client_min_messages TO warning");
  }

  PGresult* Run(const std::string& sql, const SqlParams& params) {
    std::vector<std::string> text(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    for (size_t i = 0; i < params.size(); ++i) {
      if (const auto* v = std::get_if<int64_t>(&params[i])) {
        text[i] = std::to_string(*v);
        values[i] = text[i].c_str();
      } else if (const auto* t = std::get_if<std::string>(&params[i])) {
        values[i] = t->c_str();
      }
    }
    return PQexecParams(conn_, sql.c_str(), static_cast<int>(params.size()), nullptr, values.data(), nullptr,
                        nullptr, 0);
  }

  Status Check(PGresult* r, const std::string& sql) const {
    ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return {};
    std::string msg = r != nullptr ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    const char* state = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    if (IsConflictState(state)) return Status::Aborted(std::string(kSqlConflictPrefix) + msg, {where_});
    if (PQstatus(conn_) != CONNECTION_OK) {
      return Status::Unavailable("postgresql connection lost: " + msg, {where_});
    }
    return Status::IoError("postgresql: " + msg + " (in: " + sql.substr(0, 80) + ")", {where_});
  }

  PGconn* conn_;
  std::string where_;
  bool in_tx_ = false;  // between a successful BEGIN and COMMIT/ROLLBACK
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
  // CREATE TABLE IF NOT EXISTS and friends would chatter on stderr.
  KESTREL_RETURN_IF_ERROR(pg->ExecScript("SET client_min_messages TO warning"));
  return std::unique_ptr<SqlConn>(std::move(pg));
}

Status ExecPostgres(const std::string& url, const std::string& sql) {
  KESTREL_ASSIGN_OR_RETURN(auto conn, ConnectPostgres(url));
  return conn->ExecScript(sql);
}

}  // namespace kestrel::store
