// The image files of a data_mode=reference version (docs/datasets.md "Copy
// or reference"): such a version stores no image blobs; each manifest entry
// names the file it was imported from with its size, mtime and content hash
// (ManifestEntry::file, image_sha). Every read of a version's images goes
// through here, so a file that moved, was deleted or changed is an error
// naming the file, the version and what differs, never silently read.
//
// The check of one file: its size and mtime as recorded pass without
// reading it (FileCheck::kFast); otherwise, and always with kHashAll, its
// bytes must hash to the recorded SHA-256. A touched but unchanged file (new
// mtime, same bytes) passes. A copy-mode entry (empty `file.path`) is the
// artifact store's blob, verified on read by the store.
//
// Thread-safety: the functions may be called concurrently; the ImageSource
// they build is thread-safe (the loader calls it from its workers).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/loader.h"
#include "data/manifest.h"
#include "data/version.h"
#include "store/artifact_store.h"

namespace kestrel::data {

enum class FileCheck {
  kFast,     // recorded size + mtime; the content hash only when they differ
  kHashAll,  // the content hash of every file (`kestrel dataset verify`)
};

// "NAME@vN", how errors name a version.
std::string VersionName(const store::DatasetVersionRecord& r);

// Checks entry `e`'s referenced file (OK for a copy-mode entry) without
// keeping its bytes; `*hashed` (when given) says whether it was read.
// kFailedPrecondition (reason kDatasetErrors, location the file) when the
// file is missing or is not what was imported: the message names the file,
// `version` and what differs (size, content hash).
Status CheckReferencedFile(const ManifestEntry& e, const std::string& version, FileCheck check, Env& env,
                           bool* hashed = nullptr);

// The encoded bytes of entry `e`'s image: its referenced file, checked as
// CheckReferencedFile (the bytes are hashed only when size or mtime differ,
// or with kHashAll), else the blob `e.image_sha` of `blobs`.
Result<std::string> ReadEntryImage(const ManifestEntry& e, const std::string& version,
                                   store::ArtifactStore& blobs, Env& env, FileCheck check = FileCheck::kFast);

// The same for an image known by its manifest path, hash and referenced
// file (eval::SplitImage carries them).
Result<std::string> ReadImageBytes(const std::string& path, const std::string& image_sha,
                                   const ReferencedFile& file, const std::string& version,
                                   store::ArtifactStore& blobs, Env& env, FileCheck check = FileCheck::kFast);

// CheckReferencedFile over every entry of `v` (in parallel).
struct FileCheckReport {
  static constexpr size_t kMaxExamples = 20;
  int64_t images = 0;            // entries checked (VerifyVersionImages; else = files)
  int64_t files = 0;             // referenced files checked (0: a copy-mode version)
  int64_t hashed = 0;            // of which were read and hashed
  uint64_t bytes = 0;            // their recorded sizes, summed
  int64_t problems = 0;          // missing or changed, exact
  std::vector<Status> examples;  // the first kMaxExamples problems, manifest order
  bool Ok() const { return problems == 0; }
  // OK, or the first problem with how many there are in all.
  Status ToStatus(const std::string& version) const;
};
FileCheckReport CheckVersionFiles(const VersionView& v, FileCheck check, Env& env, int threads = 0);

// `kestrel dataset verify`: every image of `v` read and hashed, the
// referenced files (kHashAll) and the blobs (the store verifies what it
// reads); `images` counts them all, `files`/`bytes` the referenced ones.
FileCheckReport VerifyVersionImages(const VersionView& v, store::ArtifactStore& blobs, Env& env,
                                    int threads = 0);

// The loader's source of `v`'s images (ReadEntryImage, kFast). Borrows
// `blobs` and `env`, which must outlive it.
ImageSource VersionImageSource(const VersionView& v, store::ArtifactStore& blobs, Env& env = Env::Default());

}  // namespace kestrel::data
