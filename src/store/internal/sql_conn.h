// SqlConn: the tiny adapter that lets one implementation of the metadata and
// job logic (sql_store.cc, job_store.cc) run on SQLite and PostgreSQL.
// Private to the store module.
//
// SQL text passed here is written once, in the portable subset both engines
// accept, with PostgreSQL-style placeholders `$1`, `$2`, ...; the SQLite
// connection rewrites them to `?1`, `?2`. Values cross as text (integers are
// rendered and parsed), so callers never see engine-specific types.
//
// Thread-safety: none; one connection per MetadataStore, one store per thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/status.h"

namespace kestrel::store {

using SqlValue = std::variant<std::nullptr_t, int64_t, std::string>;
using SqlParams = std::vector<SqlValue>;

// A double as a TEXT column holds it (metrics, min_map50): 17 significant
// digits, so strtod gives back the same double.
std::string DoubleText(double v);

// One result row. Columns are addressed by 0-based position.
class SqlRow {
 public:
  explicit SqlRow(std::vector<std::optional<std::string>> cols) : cols_(std::move(cols)) {}
  bool IsNull(size_t i) const { return i >= cols_.size() || !cols_[i].has_value(); }
  // "" for NULL.
  const std::string& Text(size_t i) const;
  // 0 for NULL or non-numeric text.
  int64_t Int(size_t i) const;
  size_t Size() const { return cols_.size(); }

 private:
  std::vector<std::optional<std::string>> cols_;
};

enum class SqlDialect { kSqlite, kPostgres };

class SqlConn {
 public:
  virtual ~SqlConn() = default;
  virtual SqlDialect Dialect() const = 0;
  // Where errors point (the database path or URL without password).
  virtual const std::string& Location() const = 0;

  // One or more statements without parameters or results (DDL, BEGIN...).
  virtual Status ExecScript(const std::string& sql) = 0;
  // A statement with parameters; returns the number of rows it changed.
  virtual Result<int64_t> Exec(const std::string& sql, const SqlParams& params) = 0;
  // A write whose result the caller does not read. Inside a transaction a
  // connection may hold it back and send it with the next statement or the
  // COMMIT (PostgreSQL does: one round trip instead of several); its error
  // then surfaces there. Outside a transaction it runs at once.
  virtual Status ExecLater(const std::string& sql, const SqlParams& params) {
    return Exec(sql, params).GetStatus();
  }
  // A statement with parameters that returns rows.
  virtual Result<std::vector<SqlRow>> Query(const std::string& sql, const SqlParams& params) = 0;

  // Starts a write transaction: SQLite `BEGIN IMMEDIATE` (takes the write
  // lock now, so read-then-write sequences cannot interleave), PostgreSQL
  // `BEGIN` (READ COMMITTED; callers lock rows with ForUpdate()).
  virtual Status Begin() = 0;
  Status Commit() { return ExecScript("COMMIT"); }
  Status Rollback() { return ExecScript("ROLLBACK"); }

  // Suffix for a SELECT that locks its rows until commit. Empty on SQLite,
  // where BEGIN IMMEDIATE already serializes writers.
  const char* ForUpdate() const { return Dialect() == SqlDialect::kPostgres ? " FOR UPDATE" : ""; }
  const char* ForUpdateSkipLocked() const {
    return Dialect() == SqlDialect::kPostgres ? " FOR UPDATE SKIP LOCKED" : "";
  }
};

// Rewrites `$N` placeholders (outside quotes) to SQLite's `?N`.
std::string SqlitePlaceholders(const std::string& sql);

}  // namespace kestrel::store
