// SQLite connection adapter for SqlStore (the logic lives in sql_store.cc and
// job_store.cc).
#include "store/sqlite_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "core/env.h"
#include "store/internal/sql_store.h"
#include "store/private_files.h"

namespace kestrel::store {
namespace {

class SqliteConn final : public SqlConn {
 public:
  SqliteConn(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~SqliteConn() override { sqlite3_close_v2(db_); }
  SqliteConn(const SqliteConn&) = delete;
  SqliteConn& operator=(const SqliteConn&) = delete;

  SqlDialect Dialect() const override { return SqlDialect::kSqlite; }
  const std::string& Location() const override { return path_; }

  Status ExecScript(const std::string& sql) override {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return {};
    std::string msg = err ? err : "unknown";
    sqlite3_free(err);
    return Error(rc, msg, sql);
  }

  Status Begin() override { return ExecScript("BEGIN IMMEDIATE"); }

  Result<int64_t> Exec(const std::string& sql, const SqlParams& params) override {
    int64_t changes = 0;
    KESTREL_RETURN_IF_ERROR(Run(sql, params, nullptr));
    changes = sqlite3_changes64(db_);
    return changes;
  }

  Result<std::vector<SqlRow>> Query(const std::string& sql, const SqlParams& params) override {
    std::vector<SqlRow> rows;
    KESTREL_RETURN_IF_ERROR(Run(sql, params, &rows));
    return rows;
  }

 private:
  Status Error(int rc, const std::string& msg, const std::string& sql) const {
    if (rc == SQLITE_BUSY || rc == SQLITE_LOCKED) {
      return Status::Aborted("database conflict: database is busy: " + msg, {path_})
          .WithReason(FailureReason::kStoreConflict);
    }
    return Status::IoError("sqlite: " + msg + " (in: " + sql.substr(0, 80) + ")", {path_});
  }

  Status Run(const std::string& sql, const SqlParams& params, std::vector<SqlRow>* rows) {
    std::string text = SqlitePlaceholders(sql);
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v2(db_, text.c_str(), -1, &stmt, nullptr);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return Status::Internal(std::string("sqlite prepare: ") + sqlite3_errmsg(db_) +
                              " (in: " + sql.substr(0, 80) + ")");
    }
    for (size_t i = 0; i < params.size(); ++i) {
      int idx = static_cast<int>(i + 1);
      if (const auto* v = std::get_if<int64_t>(&params[i])) {
        sqlite3_bind_int64(stmt, idx, *v);
      } else if (const auto* t = std::get_if<std::string>(&params[i])) {
        sqlite3_bind_text(stmt, idx, t->data(), static_cast<int>(t->size()), SQLITE_TRANSIENT);
      } else {
        sqlite3_bind_null(stmt, idx);
      }
    }
    Status st;
    while (true) {
      rc = sqlite3_step(stmt);
      if (rc == SQLITE_DONE) break;
      if (rc != SQLITE_ROW) {
        st = Error(rc, sqlite3_errmsg(db_), sql);
        break;
      }
      if (rows == nullptr) continue;
      int n = sqlite3_column_count(stmt);
      std::vector<std::optional<std::string>> cols(static_cast<size_t>(n));
      for (int c = 0; c < n; ++c) {
        if (sqlite3_column_type(stmt, c) == SQLITE_NULL) continue;
        const unsigned char* p = sqlite3_column_text(stmt, c);
        cols[static_cast<size_t>(c)] =
            std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt, c)));
      }
      rows->emplace_back(std::move(cols));
    }
    sqlite3_finalize(stmt);
    return st;
  }

  sqlite3* db_;
  std::string path_;
};

// Waiting for another connection's write lock: short sleeps growing from
// 50 us to 2 ms, jittered, for up to ~10 s. sqlite3_busy_timeout() sleeps up
// to 100 ms at a time, so with many writers the lock was often free while
// every waiter slept: 32 claiming workers got barely more throughput than
// one (bench/claim_throughput).
int BusyWait(void*, int count) {
  constexpr int kMaxSleepUs = 2000;
  constexpr int kGiveUpAfter = 10'000'000 / kMaxSleepUs;  // ~10 s of waiting
  if (count > kGiveUpAfter) return 0;
  thread_local std::minstd_rand rng(std::random_device{}());
  int cap = std::min(kMaxSleepUs, 50 << std::min(count, 6));
  std::this_thread::sleep_for(std::chrono::microseconds(cap / 2 + static_cast<int>(rng() % (cap / 2 + 1))));
  return 1;
}

}  // namespace

Result<std::unique_ptr<SqlConn>> ConnectSqlite(const std::string& path) {
  std::string dir = DirName(path);
  // Owner-only (private_files.h): the home when this creates it, and a new
  // database, whose -wal and -shm SQLite then creates with the same mode.
  if (!dir.empty()) KESTREL_RETURN_IF_ERROR(CreatePrivateDir(dir));
  if (!path.empty() && path != ":memory:" && path.rfind("file:", 0) != 0)
    KESTREL_RETURN_IF_ERROR(CreatePrivateFile(path));
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    return Status::IoError("cannot open database: " + msg, {path});
  }
  sqlite3_busy_handler(db, BusyWait, nullptr);
  auto conn = std::make_unique<SqliteConn>(db, path);
  KESTREL_RETURN_IF_ERROR(conn->ExecScript("PRAGMA journal_mode=WAL"));
  KESTREL_RETURN_IF_ERROR(conn->ExecScript("PRAGMA synchronous=NORMAL"));
  KESTREL_RETURN_IF_ERROR(conn->ExecScript("PRAGMA foreign_keys=ON"));
  return std::unique_ptr<SqlConn>(std::move(conn));
}

}  // namespace kestrel::store
