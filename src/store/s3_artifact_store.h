// ArtifactStore on an S3-compatible object store (KESTREL_ARTIFACTS=
// s3://bucket/prefix): blobs under <prefix>/objects/<aa>/<sha256>, path-style
// requests through s3::Client (SigV4, retries, clock-skew resync).
//
// - Visible only when complete: a small blob is one PutObject; a blob over
//   multipart_threshold is uploaded in parts and the content-addressed key
//   appears only when CompleteMultipartUpload succeeds.
// - Per-part retry: each part is its own request with the client's retries.
// - Resume: a Put of a blob whose multipart upload was interrupted (a killed
//   process, a lost host) reuses the parts already uploaded whose size and
//   MD5 ETag match, and uploads only the rest.
// - Verified reads: Get hashes what came back; a mismatch is kCorruption.
// - SweepIncompleteWrites aborts multipart uploads under the prefix older
//   than the cutoff (`kestrel gc` runs it with its grace period).
// - Garbage collection: there is no atomic rename on S3, so
//   RemoveIfUntouchedSince reads LastModified and deletes; a Put that
//   deduplicates in the gap between the two can be undone. The collector's
//   grace period (docs/disk.md) makes that window matter only for a blob
//   unreferenced for the whole period and re-Put in the same second.
//
// - Job files (ArtifactStore::PutJobFile): each running job's checkpoint
//   under <prefix>/jobs/<job>/attempt-<n>/<sha>.<name>, uploaded the same
//   way, so another host resumes the job (docs/disk.md).
//
// Thread-safety: as ArtifactStore.
#pragma once

#include <functional>
#include <string>

#include "core/thread_annotations.h"
#include "s3/client.h"
#include "store/artifact_store.h"

namespace kestrel::store {

struct S3StoreOptions {
  // Blobs of at least this many bytes go up as multipart uploads.
  uint64_t multipart_threshold = 16ull << 20;
  // Size of each part but the last (S3's minimum is 5 MiB).
  uint64_t part_size = 8ull << 20;
  // The Kestrel home (Root()); LocalPath keeps downloaded blobs under
  // <home>/cache/s3-objects.
  std::string home;
  // Cap on the download cache <home>/cache/s3-objects (LocalPath): after a
  // download that takes it over the cap, the least recently used files go
  // first (a hit refreshes a file's mtime; atime is unreliable under
  // relatime/noatime) until it fits. 0 = no cap. KESTREL_S3_CACHE_GB.
  uint64_t cache_max_bytes = 10'000'000'000ull;
  // Test seam: called before each part is uploaded; an error stops the upload
  // there as a crash would (nothing is aborted or cleaned up).
  std::function<Status(int part_number)> before_part;
};

class S3ArtifactStore final : public ArtifactStore {
 public:
  S3ArtifactStore(s3::Client& client, s3::S3Url where, S3StoreOptions options, Env& env = Env::Default());
  // Owns its client.
  S3ArtifactStore(std::unique_ptr<s3::Client> client, s3::S3Url where, S3StoreOptions options,
                  Env& env = Env::Default());

  Result<std::string> PutWithHash(std::string_view bytes, const std::string& sha,
                                  Durability durability = Durability::kSync) override;
  Status SyncDeferred() override { return {}; }  // S3 writes are durable when they return
  Result<std::string> Get(const std::string& sha) override;
  bool Has(const std::string& sha) override;
  Result<uint64_t> Size(const std::string& sha) override;
  Result<std::string> LocalPath(const std::string& sha) override;
  Result<std::vector<BlobInfo>> List() override;
  Result<bool> RemoveIfUntouchedSince(const std::string& sha, int64_t keep_since_s) override;
  Result<int> SweepIncompleteWrites(int64_t started_before_s) override;
  bool SharesJobFiles() const override { return true; }
  Result<std::string> PutJobFile(int64_t job_id, int64_t attempt, const std::string& name,
                                 std::string_view bytes, const std::string& sha) override;
  Result<std::string> GetJobFile(const std::string& key, const std::string& sha) override;
  Result<int> RemoveJobFiles(int64_t job_id, int64_t only_attempt,
                             const std::vector<std::string>& keep) override;
  Result<std::vector<JobFileInfo>> ListJobFiles() override;
  Result<bool> RemoveJobFile(const std::string& key) override;
  std::string PathFor(const std::string& sha) const override;
  std::string Describe() const override;
  const std::string& Root() const override { return options_.home; }

  // The object key of a blob: <prefix>/objects/<aa>/<sha>.
  std::string KeyFor(const std::string& sha) const;
  // Trims the download cache to `max_bytes`, least recently used first,
  // never removing `keep` (a path just handed out). Returns files removed.
  // Several processes may trim at once: a file already gone is skipped.
  Result<int> TrimCache(uint64_t max_bytes, const std::string& keep = "");
  // How the last PutWithHash (of any thread) went (tests, figures): parts
  // uploaded, parts reused from an interrupted upload.
  struct PutStats {
    int parts_uploaded = 0;
    int parts_reused = 0;
  };
  PutStats LastPutStats() const {
    MutexLock l(mu_);
    return last_;
  }

 private:
  Status UploadMultipart(std::string_view bytes, const std::string& key, PutStats& stats);
  // One PutObject below the threshold, else a multipart upload.
  Status Upload(std::string_view bytes, const std::string& key, PutStats& stats);
  std::string ObjectsPrefix() const;
  // <prefix>/jobs/; <prefix>/jobs/<job>/ and, with attempt > 0, attempt-<n>/ under it.
  std::string JobsRoot() const;
  std::string JobPrefix(int64_t job_id, int64_t attempt) const;

  std::unique_ptr<s3::Client> owned_;
  s3::Client& client_;
  s3::S3Url where_;
  S3StoreOptions options_;
  Env& env_;
  mutable Mutex mu_;
  PutStats last_ GUARDED_BY(mu_);
};

}  // namespace kestrel::store
