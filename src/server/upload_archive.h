// Unpacking an uploaded zip (POST /api/datasets/upload, docs/server.md
// "Uploads") with libarchive, refusing what could write outside the target
// folder or fill the disk: an entry with an absolute path, a ".." segment,
// a backslash or a drive letter; a symlink, hardlink, device, FIFO or
// socket entry; two entries of one path; more than `max_entries` entries or
// more than `max_bytes` expanded bytes in all (a zip bomb), counted as the
// data is inflated, not from the sizes the archive claims.
//
// Thread-safety: independent calls may run concurrently.
#pragma once

#include <cstdint>
#include <string>

#include "core/status.h"

namespace kestrel::server {

struct ExtractLimits {
  int64_t max_entries = 100'000;         // files and folders, all counted
  int64_t max_bytes = int64_t{2} << 30;  // expanded file bytes in all
};

// Unpacks the zip file `archive` into `dest` (an existing, empty folder that
// no one else writes). Refusals are kInvalidArgument (field "body", the
// message naming the entry) for entries that may not be written and for a
// file that is not a readable zip, kResourceExhausted (field "body") past a
// limit. On an error `dest` may hold part of the archive: the caller removes it.
Status ExtractZip(const std::string& archive, const std::string& dest, const ExtractLimits& limits);

}  // namespace kestrel::server
