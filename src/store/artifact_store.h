// Content-addressed blob store on a local filesystem:
//   <root>/objects/<sha[0:2]>/<sha256>
// Writes are atomic (temp, fsync, rename) and deduplicated (same bytes, one
// blob). Reads verify the hash: a corrupted blob is reported as kCorruption,
// never silently returned.
//
// Thread-safety: all methods may be called concurrently, also from several
// processes sharing the root.
#pragma once

#include <string>
#include <string_view>

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
  // deferred write cut short by a power loss).
  Result<std::string> PutWithHash(std::string_view bytes, const std::string& sha,
                                  Durability durability = Durability::kSync);
  // Makes every deferred blob durable (syncfs of the store's filesystem).
  Status SyncDeferred();
  // Reads and verifies. kNotFound when absent, kCorruption on hash mismatch.
  Result<std::string> Get(const std::string& sha);
  bool Has(const std::string& sha);
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
