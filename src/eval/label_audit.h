// Label audit: which labels of a dataset are probably wrong, from a model's
// predictions on the same images (`kestrel dataset audit`, docs/datasets.md
// "Label audit"). Every label and every confident prediction that no label
// explains becomes one ranked item with a suspicion score in [0, 1]; the
// kinds are the four ways a box label goes wrong:
//   missing      a confident prediction with no label under it
//   spurious     a label no prediction supports
//   wrong_class  a label whose box the model finds as another class
//   localisation a label the model finds, but at another place or size
// Items are matched per image, class-agnostic: first at IoU >= 0.5 (greedy
// by prediction score; a match whose classes differ is a class question),
// then the leftovers at IoU >= 0.1 (a box moved or resized). Scores, with s
// a prediction's score (only predictions >= conf match or go missing):
//   ok            0.5 (1 - s)(1 - IoU)        at most 0.5, usually near 0
//   wrong_class   s (1 - s_same)              s_same: the best prediction of the
//                                             label's class on the same object
//   localisation  s (1 - IoU / 2)
//   missing       s
//   spurious      1 - sqrt(max s·IoU)         over every prediction, also those
//                                             below conf: a real object the model
//                                             is unsure of still gets a weak box
// The review order is the score, highest first; `ok` items (a label its
// prediction confirms) stay in the list with their low score, so "the top
// 10 %" of the list is a fixed share of everything there is to review.
//
// PlantLabelErrors makes the benchmark's and the tests' corrupted labels
// (removed, added, relabelled, shifted boxes) with a seed.
//
// Torch-free; pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "eval/detection.h"

namespace kestrel::eval {

enum class AuditKind { kOk, kMissing, kSpurious, kWrongClass, kLocalisation };
// "ok", "missing", "spurious", "wrong_class", "localisation".
const char* AuditKindName(AuditKind kind);

struct AuditOptions {
  // Predictions below this score are ignored (they neither support a label
  // nor count as a missing box).
  double conf = 0.25;
  double match_iou = 0.5;  // a label and a prediction are the same object
  double loose_iou = 0.1;  // ... or the same object misplaced
};

// One reviewable item of one image.
struct AuditItem {
  size_t image = 0;  // index into the audited image list
  AuditKind kind = AuditKind::kOk;
  double score = 0;            // suspicion in [0, 1]; the review order
  int label = -1;              // index into the image's labels; -1 for missing
  int prediction = -1;         // index into the image's predictions; -1 when none
  int label_class = -1;        // the label's class (-1 for missing)
  int predicted_class = -1;    // the prediction's class (-1 when none)
  double predicted_score = 0;  // the prediction's score
  double iou = 0;              // between the label and the prediction (0 when either is absent)
  Box label_box, predicted_box;
};

// Every item of every image, sorted by score (highest first; ties by image,
// then label, then prediction). `labels[i]` and `predictions[i]` are image
// i's, in the same pixels.
std::vector<AuditItem> AuditLabels(const std::vector<std::vector<GroundTruth>>& labels,
                                   const std::vector<std::vector<Detection>>& predictions,
                                   const AuditOptions& options = {});

// Planted label errors for benchmarks and tests: of every image's labels,
// a share `rate` of all boxes (rounded, at least one per kind when rate > 0
// and there are boxes) is removed, the same number relabelled to another of
// `num_classes` classes, the same number shifted by 30-50 % of their size
// (IoU with the truth ~0.2-0.45), and the same number of new boxes added at
// random places of images. Deterministic for a seed.
struct PlantedError {
  size_t image = 0;
  AuditKind kind = AuditKind::kOk;  // the kind the audit should report
  Box box;                          // the corrupted label (missing: the removed truth)
  Box truth;                        // the label before (spurious: the added box)
};
struct PlantedLabels {
  std::vector<std::vector<GroundTruth>> labels;  // the corrupted labels
  std::vector<PlantedError> errors;
};
PlantedLabels PlantLabelErrors(const std::vector<std::vector<GroundTruth>>& truth,
                               const std::vector<std::pair<int, int>>& image_sizes,  // width, height
                               int num_classes, double rate, uint64_t seed);

// Recall of the planted errors in the top `share` of `items`: an error is
// found when an item of its image and kind overlaps its box at IoU >= 0.5.
struct AuditRecall {
  double share = 0;
  size_t reviewed = 0;
  size_t found = 0;
  size_t planted = 0;
  double recall = 0;
  // Per kind: found, planted.
  std::vector<std::pair<size_t, size_t>> per_kind;  // index = AuditKind
};
AuditRecall RecallAt(const std::vector<AuditItem>& items, const std::vector<PlantedError>& errors,
                     double share);

nlohmann::json AuditItemJson(const AuditItem& item);

}  // namespace kestrel::eval
