// Dataset readers: YOLO (Ultralytics data.yaml or a bare images/+labels/
// tree), COCO instances JSON and Pascal VOC XML, each producing a
// SourceDataset (data/dataset.h). OpenCV-free; images are not decoded here
// (the importer does that through data/image.h).
//
// Failure model: a hard failure (missing path, malformed YAML/JSON/XML,
// symlink loop, a file_name escaping the root, duplicate COCO image ids, a
// label file over ReadOptions::max_label_bytes, UTF-16/32 JSON or lists, a
// class name that is not UTF-8, no images at all) returns a non-OK Status
// naming file, line and field, and no dataset. Problems with one sample or
// one label line become Findings and reading continues; a sample whose file
// name cannot be a manifest key (not UTF-8, control characters) is left out
// with an error finding and listed in SourceDataset::excluded_paths.
// Findings, class names, Sample::rel_path and Status text from a reader are
// valid UTF-8, so they can be printed as JSON (image_path/label_path keep the
// bytes of the root the user gave).
//
// Finding.file: the YOLO label file, the VOC XML, or for COCO the image path
// of the sample concerned (the JSON path for dataset-wide findings), so a
// finding maps to a sample by Sample::label_path or Sample::image_path.
//
// Determinism: samples are sorted by (rel_path, split) and findings come out
// in that order too, whatever the directory listing order. Folders are
// walked recursively, following symlinks; entries whose name starts with '.'
// are skipped (macOS "._x.jpg" resource forks are not images).
//
// Thread-safety: all functions are reentrant.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/dataset.h"

namespace kestrel::data {

inline constexpr size_t kDefaultMaxBoxesPerImage = 10'000;

struct ReadOptions {
  // "auto" (DetectFormat), "yolo", "coco" or "voc".
  std::string format = "auto";
  // Largest label file (YOLO .txt, COCO .json, VOC .xml, data.yaml) read, in
  // bytes; bigger files are refused before reading.
  uint64_t max_label_bytes = 64 << 20;
  // Largest COCO instances JSON read, in bytes (COCO train2017 is ~450 MB;
  // the parsed document takes several times that in memory).
  uint64_t max_json_bytes = uint64_t{2} << 30;
  // Most boxes one image may have (YOLO lines, COCO annotations, VOC
  // objects). Beyond it the sample gets an error "label.too_many_boxes" and
  // is excluded: every box costs memory up to the manifest, and no real
  // dataset comes near (dense retail shelves: ~700; DOTA tiles: a few 1000).
  size_t max_boxes_per_image = kDefaultMaxBoxesPerImage;
  // Filesystem seam (nullable borrow); nullptr = Env::Default().
  Env* env = nullptr;
};

// Reads a dataset in any supported format. `path` is a folder or a file
// (data.yaml / *.yaml for YOLO, instances_*.json for COCO).
Result<SourceDataset> ReadDataset(const std::string& path, const ReadOptions& opts = {});

// "yolo", "coco" or "voc" from the layout at `path`, or NotFound /
// InvalidArgument saying what was expected.
Result<std::string> DetectFormat(const std::string& path, Env* env = nullptr);

// YOLO label text ("class x_center y_center width height" per line, all
// normalized to [0, 1] of the oriented image) -> boxes, in file order, after
// clipping and de-duplication. Lines with errors are dropped; every problem
// is appended to `findings` (non-null) with `file`, the 1-based line and the
// field. `num_classes` < 0 means unknown (no upper bound on class ids).
// Polygon lines (class x1 y1 x2 y2 ... with >= 3 points) become their
// bounding box. An empty text yields an info "label.empty" finding; UTF-16/32
// text one error "label.encoding" (nothing parsed). More than `max_boxes`
// boxes: an error "label.too_many_boxes" at the first extra one, and the rest
// is not read. Findings go to a FindingList, so a file of millions of bad
// lines costs counts, not memory (messages of findings that are only counted
// are never built).
std::vector<Box> ParseYoloLabels(std::string_view text, const std::string& file, int num_classes,
                                 FindingList* findings, size_t max_boxes = kDefaultMaxBoxesPerImage);
// The same, appending the stored examples (FindingList caps) to a vector.
std::vector<Box> ParseYoloLabels(std::string_view text, const std::string& file, int num_classes,
                                 std::vector<Finding>* findings);

// Findings for ambiguous class names: "class.duplicate_name" (error) when two
// ids share a name, "class.empty_name" (warning) for an empty or blank name.
// `where[i]` names class i in messages ("category id 7"); empty = "names[i]".
void CheckClassNames(const std::vector<std::string>& names, const std::vector<std::string>& where,
                     const std::string& file, FindingList* out);

// COCO instances JSON held in memory. `origin` names the JSON in errors;
// images are expected at JoinPath(image_root, file_name) (not checked here).
// Categories are remapped to 0..K-1 in order of their original ids. Boxes
// come out as PixelBox xyxy in pixels (boxes_in_pixels = true) with
// declared_width/height from the image entries; PixelBox::line is the
// 1-based index of the annotation in the "annotations" array.
Result<SourceDataset> ReadCocoJson(std::string_view json, const std::string& origin,
                                   const std::string& image_root, Split split = Split::kUnassigned);

// The per-format readers behind ReadDataset (same contract).
Result<SourceDataset> ReadYoloDataset(const std::string& path, const ReadOptions& opts);
Result<SourceDataset> ReadCocoDataset(const std::string& path, const ReadOptions& opts);
Result<SourceDataset> ReadVocDataset(const std::string& path, const ReadOptions& opts);

// Regular files under `dir` whose name passes `keep`, recursively, following
// symlinks, as JoinPath(dir, relative) paths in sorted order. A symlink loop
// is an error naming the link; a folder reached twice through different
// links is walked once; at most 64 levels deep. (Loop detection stats the
// real filesystem for device/inode; everything else goes through `env`.)
Result<std::vector<std::string>> ListFilesRecursive(const std::string& dir, Env& env,
                                                    const std::function<bool(std::string_view name)>& keep);

}  // namespace kestrel::data
