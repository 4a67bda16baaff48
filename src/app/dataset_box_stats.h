// Box statistics of a dataset version, as the reference framework's
// labels.jpg draws them (issue 33 finding 8): where box centres fall, how
// wide and tall boxes are, their aspect ratios, boxes per image and per
// class. Computed from the version's manifest when asked (GET
// /api/datasets/{name} "box_stats", docs/server.md), so every stored version
// has them without a migration; one pass over the boxes.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "data/manifest.h"

namespace kestrel::app {

// Equal bins over [0, 1] per axis for the densities and the width/height
// histograms; a value of exactly 1 falls in the last bin.
inline constexpr int kBoxStatsBins = 20;
// Aspect ratio bins: log2(w/h) from -kBoxAspectLog2Max to +kBoxAspectLog2Max
// in steps of 1/kBoxAspectStepsPerOctave; ratios past either end are counted
// in the end bins.
inline constexpr int kBoxAspectLog2Max = 3;
inline constexpr int kBoxAspectStepsPerOctave = 2;
// boxes_per_image counts images with exactly n boxes up to this n; the last
// bin holds the images with more.
inline constexpr int kBoxesPerImageMaxBin = 50;

struct ClassBoxStats {
  int64_t boxes = 0;
  int64_t images = 0;  // images with at least one box of the class
  double mean_w = 0;   // mean box width, normalized to the image
  double mean_h = 0;   // mean box height, normalized to the image
};

struct BoxStats {
  int64_t images = 0;
  int64_t boxes = 0;
  // [kBoxStatsBins][kBoxStatsBins] counts: row = the y bin, column = the x
  // bin. center: box centres (cy, cx), normalized image coordinates (y down);
  // size: box sizes (h, w), normalized to the image.
  std::vector<std::vector<int64_t>> center;
  std::vector<std::vector<int64_t>> size;
  std::vector<int64_t> width;   // [kBoxStatsBins] normalized box widths
  std::vector<int64_t> height;  // [kBoxStatsBins] normalized box heights
  // Aspect ratio width/height in pixels (of the oriented image; normalized
  // when the image size is unknown). [2 * kBoxAspectLog2Max *
  // kBoxAspectStepsPerOctave] bins; boxes of zero width or height are in
  // degenerate instead.
  std::vector<int64_t> aspect;
  int64_t degenerate = 0;
  // [n] images with exactly n boxes, n = 0..kBoxesPerImageMaxBin (the last:
  // that many or more), trimmed after the largest n present.
  std::vector<int64_t> boxes_per_image;
  int64_t max_boxes_per_image = 0;
  std::vector<ClassBoxStats> classes;  // indexed by class id (manifest names)
  int64_t unnamed_class_boxes = 0;     // boxes whose class id has no name
};

BoxStats ComputeBoxStats(const data::Manifest& m);

// {"images", "boxes", "bins", "center", "size", "width", "height",
//  "aspect": {"edges", "counts"}, "degenerate", "boxes_per_image": {"counts",
//  "last_open", "max", "mean"}, "classes": [{"id", "name", "boxes", "images",
//  "mean_w", "mean_h"}], "unnamed_class_boxes"} (docs/server.md).
nlohmann::json BoxStatsJson(const BoxStats& s, const std::vector<std::string>& names);

}  // namespace kestrel::app
