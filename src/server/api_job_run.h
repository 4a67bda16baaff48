// A run's own routes beside its record (issue 33, docs/server.md "Jobs"):
//   POST /api/jobs/{id}/labels  its name, tags and note (app/job_labels.h,
//                               `kestrel jobs rename|tag|note`)
//   GET  /api/jobs/{id}/log     an attempt's log as Server-Sent Events: the
//                               file's tail, then what the file gains, each
//                               event's id its end offset in the file (a
//                               reconnect with Last-Event-ID resumes there)
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// The most bytes one log event carries, and the tail a stream starts with
// (from the first line start in the file's last kLogTailBytes) unless the
// request gives tail= or a Last-Event-ID.
inline constexpr int64_t kLogChunkBytes = int64_t{64} * 1024;
inline constexpr int64_t kLogTailBytes = int64_t{256} * 1024;

// The log stream's reader of one attempt's file, apart from the route: each
// Read(after) answers the bytes from offset `after` (at most kLogChunkBytes,
// ending at a UTF-8 character boundary) as StreamEvents of type "log" with
// data {"attempt", "offset", "text"}; nothing while the file is missing or
// has not grown. Thread-safety: none (the server's I/O thread).
Result<std::vector<StreamEvent>> ReadLogEvents(const std::string& path, int64_t attempt, int64_t after);
// Where a stream of `path` starts without a Last-Event-ID: 0 when the file
// is at most `tail` bytes (or missing), else the start of the first line
// that begins in its last `tail` bytes.
int64_t LogTailStart(const std::string& path, int64_t tail);

// Adds the two routes to `router`; `ctx` must outlive it.
Status AddJobRunRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
