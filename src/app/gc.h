// Disk use cases (docs/disk.md): which artifact-store blobs the records
// reference, `kestrel gc` (delete the blobs nothing references), `kestrel du`
// (usage per dataset version, job, model and unreferenced) and the retention
// of a succeeded job's checkpoints. Each report has one JSON view here, which
// `--json` prints unchanged.
//
// Safety of gc against concurrent writers (an import, a job registering its
// model): the blobs are listed first, the references read afterwards, and a
// blob is only a candidate when it is unreferenced AND its mtime is older than
// the grace period. ArtifactStore::PutWithHash refreshes the mtime of a blob
// it deduplicates, so every blob a writer is about to reference was written or
// touched within the grace period before its record commits; and
// ArtifactStore::RemoveIfUntouchedSince re-reads the mtime after moving the
// blob aside, so a touch racing with the removal wins.
//
// Thread-safety: the functions borrow one MetadataStore (one per thread).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "app/leftovers.h"
#include "core/env.h"
#include "core/status.h"
#include "store/artifact_store.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// Everything the records name in the artifact store. A sha counts as named
// when it appears as a 64-hex string anywhere in a record's blob fields or
// JSON (manifests list the image blobs; model evaluations list plot blobs;
// lineage names parent weights): over-keeping is harmless, deleting a
// referenced blob is not.
struct References {
  struct Version {
    store::DatasetVersionRecord record;
    std::set<std::string> shas;    // everything it names (what gc keeps)
    std::set<std::string> stored;  // the blobs it stores: manifest, report, images (not label hashes)
    // data_mode=reference: its image files, outside the store (gc never
    // touches them; du reports them apart). Their hashes are in `shas`, not `stored`.
    int64_t referenced_files = 0;
    uint64_t referenced_bytes = 0;  // their sizes as recorded at import
  };
  struct Model {
    store::ModelRecord record;
    std::set<std::string> shas;  // weights, plots, whatever its JSON names
  };
  std::vector<Version> versions;
  std::vector<Model> models;
  std::set<std::string> jobs;  // shas named by job configs and results
  std::set<std::string> all;   // the union
};
// Fails (and nothing may be deleted) when a record's blob cannot be read,
// e.g. a missing or corrupted manifest: the image references are unknown then.
Result<References> CollectReferences(store::MetadataStore& meta, store::ArtifactStore& blobs);

// `kestrel val` and `kestrel compare` store their result records as blobs
// that no metadata row names ("kind": "kestrel.eval_result" /
// "kestrel.compare"); such a blob is a root: gc keeps it and the blobs it
// names (a compare report's HTML page). `bytes` is the blob read whole.
bool IsRecordBlob(const std::string& bytes);

struct GcOptions {
  bool dry_run = false;
  // Unreferenced blobs written or re-Put within this many seconds are kept:
  // an import or registration in flight references them once it commits.
  // Must exceed the longest time between a writer's Put and its commit.
  int64_t grace_s = 3600;
};
Status ValidateGcOptions(const GcOptions& o);

struct GcReport {
  bool dry_run = false;
  int64_t grace_s = 0;
  int64_t blobs = 0;  // listed
  uint64_t blob_bytes = 0;
  int64_t referenced = 0;  // named by a record (kept)
  uint64_t referenced_bytes = 0;
  int64_t records = 0;  // val/compare record blobs and what they name (kept)
  uint64_t records_bytes = 0;
  int64_t recent = 0;  // unreferenced but within the grace period (kept)
  uint64_t recent_bytes = 0;
  int64_t deleted = 0;                    // dry run: would delete
  uint64_t freed_bytes = 0;               // dry run: would free
  int64_t raced = 0;                      // candidates touched by a writer during the removal (kept)
  std::vector<std::string> deleted_shas;  // sorted
  // Crashed writers' temp files and folders anywhere in the home
  // (leftovers.h), reclaimed when older than grace_s and their writer is gone.
  LeftoverReport leftovers;
  // Where the blobs live (ArtifactStore::Describe) and the unfinished writes
  // of the store itself removed (S3: aborted multipart uploads older than
  // grace_s; 0 on a dry run and for the local store).
  std::string store;
  int64_t incomplete_writes = 0;
  // Job files on a store all hosts share (S3: <prefix>/jobs/<job>/attempt-<n>/,
  // docs/disk.md "Job checkpoints on S3"; the local store has none). See
  // ClassifyJobFiles for what is kept; garbage older than grace_s is deleted.
  int64_t job_files = 0;  // listed
  uint64_t job_file_bytes = 0;
  int64_t job_files_kept = 0;  // resume points and running attempts' files
  uint64_t job_files_kept_bytes = 0;
  int64_t job_files_recent = 0;  // garbage but younger than grace_s (kept)
  uint64_t job_files_recent_bytes = 0;
  int64_t job_files_deleted = 0;  // dry run: would delete
  uint64_t job_files_freed_bytes = 0;
  std::map<std::string, int64_t> job_files_deleted_by_reason;  // JobFileVerdictName -> count
  std::vector<std::string> deleted_job_files;                  // keys, sorted
};

