// Unpacking an uploaded zip (POST /api/datasets/upload, docs/server.md
// "Uploads") with libarchive, refusing what could write outside the target
// folder or fill the disk: an entry with an absolute path, a ".." segment,
// a backslash or a drive letter; a symlink, hardlink, device, FIFO or
// socket entry; two entries of one path; more than `max_entries` entries or
// more than `max_bytes` expanded bytes in all (a zip bomb), counted as the
// data is inflated, not from the sizes the archive claims.
//
// Links: a zip records a Unix entry's type only as the st_mode in its
// central directory's external attributes ("version made by" Unix), and
// that type has no hardlink value; libarchive's zip reader
// (archive_read_support_format_zip.c) turns a symlink mode into a symlink
// entry whose data is the target and never sets an entry's hardlink, so a
// zip cannot produce a hardlink entry (the check stays for other readers).
// That reader also turns a FIFO mode into a regular file (Info-ZIP's
// `zip -FI` stores a pipe's contents with the pipe's mode): such an entry
// is unpacked as a plain file with its bytes, never as a FIFO.
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
// limit. Messages name an entry "LABEL/ENTRY" ("upload:birds.zip/a/b.jpg",
// as an upload's findings do), or "ENTRY" when `label` is empty. On an
// error `dest` may hold part of the archive: the caller removes it.
Status ExtractZip(const std::string& archive, const std::string& dest, const ExtractLimits& limits,
                  const std::string& label = "");

}  // namespace kestrel::server
