// Dataset versions: the canonical manifest and its id.
//
// A version is identified by the SHA-256 of its canonical manifest text: the
// class names, then one line per entry sorted by (path, split) with the image
// SHA-256, the normalized label hash, width, height and split. Same content
// anywhere -> same id; any byte of an image or any label value changed -> a
// new id. Label normalization: boxes rounded to 6 decimals, deduplicated and
// sorted, so reordering lines in a label file is not a change.
//
// A version imported with data_mode=reference (docs/datasets.md "Copy or
// reference") stores no image blobs: each entry also records the image
// file it was read from (ManifestEntry::file). That record is not part of
// the canonical text, so the same images and labels have the same version id
// in either mode; the stored manifest JSON then has format_version 2, which
// a Kestrel that does not know references refuses instead of looking for
// blobs that were never written.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/dataset.h"

namespace kestrel::data {

// The file a referenced image is read from, as it was when imported.
struct ReferencedFile {
  std::string path;      // absolute; empty: the image is a blob (data_mode=copy)
  uint64_t size = 0;     // bytes
  int64_t mtime_ns = 0;  // modification time, ns since the Unix epoch
  bool operator==(const ReferencedFile&) const = default;
};

struct ManifestEntry {
  std::string path;  // manifest key (Sample::rel_path)
  Split split = Split::kTrain;
  std::string image_sha;   // sha256 of the image file bytes
  std::string label_hash;  // sha256 of CanonicalLabelText(boxes)
  int width = 0;           // oriented (EXIF-applied) size in pixels
  int height = 0;
  std::vector<Box> boxes;  // canonical: rounded, deduplicated, sorted
  ReferencedFile file;     // data_mode=reference only (not in the version id)
};

struct Manifest {
  std::vector<std::string> names;
  std::vector<ManifestEntry> entries;  // sorted by (path, split)

  // True when an entry's image is a referenced file instead of a blob.
  bool HasReferences() const;
};

// Rounds to 6 decimals, drops exact duplicates, sorts (cls, cx, cy, w, h).
std::vector<Box> CanonicalBoxes(std::vector<Box> boxes);
// "cls cx cy w h\n" per box with 6 decimals: exactly what YOLO export writes.
std::string CanonicalLabelText(const std::vector<Box>& canonical_boxes);
std::string LabelHash(const std::vector<Box>& canonical_boxes);

// Sorts entries and fills label hashes from boxes.
void Canonicalize(Manifest& m);
std::string CanonicalManifestText(const Manifest& m);
std::string VersionId(const Manifest& m);

// Full manifest (with boxes) as stored in the artifact store.
std::string ManifestToJson(const Manifest& m);
// `origin` names the blob in errors. Verifies every label hash.
Result<Manifest> ManifestFromJson(const std::string& text, const std::string& origin);

// Deterministic split for sources without one: entries ordered by
// sha256(seed ":" image_sha ":" path); the first round(ratio * n) go to val,
// the rest to train. Depends only on content, never on listing order.
void AssignSplits(Manifest& m, double val_ratio, uint64_t seed);

}  // namespace kestrel::data
