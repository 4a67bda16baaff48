// Job checkpoints shared between hosts (docs/disk.md "Job checkpoints on
// S3"). When the artifact store SharesJobFiles() (KESTREL_ARTIFACTS=
// s3://...), a train attempt uploads its checkpoint after every epoch and
// records it, fenced, as the job's resume point; a later attempt on any
// host downloads the newest recorded one into its job folder first, so the
// attempt resumes from it exactly as from a checkpoint written on this host.
//
// Thread-safety: one uploader per attempt, called from the training thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "core/env.h"
#include "core/status.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

struct AttemptContext;

// The files a resume needs, under an attempt folder's weights/: last.ckpt
// (the whole training state) and best.safetensors (the best epoch's
// weights, committed when the resumed attempt never improves on them).
inline constexpr const char* kSharedCheckpointFiles[] = {"best.safetensors", "last.ckpt"};

class CheckpointUploader {
 public:
  // `weights_dir`: the attempt's weights/ folder; records are timed by env.UnixMillis().
  CheckpointUploader(std::unique_ptr<store::ArtifactStore> artifacts,
                     std::unique_ptr<store::MetadataStore> meta, int64_t job_id, int64_t attempt,
                     std::string weights_dir, Env& env);

  // After epoch `epoch` (1-based) wrote its checkpoint: uploads the files
  // that changed since the last call, records them (fenced) as this
  // attempt's resume point, then deletes this attempt's older uploads. A
  // failed upload or record is returned for the log and training goes on
  // (the next epoch tries again; the local files are still there).
  // kAborted: this attempt is no longer the job's (re-claimed, cancelled):
  // nothing is uploaded or deleted after it.
  Status AfterEpoch(int epoch);

  int Uploads() const { return uploads_; }

 private:
  struct Uploaded {
    std::string key, sha;
    uint64_t bytes = 0;
  };
  std::unique_ptr<store::ArtifactStore> artifacts_;
  std::unique_ptr<store::MetadataStore> meta_;
  int64_t job_id_, attempt_;
  std::string weights_dir_;
  Env& env_;
  std::map<std::string, Uploaded> uploaded_;  // file name -> its newest upload
  bool fenced_ = false;
  int uploads_ = 0;
};

// Before an attempt (`ctx.attempt`) resumes: when the job's newest recorded
// checkpoint belongs to an earlier attempt whose folder on this host has no
// weights/last.ckpt, downloads its files (verified against the recorded
// sha256) into <job dir>/attempt-<k>/weights/ (best.safetensors before
// last.ckpt: a last.ckpt is never there without its best). A record whose
// files are gone or damaged is logged and the next older one tried; a store
// that cannot be reached is an error (kUnavailable), never a silent start
// from scratch. Returns the attempt fetched, 0 when none was needed or usable.
Result<int64_t> FetchNewestCheckpoint(store::ArtifactStore& artifacts, store::MetadataStore& meta,
                                      const AttemptContext& ctx, Env& env, std::ostream& log);

// What a train attempt sets up: null when the artifact store keeps job files
// local (the default); else the newest shared checkpoint fetched and an
// uploader that takes over ctx.meta (the attempt's own connection).
Result<std::unique_ptr<CheckpointUploader>> ShareCheckpoints(AttemptContext& ctx, Env& env,
                                                             std::ostream& log);

}  // namespace kestrel::app
