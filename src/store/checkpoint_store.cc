// Job checkpoints on a shared artifact store (docs/disk.md "Job checkpoints
// on S3"; migration 16): an attempt's newest checkpoint, recorded on its
// attempt row under the same fence as its pid.
#include "store/internal/sql_store.h"

namespace kestrel::store {

Status MetadataStore::RecordCheckpoint(int64_t, int64_t, const std::string&, int64_t) {
  return Status::FailedPrecondition("this metadata store records no job checkpoints");
}

Result<std::vector<CheckpointRecord>> MetadataStore::ListCheckpoints(int64_t) {
  return Status::FailedPrecondition("this metadata store records no job checkpoints");
}

Status SqlStore::RecordCheckpoint(int64_t job_id, int64_t attempt, const std::string& checkpoint_json,
                                  int64_t now_ms) {
  if (checkpoint_json.empty())
    return Status::InvalidArgument("empty checkpoint record", {"", 0, "checkpoint"});
  // One autocommit UPDATE. The fence is the attempt row still open: a claim
  // that takes the job over from an expired lease closes the old attempt in
  // its own transaction, as do completion and cancel, so after any of them
  // this matches nothing and the stale attempt's record is refused.
  KESTREL_ASSIGN_OR_RETURN(
      int64_t n, conn_->Exec("UPDATE attempts SET checkpoint = $1, checkpoint_at = $2 WHERE job_id = $3 "
                             "AND attempt = $4 AND ended_at = 0",
                             {checkpoint_json, now_ms, job_id, attempt}));
  if (n == 1) return {};
  return Status::Aborted("job " + std::to_string(job_id) + " attempt " + std::to_string(attempt) +
                         " is not running any more; its checkpoint is not the job's resume point");
}

Result<std::vector<CheckpointRecord>> SqlStore::ListCheckpoints(int64_t job_id) {
  KESTREL_ASSIGN_OR_RETURN(
      auto rows, conn_->Query("SELECT attempt, checkpoint, checkpoint_at FROM attempts WHERE job_id = $1 "
                              "AND checkpoint <> '' ORDER BY attempt DESC",
                              {job_id}));
  std::vector<CheckpointRecord> out;
  for (const auto& r : rows) out.push_back({job_id, r.Int(0), r.Text(1), r.Int(2)});
  return out;
}

}  // namespace kestrel::store
