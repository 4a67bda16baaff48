#include "store/artifact_store.h"

#include <cstdlib>

#include "core/hash.h"
#include "store/local_artifact_store.h"
#include "store/s3_artifact_store.h"

namespace kestrel::store {

Result<std::string> ArtifactStore::Put(std::string_view bytes) {
  return PutWithHash(bytes, Sha256Hex(bytes));
}

namespace {
Status NoSharedJobFiles(const ArtifactStore& s) {
  return Status::FailedPrecondition("the artifact store " + s.Describe() +
                                    " keeps job files on the worker's disk, not shared (KESTREL_ARTIFACTS)");
}
}  // namespace

Result<std::string> ArtifactStore::PutJobFile(int64_t, int64_t, const std::string&, std::string_view,
                                              const std::string&) {
  return NoSharedJobFiles(*this);
}
Result<std::string> ArtifactStore::GetJobFile(const std::string&, const std::string&) {
  return NoSharedJobFiles(*this);
}
Result<int> ArtifactStore::RemoveJobFiles(int64_t, int64_t, const std::vector<std::string>&) {
  return NoSharedJobFiles(*this);
}
Result<std::vector<ArtifactStore::JobFileInfo>> ArtifactStore::ListJobFiles() {
  return std::vector<JobFileInfo>{};
}
Result<bool> ArtifactStore::RemoveJobFile(const std::string&) { return NoSharedJobFiles(*this); }

Result<std::unique_ptr<ArtifactStore>> OpenArtifactStore(const std::string& home, Env& env) {
  const char* url = std::getenv("KESTREL_ARTIFACTS");
  if (url == nullptr || *url == '\0' || std::string_view(url) == "local") {
    return std::unique_ptr<ArtifactStore>(std::make_unique<LocalArtifactStore>(home, env));
  }
  KESTREL_ASSIGN_OR_RETURN(s3::S3Url where, s3::ParseS3Url(url));
  KESTREL_ASSIGN_OR_RETURN(s3::ResolvedOptions resolved, s3::OptionsFromEnvironment(std::getenv));
  S3StoreOptions options;
  options.home = home;
  if (const char* gb = std::getenv("KESTREL_S3_CACHE_GB"); gb != nullptr && *gb != '\0') {
    // Decimal GB (10^9 bytes), decimals allowed; 0 = no cap.
    char* end = nullptr;
    const double v = std::strtod(gb, &end);
    if (end == gb || *end != '\0' || !(v >= 0) || v > 1e9) {
      return Status::InvalidArgument(
          "KESTREL_S3_CACHE_GB='" + std::string(gb) + "' is not a size in GB (a number >= 0; 0 = no cap)",
          {"", 0, "KESTREL_S3_CACHE_GB"});
    }
    options.cache_max_bytes = static_cast<uint64_t>(v * 1e9);
  }
  return std::unique_ptr<ArtifactStore>(
      std::make_unique<S3ArtifactStore>(std::make_unique<s3::Client>(std::move(resolved.options), env),
                                        std::move(where), std::move(options), env));
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
