#include "data/version_files.h"

#include <algorithm>
#include <utility>

#include "core/failure.h"
#include "core/hash.h"
#include "core/parallel.h"

namespace kestrel::data {
namespace {

constexpr uint64_t kMaxImageBytes = uint64_t{2} << 30;  // as import reads them

// What the checks need of an image: manifest path, hash, referenced file.
struct ImageAt {
  const std::string& path;
  const std::string& image_sha;
  const ReferencedFile& file;
};
ImageAt Of(const ManifestEntry& e) { return {e.path, e.image_sha, e.file}; }

Status FileProblem(const ImageAt& e, const std::string& version, const std::string& what) {
  return Status::FailedPrecondition("image file " + e.file.path + " of " + version +
                                        " (data_mode=reference, " + e.path + ") " + what +
                                        "; put the original file back, or import the dataset again",
                                    {e.file.path, 0, ""})
      .WithReason(FailureReason::kDatasetErrors);
}

Status Missing(const ImageAt& e, const std::string& version, const FileInfo& info) {
  return FileProblem(
      e, version,
      info.exists ? "is no longer a regular file" : "is missing (moved or deleted since the import)");
}

Status SizeDiffers(const ImageAt& e, const std::string& version, uint64_t now) {
  return FileProblem(e, version,
                     "changed since the import: size " + std::to_string(e.file.size) + " -> " +
                         std::to_string(now) + " bytes");
}

// The bytes of the file must hash to the entry's image hash.
Status CheckHash(const ImageAt& e, const std::string& version, const std::string& bytes) {
  if (bytes.size() != e.file.size) return SizeDiffers(e, version, bytes.size());
  const std::string sha = Sha256Hex(bytes);
  if (sha == e.image_sha) return {};
  return FileProblem(e, version,
                     "changed since the import: content hash " + e.image_sha.substr(0, 12) + " -> " +
                         sha.substr(0, 12) + " (same size, " + std::to_string(bytes.size()) + " bytes)");
}

Result<std::string> ReadReferenced(const ImageAt& e, const std::string& version, FileCheck check, Env& env) {
  const FileInfo info = env.Stat(e.file.path);
  if (!info.exists || !info.is_regular) return Missing(e, version, info);
  if (info.size != e.file.size) return SizeDiffers(e, version, info.size);
  auto bytes = env.ReadFile(e.file.path, kMaxImageBytes);
  if (!bytes.IsOk()) {
    if (bytes.GetStatus().Code() == StatusCode::kNotFound) return Missing(e, version, {});
    return FileProblem(e, version, "cannot be read: " + bytes.GetStatus().Message());
  }
  const bool unchanged = info.mtime_ns == e.file.mtime_ns && bytes->size() == e.file.size;
  if (check == FileCheck::kHashAll || !unchanged) KESTREL_RETURN_IF_ERROR(CheckHash(e, version, *bytes));
  return bytes;
}

}  // namespace

std::string VersionName(const store::DatasetVersionRecord& r) {
  return r.dataset + "@v" + std::to_string(r.seq);
}

Status CheckReferencedFile(const ManifestEntry& e, const std::string& version, FileCheck check, Env& env,
                           bool* hashed) {
  if (hashed != nullptr) *hashed = false;
  if (e.file.path.empty()) return {};
  const FileInfo info = env.Stat(e.file.path);
  if (!info.exists || !info.is_regular) return Missing(Of(e), version, info);
  if (info.size != e.file.size) return SizeDiffers(Of(e), version, info.size);
  if (check == FileCheck::kFast && info.mtime_ns == e.file.mtime_ns) return {};
  if (hashed != nullptr) *hashed = true;
  return ReadReferenced(Of(e), version, FileCheck::kHashAll, env).GetStatus();
}

Result<std::string> ReadEntryImage(const ManifestEntry& e, const std::string& version,
                                   store::ArtifactStore& blobs, Env& env, FileCheck check) {
  return ReadImageBytes(e.path, e.image_sha, e.file, version, blobs, env, check);
}

Result<std::string> ReadImageBytes(const std::string& path, const std::string& image_sha,
                                   const ReferencedFile& file, const std::string& version,
                                   store::ArtifactStore& blobs, Env& env, FileCheck check) {
  if (file.path.empty()) return blobs.Get(image_sha);
  return ReadReferenced({path, image_sha, file}, version, check, env);
}

Status FileCheckReport::ToStatus(const std::string& version) const {
  if (problems == 0) return {};
  const Status& first = examples.front();
  if (problems == 1) return first;
  return Status(first.Code(),
                first.Message() + " (" + std::to_string(problems) + " of the " + std::to_string(files) +
                    " image files of " + version + " are missing or changed; `kestrel dataset verify " +
                    version + "` lists them)",
                first.Where())
      .WithReason(FailureReason::kDatasetErrors);
}

FileCheckReport CheckVersionFiles(const VersionView& v, FileCheck check, Env& env, int threads) {
  FileCheckReport out;
  const auto& entries = v.manifest.entries;
  if (!v.manifest.HasReferences()) return out;
  const std::string version = VersionName(v.record);
  std::vector<Status> results(entries.size());
  std::vector<char> hashed(entries.size(), 0);
  // Each item records its own outcome and returns OK, so every file is checked.
  (void)ParallelFor(entries.size(), threads, [&](size_t i) -> Status {
    bool h = false;
    results[i] = CheckReferencedFile(entries[i], version, check, env, &h);
    hashed[i] = h ? 1 : 0;
    return {};
  });
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].file.path.empty()) continue;
    ++out.images;
    ++out.files;
    out.bytes += entries[i].file.size;
    out.hashed += hashed[i];
    if (results[i].IsOk()) continue;
    ++out.problems;
    if (out.examples.size() < FileCheckReport::kMaxExamples) out.examples.push_back(results[i]);
  }
  return out;
}

FileCheckReport VerifyVersionImages(const VersionView& v, store::ArtifactStore& blobs, Env& env,
                                    int threads) {
  FileCheckReport out;
  const auto& entries = v.manifest.entries;
  const std::string version = VersionName(v.record);
  std::vector<Status> results(entries.size());
  // Each item records its own outcome and returns OK, so every image is read.
  (void)ParallelFor(entries.size(), threads, [&](size_t i) -> Status {
    results[i] = ReadEntryImage(entries[i], version, blobs, env, FileCheck::kHashAll).GetStatus();
    return {};
  });
  for (size_t i = 0; i < entries.size(); ++i) {
    ++out.images;
    ++out.hashed;
    if (!entries[i].file.path.empty()) {
      ++out.files;
      out.bytes += entries[i].file.size;
    }
    if (results[i].IsOk()) continue;
    ++out.problems;
    if (out.examples.size() < FileCheckReport::kMaxExamples) {
      // A blob's error names the blob, not the version: say which image it is.
      out.examples.push_back(entries[i].file.path.empty()
                                 ? results[i].WithContext(version + " image " + entries[i].path)
                                 : results[i]);
    }
  }
  return out;
}

ImageSource VersionImageSource(const VersionView& v, store::ArtifactStore& blobs, Env& env) {
  return [version = VersionName(v.record), &blobs, &env](const ManifestEntry& e) {
    return ReadEntryImage(e, version, blobs, env, FileCheck::kFast);
  };
}

}  // namespace kestrel::data
