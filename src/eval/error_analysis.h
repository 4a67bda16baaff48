// TIDE-style error counts per class: why a prediction is a false positive and
// how many labels were never found. Counts, not the dAP weights of TIDE.
//
// Per image, predictions with score > conf are visited in descending score
// order (stable). A prediction is a true positive when an unmatched label of
// its class has IoU >= fg_iou with it (it takes the one with the highest IoU).
// Otherwise it gets exactly one error type, tested in this order:
//   duplicate       right class, IoU >= fg_iou, but that label already matched
//   classification  wrong class, IoU >= fg_iou with some label
//   localization    right class, bg_iou <= IoU < fg_iou
//   both            wrong class, bg_iou <= IoU < fg_iou
//   background      IoU < bg_iou with every label
// "IoU" above is the highest IoU with the labels of the stated kind. False
// positives count under the predicted class. After all predictions, every
// label still unmatched is `missed` under its own class.
// Defaults: conf 0.25, fg_iou 0.5, bg_iou 0.1. Boxes xyxy, original pixels.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "eval/detection.h"

namespace kestrel::eval {

struct ErrorAnalysisOptions {
  double conf = 0.25;   // predictions with score > conf are analysed
  double fg_iou = 0.5;  // IoU that makes a match
  double bg_iou = 0.1;  // below this IoU with every label: background
};

struct ErrorCounts {
  int64_t true_positive = 0;
  int64_t localization = 0;
  int64_t classification = 0;
  int64_t both = 0;
  int64_t duplicate = 0;
  int64_t background = 0;
  int64_t missed = 0;  // false negatives

  int64_t FalsePositives() const { return localization + classification + both + duplicate + background; }
  void Add(const ErrorCounts& o);
};

class ErrorAnalyzer {
 public:
  explicit ErrorAnalyzer(int num_classes = 0, ErrorAnalysisOptions opts = {});

  // REQUIRES: class ids in [0, nc).
  void ProcessImage(const std::vector<GroundTruth>& gt, const std::vector<Detection>& preds);

  const ErrorAnalysisOptions& Options() const { return opts_; }
  // nc entries.
  const std::vector<ErrorCounts>& PerClass() const { return per_class_; }
  ErrorCounts Total() const;
  // {"conf", "fg_iou", "bg_iou", "total": {...}, "per_class": [{...}, ...]}.
  nlohmann::json ToJson() const;

 private:
  ErrorAnalysisOptions opts_;
  std::vector<ErrorCounts> per_class_;
};

nlohmann::json ErrorCountsToJson(const ErrorCounts& c);

}  // namespace kestrel::eval
