// The in-memory description of a dataset as read from a source folder
// (YOLO, COCO or VOC), before it becomes a version. Torch-free.
//
// Paths: `Sample::rel_path` is the image path relative to the image root of
// its split (e.g. "birds/0001.jpg" for "images/train/birds/0001.jpg"), '/'
// separated, never absolute, never "..". It is the key of the manifest, so it
// must not depend on where the dataset lives or on listing order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::data {

enum class Severity { kError, kWarning, kInfo };
const char* SeverityName(Severity s);  // "error", "warning", "info"

// One validation finding. `check` is a stable machine-readable id
// ("label.syntax", "image.truncated", ...; listed in docs/datasets.md).
struct Finding {
  Severity severity = Severity::kInfo;
  std::string check;
  std::string file;   // path as the user knows it (source path), "" if dataset-wide
  int line = 0;       // 1-based line in a label file, 0 if not applicable
  std::string field;  // e.g. "class", "x_center", "bbox", "file_name"
  std::string message;
  std::string action;  // what import did: "sample excluded", "clipped", "box dropped", ...
};

// A finding with every field given (line 0 = not applicable).
Finding MakeFinding(Severity severity, std::string check, std::string file, int line, std::string field,
                    std::string message, std::string action);
// Short human form of a number in messages ("%g": 0.5, 1e+06).
std::string FormatNumber(double v);

enum class Split { kTrain, kVal, kTest, kUnassigned };
const char* SplitName(Split s);  // "train", "val", "test", "unassigned"
Result<Split> ParseSplit(const std::string& s);

// A box, normalized to the (EXIF-oriented) image: center x/y, width, height
// in [0, 1]; `cls` indexes SourceDataset::names.
struct Box {
  int cls = 0;
  double cx = 0, cy = 0, w = 0, h = 0;
  bool operator==(const Box&) const = default;
};

// A box in pixels of the oriented image, xyxy, for formats that store pixels
// (COCO, VOC) before the importer knows the decoded size.
struct PixelBox {
  int cls = 0;
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  int line = 0;  // source line/ordinal for findings, 0 if unknown
};

struct Sample {
  std::string image_path;  // readable path on disk
  std::string rel_path;    // manifest key, see the file comment
  std::string label_path;  // source of the labels ("" when none)
  Split split = Split::kUnassigned;
  bool has_label = false;  // false: missing label file -> background
  // Exactly one of these is used: normalized boxes (YOLO) or pixel boxes
  // (COCO/VOC) that the importer normalizes with the decoded image size.
  std::vector<Box> boxes;
  std::vector<PixelBox> pixel_boxes;
  bool boxes_in_pixels = false;
  int declared_width = 0;   // from the annotation, 0 if unknown
  int declared_height = 0;
};

struct SourceDataset {
  std::string root;    // folder the dataset was read from
  std::string format;  // "yolo", "coco", "voc"
  std::vector<std::string> names;  // class names, index = class id
  std::vector<Sample> samples;     // sorted by (rel_path, split)
  std::vector<Finding> findings;   // label/structure findings found while reading
  bool has_splits = false;         // the source defined train/val(/test)
};

}  // namespace kestrel::data
