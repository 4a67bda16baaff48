// The box-level diff of two dataset versions (issue 34): which boxes a
// correction added, removed, moved or relabelled, per class and per image.
// `kestrel dataset diff --json` "boxes" and GET /api/datasets/NAME/diff
// carry it (app::DatasetDiffJson). Torch-free, a function of its inputs.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/manifest.h"

namespace kestrel::data {

// Boxes are matched per image (the same "<split>/<path>" in both versions)
// greedily by IoU, highest first, across classes, when the IoU is at least
// kBoxMatchIoU. A matched pair is `moved` when its IoU is below
// kBoxMovedIoU and `relabelled` when its class names differ (it can be
// both); otherwise `unchanged`. Unmatched boxes of B are `added`, of A
// `removed`, as are all boxes of an image only one version has.
inline constexpr double kBoxMatchIoU = 0.1;
inline constexpr double kBoxMovedIoU = 0.5;

struct BoxDiffCounts {
  int64_t added = 0, removed = 0, moved = 0, relabelled = 0, unchanged = 0;
  bool Changed() const { return added + removed + moved + relabelled > 0; }
  nlohmann::json ToJson() const;  // {"added", "removed", "moved", "relabelled", "unchanged"}
};

struct BoxDiff {
  BoxDiffCounts total;
  // By class name: added, moved, relabelled and unchanged boxes count under
  // their class in B, removed ones under their class in A.
  std::map<std::string, BoxDiffCounts> by_class;
  struct Image {
    std::string key;  // "<split>/<path>"
    BoxDiffCounts counts;
  };
  std::vector<Image> images;  // those with a change, by key
  // ToJson: {"total", "classes": [{"name", ...counts}], "images": [{"key",
  // ...counts}] (the first `max_images`), "images_changed" (all)}.
  nlohmann::json ToJson(size_t max_images = 1000) const;
};

BoxDiff DiffBoxes(const Manifest& a, const Manifest& b);

// IoU of two normalized centre boxes.
double BoxIoU(const Box& a, const Box& b);

}  // namespace kestrel::data
