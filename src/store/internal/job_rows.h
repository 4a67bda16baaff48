// The jobs table's row as SqlStore reads it, shared by job_store.cc (the job
// operations) and job_list_query.cc (the list's filter/sort/cursor query).
// Private to the store module.
#pragma once

#include "store/internal/sql_conn.h"
#include "store/job_types.h"

namespace kestrel::store {

// The columns every job SELECT reads, in ReadJob's order.
inline constexpr const char* kJobColumns =
    "id, spec_json, config_json, dataset_version, priority, dedup_key, state, attempt, lease_owner, "
    "lease_until, not_before, max_retries, retries_used, max_infra_retries, infra_retries_used, backoff_ms, "
    "device_kind, device_memory_mb, wall_clock_limit_ms, created_at, updated_at, finished_at, result_json, "
    "last_reason, min_map50, name, tags_json, note";

// A JobRecord from a row of kJobColumns (job_store.cc).
JobRecord ReadJob(const SqlRow& r);

}  // namespace kestrel::store
