// The embedded default ArtifactStore: blobs as files under
//   <root>/objects/<sha[0:2]>/<sha256>
// Writes are atomic (temp, fsync, rename) and deduplicated (same bytes, one
// blob). Reads verify the hash. Thread- and process-safe (atomic renames).
#pragma once

#include <string>

#include "store/artifact_store.h"

namespace kestrel::store {

class LocalArtifactStore final : public ArtifactStore {
 public:
  // `root` is the Kestrel home; blobs go under root/objects.
  explicit LocalArtifactStore(std::string root, Env& env = Env::Default());

  // An existing blob is re-verified, and rewritten if it is damaged (e.g. a
  // deferred write cut short by a power loss); an intact one gets its mtime
  // refreshed.
  Result<std::string> PutWithHash(std::string_view bytes, const std::string& sha,
                                  Durability durability = Durability::kSync) override;
  // syncfs of the store's filesystem.
  Status SyncDeferred() override;
  Result<std::string> Get(const std::string& sha) override;
  bool Has(const std::string& sha) override;
  Result<uint64_t> Size(const std::string& sha) override;
  // Verifies the blob, then returns its own path.
  Result<std::string> LocalPath(const std::string& sha) override;
  // Other names under objects/ (temp files of interrupted writes, a
  // collector's "<sha>.gc") are not blobs.
  Result<std::vector<BlobInfo>> List() override;
  // The blob is first renamed aside and its mtime read again, so a concurrent
  // Put either refreshed the mtime before the rename (the blob is renamed
  // back) or finds the blob gone and writes it anew: a Put that returned is
  // never undone.
  Result<bool> RemoveIfUntouchedSince(const std::string& sha, int64_t keep_since_s) override;
  Result<int> SweepIncompleteWrites(int64_t started_before_s) override { return 0; }
  std::string PathFor(const std::string& sha) const override;
  std::string Describe() const override { return "local " + root_ + "/objects"; }
  const std::string& Root() const override { return root_; }

 private:
  std::string root_;
  Env& env_;
};

}  // namespace kestrel::store
