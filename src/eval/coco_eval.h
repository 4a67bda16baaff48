// COCO-style bbox evaluation with the conventions of pycocotools' COCOeval
// (iouType "bbox", useCats 1), torch- and Python-free:
//   - IoU thresholds 0.50:0.05:0.95; recall thresholds 0:0.01:1 (101);
//   - area ranges all [0, 1e10], small [0, 32^2], medium [32^2, 96^2],
//     large [96^2, 1e10] (bounds inclusive on both sides); maxDets 1, 10, 100
//     per image AND category;
//   - per image and category: detections sorted by score (stable), at most
//     100; labels outside the area range are "ignored" and tried last; a
//     detection matches the unmatched label with the highest IoU >= t
//     (ties: the later label), preferring non-ignored labels; unmatched
//     detections outside the area range are ignored;
//   - precision made monotone from the right, then for each recall threshold
//     the precision at the first point whose recall >= it (0 past the end):
//     a step function, not the linear-interpolation AP of metrics.h;
//   - AP/AR averaged over categories that have labels (in the area range).
// Differences from COCO: area is the box area (w * h in original-image pixels;
// COCO uses the segment area) and there are no crowd labels.
//
// Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/detection.h"

namespace kestrel::eval {

struct CocoMetrics {
  // Same 12 numbers and order as COCOeval.summarize() for bbox:
  // AP, AP50, AP75, AP_small, AP_medium, AP_large,
  // AR_1, AR_10, AR_100, AR_small, AR_medium, AR_large.
  // -1 where no category has labels in that area range (as COCO prints).
  std::array<double, 12> stats{};
  // AP (IoU 0.50:0.95, area all, maxDets 100) per class, -1 for classes
  // without labels. nc entries.
  std::vector<double> per_class_ap;

  double Ap() const { return stats[0]; }
  double Ap50() const { return stats[1]; }
  double Ap75() const { return stats[2]; }
};

// {"AP": .., "AP50": .., ..., "AR_large": .., "per_class_ap": [...]}.
nlohmann::json CocoMetricsToJson(const CocoMetrics& m);
// The 12 lines COCOeval prints, e.g. " Average Precision  (AP) @[ IoU=0.50:0.95 | ..."
std::string CocoSummaryText(const CocoMetrics& m);

class CocoEvaluator {
 public:
  // REQUIRES: num_classes >= 1.
  explicit CocoEvaluator(int num_classes);
  ~CocoEvaluator();
  CocoEvaluator(CocoEvaluator&&) noexcept;
  CocoEvaluator& operator=(CocoEvaluator&&) noexcept;

  // Boxes xyxy, original-image pixels; predictions in any order. Fails
  // (changing nothing) on class ids outside [0, nc) or non-finite values.
  Status AddImage(const std::vector<GroundTruth>& gt, const std::vector<Detection>& preds);

  CocoMetrics Evaluate() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kestrel::eval
