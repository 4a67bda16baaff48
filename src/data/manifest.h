// Dataset versions: the canonical manifest and its id.
//
// A version is identified by the SHA-256 of its canonical manifest text: the
// class names, then one line per entry sorted by (path, split) with the image
// SHA-256, the normalized label hash, width, height and split. Same content
// anywhere -> same id; any byte of an image or any label value changed -> a
// new id. Label normalization: boxes rounded to 6 decimals, deduplicated and
// sorted, so reordering lines in a label file is not a change.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/dataset.h"

namespace kestrel::data {

struct ManifestEntry {
  std::string path;  // manifest key (Sample::rel_path)
  Split split = Split::kTrain;
  std::string image_sha;   // sha256 of the image file bytes
  std::string label_hash;  // sha256 of CanonicalLabelText(boxes)
  int width = 0;           // oriented (EXIF-applied) size in pixels
  int height = 0;
  std::vector<Box> boxes;  // canonical: rounded, deduplicated, sorted
};

struct Manifest {
  std::vector<std::string> names;
  std::vector<ManifestEntry> entries;  // sorted by (path, split)
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
