// Content-addressed blob store on a local filesystem:
//   <root>/objects/<sha[0:2]>/<sha256>
// Writes are atomic (temp, fsync, rename) and deduplicated (same bytes, one
// blob). Reads verify the hash: a corrupted blob is reported as kCorruption,
// never silently returned.
//
// Thread-safety: all methods may be called concurrently, also from several
// processes sharing the root.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace kestrel::store {

class ArtifactStore {
 public:
  // `root` is the Kestrel home; blobs go under root/objects.
  explicit ArtifactStore(std::string root, Env& env = Env::Default());

  // Returns the sha256 of `bytes`; writes the blob unless already present.
  Result<std::string> Put(std::string_view bytes);
  // How a new blob reaches the disk. kSync: fsynced before Put returns.
  // kDeferred: renamed into place without fsync; durable only after
  // SyncDeferred() — for bulk imports that sync once before the metadata
  // that refers to the blobs is committed.
  enum class Durability { kSync, kDeferred };

  // Same for bytes whose hash the caller already computed (must match). An
  // existing blob is re-verified, and rewritten if it is damaged (e.g. a
  // deferred write cut short by a power loss); an intact one gets its mtime
  // refreshed, so the garbage collector's grace period (docs/disk.md) also
  // covers blobs an in-flight import or registration is about to reference.
  Result<std::string> PutWithHash(std::string_view bytes, const std::string& sha,
                                  Durability durability = Durability::kSync);
  // Makes every deferred blob durable (syncfs of the store's filesystem).
  Status SyncDeferred();
  // Reads and verifies. kNotFound when absent, kCorruption on hash mismatch.
  Result<std::string> Get(const std::string& sha);
  bool Has(const std::string& sha);
  // One blob as the garbage collector sees it (docs/disk.md).
  struct BlobInfo {
    std::string sha;
    uint64_t bytes = 0;
    int64_t mtime_s = 0;  // last write, or last deduplicated Put (Unix seconds)
  };
  // Every blob under objects/, sorted by sha. Other names there (temp files
  // of interrupted writes, a collector's "<sha>.gc") are not blobs.
  Result<std::vector<BlobInfo>> List();
  // The collector's removal: deletes the blob unless it was written or
  // re-Put at or after `keep_since_s` (its mtime), and returns whether it
  // deleted. The blob is first renamed aside and its mtime read again, so a
  // concurrent Put either refreshed the mtime before the rename (the blob is
  // renamed back) or finds the blob gone and writes it anew: a Put that
  // returned is never undone. kNotFound-free: an absent blob is "not deleted".
  Result<bool> RemoveIfUntouchedSince(const std::string& sha, int64_t keep_since_s);
  // Where the blob lives (whether or not it exists).
  std::string PathFor(const std::string& sha) const;
  const std::string& Root() const { return root_; }

 private:
  std::string root_;
  Env& env_;
};

// $KESTREL_HOME, else "./.kestrel".
std::string KestrelHome();
// $KESTREL_DB, else "sqlite:<home>/kestrel.db".
std::string MetadataUrl(const std::string& home);

}  // namespace kestrel::store
