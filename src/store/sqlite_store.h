// SQLite implementation of MetadataStore: WAL mode, foreign keys on, a busy
// timeout so concurrent processes wait instead of failing, writes in
// BEGIN IMMEDIATE transactions (the SQLite form of a row lock for claims).
#pragma once

#include <memory>
#include <string>

#include "store/metadata_store.h"

namespace kestrel::store {

Result<std::unique_ptr<MetadataStore>> OpenSqliteStore(const std::string& path);

}  // namespace kestrel::store
