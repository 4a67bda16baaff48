// PostgreSQL backend of MetadataStore (libpq). Same schema, migrations and
// logic as SQLite (sql_store.h); claims lock rows with
// `SELECT ... FOR UPDATE SKIP LOCKED`, transactions run at READ COMMITTED.
// A broken connection (server restart) is re-established before the next
// transaction; the transaction in flight fails with kUnavailable.
#pragma once

#include <memory>
#include <string>

#include "store/metadata_store.h"

namespace kestrel::store {

class SqlConn;  // store/internal/sql_conn.h (private to the store module and its tests)

// url: any libpq URL, "postgresql://user@host:port/db?options=...".
Result<std::unique_ptr<MetadataStore>> OpenPostgresStore(const std::string& url);
// The connection adapter alone (no migration). For SqlStore.
Result<std::unique_ptr<SqlConn>> ConnectPostgres(const std::string& url);
// Runs one parameterless statement on a fresh connection (admin tasks:
// create or drop a schema for a test, a database for the soak).
Status ExecPostgres(const std::string& url, const std::string& sql);
// The database server's clock (clock_timestamp()) in Unix ms, read on a
// fresh connection: `kestrel doctor`'s clock-skew check (app/doctor.h).
Result<int64_t> PostgresClockMs(const std::string& url);
// The URL with any password replaced by "***", for messages and logs.
std::string RedactPostgresUrl(const std::string& url);

}  // namespace kestrel::store
