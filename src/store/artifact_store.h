// The content-addressed blob store every module reads and writes blobs
// through: dataset images, manifests and reports, model weights, plots,
// exports and evaluation records, each named by the SHA-256 of its bytes.
//
// Two implementations (docs/disk.md "Artifact store"):
//   LocalArtifactStore (local_artifact_store.h): <home>/objects/<aa>/<sha>,
//     the embedded default; no setting.
//   S3ArtifactStore (s3_artifact_store.h): s3://bucket/prefix/objects/<aa>/<sha>
//     when KESTREL_ARTIFACTS=s3://bucket/prefix.
// Every implementation: a blob is visible only when complete, writes are
// deduplicated, and every read verifies the hash (a damaged blob is
// kCorruption, never returned).
//
// Thread-safety: all methods may be called concurrently, also from several
// processes (and, for S3, hosts) sharing the store.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace kestrel::store {

class ArtifactStore {
 public:
  virtual ~ArtifactStore() = default;

  // Returns the sha256 of `bytes`; writes the blob unless already present.
  Result<std::string> Put(std::string_view bytes);
  // How a new blob reaches durable storage. kSync: durable before Put
  // returns. kDeferred: durable only after SyncDeferred() — for bulk imports
  // that sync once before the metadata that refers to the blobs is committed
  // (the local store; S3 writes are durable when they return).
  enum class Durability { kSync, kDeferred };

  // Same for bytes whose hash the caller already computed (must match). An
  // existing blob has its modification time refreshed, so the garbage
  // collector's grace period (docs/disk.md) also covers blobs an in-flight
  // import or registration is about to reference.
  virtual Result<std::string> PutWithHash(std::string_view bytes, const std::string& sha,
                                          Durability durability = Durability::kSync) = 0;
  // Makes every deferred blob durable.
  virtual Status SyncDeferred() = 0;
  // Reads and verifies. kNotFound when absent, kCorruption on hash mismatch.
  virtual Result<std::string> Get(const std::string& sha) = 0;
  virtual bool Has(const std::string& sha) = 0;
  // The blob's size in bytes without reading it; kNotFound when absent.
  virtual Result<uint64_t> Size(const std::string& sha) = 0;
  // A verified local file holding the blob, for readers that need a path
  // (weights loaded by a backend): the blob itself for the local store, a
  // download cache under the home for S3. kNotFound / kCorruption as Get.
  virtual Result<std::string> LocalPath(const std::string& sha) = 0;

  // One blob as the garbage collector sees it (docs/disk.md).
  struct BlobInfo {
    std::string sha;
    uint64_t bytes = 0;
    int64_t mtime_s = 0;  // last write, or last deduplicated Put (Unix seconds)
  };
  // Every blob, sorted by sha. Unfinished writes are not blobs.
  virtual Result<std::vector<BlobInfo>> List() = 0;
  // The collector's removal: deletes the blob unless it was written or
  // re-Put at or after `keep_since_s`, and returns whether it deleted. An
  // absent blob is "not deleted", not an error.
  virtual Result<bool> RemoveIfUntouchedSince(const std::string& sha, int64_t keep_since_s) = 0;
  // Removes what interrupted writes started before `started_before_s` left on
  // the store's side (S3: aborts their multipart uploads, which are billed
  // and invisible otherwise); returns how many. The local store's temp files
  // are the collector's leftovers (app/leftovers.h), so it has none here.
  virtual Result<int> SweepIncompleteWrites(int64_t started_before_s) = 0;

  // ---- Job files shared between hosts (docs/disk.md "Job checkpoints on S3")
  //
  // A store that every host reaches (S3) also keeps each running job's
  // resume point, so a retry on any host continues it. Keys are per attempt
  // and per content, <prefix>/jobs/<job>/attempt-<n>/<sha256>.<name>: an
  // object is never overwritten, so a stale attempt's late upload can only
  // add an object nobody refers to; which one is the job's resume point is
  // recorded in the metadata store, fenced (MetadataStore::RecordCheckpoint).
  // The local store keeps job files in the worker's own job folder: false,
  // and the three calls below are kFailedPrecondition.
  virtual bool SharesJobFiles() const { return false; }
  // Uploads `bytes` (whose sha256 is `sha`) as the attempt's file `name`
  // (e.g. "last.ckpt"); returns its key. Visible only when complete.
  virtual Result<std::string> PutJobFile(int64_t job_id, int64_t attempt, const std::string& name,
                                         std::string_view bytes, const std::string& sha);
  // Reads `key` and verifies it hashes to `sha` (kCorruption otherwise,
  // kNotFound when absent).
  virtual Result<std::string> GetJobFile(const std::string& key, const std::string& sha);
  // Deletes the job's files (all attempts) except the keys in `keep`, and
  // those of attempt `only_attempt` when it is > 0 (then only that
  // attempt's are considered); returns how many objects it deleted.
  virtual Result<int> RemoveJobFiles(int64_t job_id, int64_t only_attempt,
                                     const std::vector<std::string>& keep);
  // For the collector (`kestrel gc`, `du`; docs/disk.md): every job file of
  // every job, sorted by key, with the job and attempt its key names. A key
  // under jobs/ that is not <job>/attempt-<n>/<file> is listed with job 0.
  // The default (a store that shares no job files: the local store keeps
  // them in the worker's job folder) lists none.
  struct JobFileInfo {
    std::string key;
    int64_t job_id = 0;
    int64_t attempt = 0;
    uint64_t bytes = 0;
    int64_t mtime_s = 0;  // when it was written (Unix seconds)
  };
  virtual Result<std::vector<JobFileInfo>> ListJobFiles();
  // Deletes one job file by its key (one ListJobFiles gave); false when it
  // was already gone. kInvalidArgument for a key outside the job files.
  virtual Result<bool> RemoveJobFile(const std::string& key);

  // Where the blob lives, for people (whether or not it exists): a file path
  // for the local store, an s3:// URL for S3. Not necessarily a readable
  // file: use LocalPath for that.
  virtual std::string PathFor(const std::string& sha) const = 0;
  // "local <home>/objects" or "s3://bucket/prefix at <endpoint>".
  virtual std::string Describe() const = 0;
  // The Kestrel home this store serves (the local store's blobs are under
  // Root()/objects; the S3 store keeps its download cache under it).
  virtual const std::string& Root() const = 0;
};

// The store `home` uses: KESTREL_ARTIFACTS=s3://bucket/prefix (endpoint,
// region and credentials from the AWS_* variables and ~/.aws files,
// s3/client.h), else the local store under `home`. kInvalidArgument naming
// KESTREL_ARTIFACTS or the AWS setting when they are malformed.
Result<std::unique_ptr<ArtifactStore>> OpenArtifactStore(const std::string& home, Env& env = Env::Default());

// $KESTREL_HOME, else "./.kestrel".
std::string KestrelHome();
// $KESTREL_DB, else "sqlite:<home>/kestrel.db".
std::string MetadataUrl(const std::string& home);

}  // namespace kestrel::store
