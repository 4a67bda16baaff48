// A job attempt's checkpoint on a shared artifact store, as the metadata
// store records it (docs/disk.md "Job checkpoints on S3").
#pragma once

#include <cstdint>
#include <string>

namespace kestrel::store {

struct CheckpointRecord {
  int64_t job_id = 0;
  int64_t attempt = 0;
  // What the uploader recorded (app/job_checkpoints.h reads and writes it):
  // {"epoch", "files": {name: {"key", "sha256", "bytes"}}}. The store never
  // reads it.
  std::string json;
  int64_t recorded_ms = 0;  // Unix ms of the record
};

}  // namespace kestrel::store
