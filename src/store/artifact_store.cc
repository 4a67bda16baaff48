#include "store/artifact_store.h"

#include <cstdlib>

#include "core/hash.h"

namespace kestrel::store {

ArtifactStore::ArtifactStore(std::string root, Env& env) : root_(std::move(root)), env_(env) {}

std::string ArtifactStore::PathFor(const std::string& sha) const {
  return JoinPath(JoinPath(JoinPath(root_, "objects"), sha.substr(0, 2)), sha);
}

Result<std::string> ArtifactStore::Put(std::string_view bytes) {
  return PutWithHash(bytes, Sha256Hex(bytes));
}

Result<std::string> ArtifactStore::PutWithHash(std::string_view bytes, const std::string& sha,
                                               Durability durability) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  std::string path = PathFor(sha);
  FileInfo info = env_.Stat(path);
  if (info.exists && info.size == bytes.size()) {
    auto existing = env_.ReadFile(path, bytes.size());
    if (existing.IsOk() && Sha256Hex(*existing) == sha) return sha;  // deduplicated
  }
  KESTREL_RETURN_IF_ERROR(env_.CreateDirs(DirName(path)));
  if (durability == Durability::kDeferred) {
    KESTREL_RETURN_IF_ERROR(env_.WriteFileDeferred(path, bytes));
  } else {
    KESTREL_RETURN_IF_ERROR(env_.WriteFileAtomic(path, bytes));
  }
  return sha;
}

Status ArtifactStore::SyncDeferred() {
  std::string objects = JoinPath(root_, "objects");
  if (!env_.Stat(objects).exists) return {};
  return env_.SyncFilesystem(objects);
}

Result<std::string> ArtifactStore::Get(const std::string& sha) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  std::string path = PathFor(sha);
  auto bytes = env_.ReadFile(path);
  if (!bytes.IsOk()) {
    if (bytes.GetStatus().Code() == StatusCode::kNotFound) {
      return Status::NotFound("blob " + sha + " is missing from the artifact store", {path});
    }
    return bytes.GetStatus();
  }
  std::string actual = Sha256Hex(*bytes);
  if (actual != sha) {
    return Status::Corruption("blob " + sha + " is corrupted (content hashes to " + actual + ")",
                              {path});
  }
  return std::move(bytes).Value();
}

bool ArtifactStore::Has(const std::string& sha) {
  return IsSha256Hex(sha) && env_.Stat(PathFor(sha)).exists;
}

std::string KestrelHome() {
  const char* h = std::getenv("KESTREL_HOME");
  return (h != nullptr && *h != '\0') ? std::string(h) : std::string(".kestrel");
}

std::string MetadataUrl(const std::string& home) {
  const char* db = std::getenv("KESTREL_DB");
  if (db != nullptr && *db != '\0') return db;
  return "sqlite:" + JoinPath(home, "kestrel.db");
}

}  // namespace kestrel::store
