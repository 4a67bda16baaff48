#include "store/local_artifact_store.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/hash.h"
#include "store/private_files.h"

namespace kestrel::store {

LocalArtifactStore::LocalArtifactStore(std::string root, Env& env) : root_(std::move(root)), env_(env) {}

std::string LocalArtifactStore::PathFor(const std::string& sha) const {
  return JoinPath(JoinPath(JoinPath(root_, "objects"), sha.substr(0, 2)), sha);
}

Result<std::string> LocalArtifactStore::PutWithHash(std::string_view bytes, const std::string& sha,
                                                    Durability durability) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  std::string path = PathFor(sha);
  FileInfo info = env_.Stat(path);
  if (info.exists && info.size == bytes.size()) {
    auto existing = env_.ReadFile(path, bytes.size());
    // Deduplicated: refresh the mtime so a concurrent collector keeps the
    // blob through its grace period. When the collector renamed it aside in
    // between, the touch fails (ENOENT) and the blob is written below.
    if (existing.IsOk() && Sha256Hex(*existing) == sha &&
        ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0) == 0) {
      return sha;
    }
  }
  if (const std::string objects = JoinPath(root_, "objects"); !env_.Stat(objects).exists) {
    // The first blob: the home and objects/ owner-only (private_files.h).
    KESTREL_RETURN_IF_ERROR(CreatePrivateDir(root_));
    KESTREL_RETURN_IF_ERROR(CreatePrivateDir(objects));
  }
  KESTREL_RETURN_IF_ERROR(env_.CreateDirs(DirName(path)));
  if (durability == Durability::kDeferred) {
    KESTREL_RETURN_IF_ERROR(env_.WriteFileDeferred(path, bytes));
  } else {
    KESTREL_RETURN_IF_ERROR(env_.WriteFileAtomic(path, bytes));
  }
  return sha;
}

Status LocalArtifactStore::SyncDeferred() {
  std::string objects = JoinPath(root_, "objects");
  if (!env_.Stat(objects).exists) return {};
  return env_.SyncFilesystem(objects);
}

Result<std::string> LocalArtifactStore::Get(const std::string& sha) {
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
    return Status::Corruption("blob " + sha + " is corrupted (content hashes to " + actual + ")", {path});
  }
  return std::move(bytes).Value();
}

Result<std::vector<ArtifactStore::BlobInfo>> LocalArtifactStore::List() {
  std::vector<BlobInfo> out;
  const std::string objects = JoinPath(root_, "objects");
  if (!env_.Stat(objects).is_dir) return out;
  KESTREL_ASSIGN_OR_RETURN(auto dirs, env_.ListDir(objects));
  for (const auto& d : dirs) {
    const std::string dir = JoinPath(objects, d);
    if (d.size() != 2 || !env_.Stat(dir).is_dir) continue;
    KESTREL_ASSIGN_OR_RETURN(auto names, env_.ListDir(dir));
    for (const auto& n : names) {
      if (!IsSha256Hex(n) || n.compare(0, 2, d) != 0) continue;
      struct stat st {};
      // Gone since the listing (a concurrent collector): not a blob any more.
      if (::lstat(JoinPath(dir, n).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
      out.push_back({n, static_cast<uint64_t>(st.st_size), static_cast<int64_t>(st.st_mtime)});
    }
  }
  std::sort(out.begin(), out.end(), [](const BlobInfo& a, const BlobInfo& b) { return a.sha < b.sha; });
  return out;
}

Result<bool> LocalArtifactStore::RemoveIfUntouchedSince(const std::string& sha, int64_t keep_since_s) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  const std::string path = PathFor(sha);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return false;
  if (static_cast<int64_t>(st.st_mtime) >= keep_since_s) return false;
  const std::string aside = path + ".gc";
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    if (errno == ENOENT) return false;
    return Status::IoError(std::string("cannot move the blob aside: ") + std::strerror(errno), {path});
  }
  // A Put that deduplicated before the rename refreshed the mtime: put it back
  // (over a copy a later Put may have written meanwhile: same bytes).
  if (::lstat(aside.c_str(), &st) != 0 || static_cast<int64_t>(st.st_mtime) >= keep_since_s) {
    if (::rename(aside.c_str(), path.c_str()) != 0 && errno != ENOENT) {
      return Status::IoError(std::string("cannot move the blob back: ") + std::strerror(errno), {aside});
    }
    return false;
  }
  if (::unlink(aside.c_str()) != 0 && errno != ENOENT) {
    return Status::IoError(std::string("cannot delete the blob: ") + std::strerror(errno), {aside});
  }
  return true;
}

bool LocalArtifactStore::Has(const std::string& sha) {
  return IsSha256Hex(sha) && env_.Stat(PathFor(sha)).exists;
}

Result<uint64_t> LocalArtifactStore::Size(const std::string& sha) {
  if (!IsSha256Hex(sha)) return Status::InvalidArgument("not a sha256: '" + sha + "'");
  const FileInfo info = env_.Stat(PathFor(sha));
  if (!info.exists)
    return Status::NotFound("blob " + sha + " is missing from the artifact store", {PathFor(sha)});
  return info.size;
}

Result<std::string> LocalArtifactStore::LocalPath(const std::string& sha) {
  KESTREL_RETURN_IF_ERROR(Get(sha).GetStatus());
  return PathFor(sha);
}

}  // namespace kestrel::store