// Why a job file on a shared store is garbage, or kKeep. kKeep: a file of a
// job's running attempt (it may not have recorded it yet), a file an
// attempt's checkpoint record names (a resume point: queued, running,
// failed and cancelled jobs resume from it), or a key that names no job.
// kJobGone: its job has no record. kJobSucceeded: the job succeeded (its
// result is committed; the worker's retention deletes these, a late upload
// or a failed deletion leaves them). kUnrecorded: a file of an ended attempt
// that no record names (a stale attempt's late upload after it was fenced,
// an older checkpoint its attempt failed to delete): nothing resumes from it.
enum class JobFileVerdict { kKeep, kJobGone, kJobSucceeded, kUnrecorded };
const char* JobFileVerdictName(JobFileVerdict v);  // "keep", "job_gone", "job_succeeded", "unrecorded"
struct ClassifiedJobFile {
  store::ArtifactStore::JobFileInfo file;
  JobFileVerdict verdict = JobFileVerdict::kKeep;
};
// Lists the store's job files, then reads each job's record and checkpoint
// records (in that order: a file listed was uploaded before its job was read,
// and an attempt that had ended by then can record nothing more). Fails, and
// nothing may be deleted, when a job's record cannot be read.
Result<std::vector<ClassifiedJobFile>> ClassifyJobFiles(store::MetadataStore& meta,
                                                        store::ArtifactStore& blobs);

// Lists the blobs, then reads the references, then removes (or, dry run,
// counts) the unreferenced blobs older than the grace period. `now_s` is
// Unix seconds (the grace cutoff is now_s - grace_s against blob mtimes).
Result<GcReport> CollectGarbage(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                const GcOptions& options, int64_t now_s);
// {"ok", "dry_run", "grace_s", "store", "incomplete_writes", "blobs", "blob_bytes", "referenced",
//  "referenced_bytes", "records", "records_bytes", "recent", "recent_bytes", "deleted", "freed_bytes",
//  "raced", "deleted_shas", "leftovers": LeftoverReportJson,
//  "job_files": {"count", "bytes", "kept", "kept_bytes", "recent", "recent_bytes", "deleted",
//                "freed_bytes", "deleted_by_reason": {reason: n}, "deleted_keys": [...]}}
nlohmann::json GcReportJson(const GcReport& r);

// `kestrel du`. Blob bytes count once per owner: two versions sharing images
// both count them (`unique_bytes` of the totals counts each blob once).
struct DuReport {
  struct VersionUsage {
    std::string dataset, version_id;
    int64_t seq = 0;
    int64_t blobs = 0;  // manifest, report, images (References::Version::stored) present in the store
    uint64_t bytes = 0;
    int64_t missing = 0;  // named but absent (gc never does this; a damaged store may)
    std::string data_mode = "copy";
    int64_t referenced_files = 0;   // data_mode=reference: image files outside the home
    uint64_t referenced_bytes = 0;  // their sizes as recorded at import (not in `bytes`)
  };
  struct ModelUsage {
    std::string id, ref, dataset;
    int64_t blobs = 0;
    uint64_t bytes = 0;
  };
  struct JobUsage {
    int64_t job_id = 0;
    std::string state;              // "" when the folder has no job record
    uint64_t bytes = 0;             // home/jobs/<id>: attempt folders, logs
    uint64_t checkpoint_bytes = 0;  // of which *.ckpt
    int64_t checkpoints = 0;
  };
  std::vector<VersionUsage> versions;
  std::vector<ModelUsage> models;
  std::vector<JobUsage> jobs;
  int64_t records = 0;  // val/compare record blobs
  uint64_t records_bytes = 0;
  int64_t unreferenced = 0;  // what gc would consider (ignoring the grace period)
  uint64_t unreferenced_bytes = 0;
  int64_t blobs = 0;
  uint64_t blob_bytes = 0;  // every blob once
  uint64_t job_bytes = 0;
  uint64_t referenced_bytes = 0;  // every version's referenced image files (outside the home), summed
  // Job files on a shared store (S3 jobs/; none for the local store), and of
  // them the garbage gc deletes once older than its grace period.
  int64_t job_files = 0;
  uint64_t job_file_bytes = 0;
  int64_t job_files_garbage = 0;
  uint64_t job_files_garbage_bytes = 0;
};
Result<DuReport> DiskUsage(store::MetadataStore& meta, store::ArtifactStore& blobs, Env& env);
// {"ok", "datasets": [... {data_mode, referenced_files, referenced_bytes}], "models": [...],
//  "jobs": [...], "records": {count, bytes}, "unreferenced": {count, bytes},
//  "total": {blobs, blob_bytes, job_bytes, referenced_bytes},
//  "job_files": {count, bytes, garbage, garbage_bytes}}
nlohmann::json DuReportJson(const DuReport& r);

// Checkpoint retention of a run folder's weights/: keeps best.*, last.* and
// the newest `keep` epoch checkpoints (epoch<N>.ckpt, written every
// `save_period` epochs), deletes the older epoch checkpoints.
struct RetentionResult {
  std::vector<std::string> deleted;  // paths
  uint64_t freed_bytes = 0;
};
Result<RetentionResult> ApplyRetention(Env& env, const std::string& weights_dir, int keep);
// After a job's success: ApplyRetention on the successful attempt's run
// folder (the result's run_dir), and the checkpoints (*.ckpt) of the job's
// earlier attempts are deleted: nothing resumes from them any more (their
// logs, results and .safetensors weights stay). `keep` is the job's
// keep_ckpts.
Result<RetentionResult> ApplyJobRetention(Env& env, const std::string& home, const store::JobRecord& job,
                                          int keep);

}  // namespace kestrel::app
