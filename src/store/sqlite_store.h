// SQLite backend of MetadataStore: WAL mode, foreign keys on, a busy timeout
// so concurrent processes wait instead of failing, writes in BEGIN IMMEDIATE
// transactions (the SQLite form of a row lock for claims).
#pragma once

#include <memory>
#include <string>

#include "store/metadata_store.h"

namespace kestrel::store {

class SqlConn;  // store/internal/sql_conn.h (private to the store module and its tests)

// Opens (creating folders and file) and migrates.
Result<std::unique_ptr<MetadataStore>> OpenSqliteStore(const std::string& path);
// The connection adapter alone (no migration). For SqlStore.
Result<std::unique_ptr<SqlConn>> ConnectSqlite(const std::string& path);

}  // namespace kestrel::store
