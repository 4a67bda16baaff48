// Detection confusion matrix, same convention as the common YOLO validator:
// matrix[pred][gt] with (nc + 1) x (nc + 1) cells, index nc = background.
//   matrix[p][g]   a prediction of class p matched a label of class g
//   matrix[nc][g]  a label of class g that no prediction matched (missed)
//   matrix[p][nc]  a prediction of class p that matched no label (background FP)
// Matching per image is class-agnostic: predictions with score > conf; pairs
// (label, prediction) with IoU > iou, sorted by IoU descending; each
// prediction keeps its best pair, then each label keeps its best remaining
// pair (highest IoU; ties: first in label-major order). Boxes are xyxy
// pixels of the original image.
//
// Not thread-safe (one accumulator per thread, then Merge).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/detection.h"

namespace kestrel::eval {

// Where one label and/or prediction of an image lands: cell [row][col] =
// [predicted class or nc][label class or nc].
struct ConfusionMatch {
  int gt = -1;    // index into the image's labels, -1: a background prediction
  int pred = -1;  // index into the image's predictions, -1: a missed label
  int row = 0;    // predicted class, nc for a missed label
  int col = 0;    // label class, nc for a background prediction
};

class ConfusionMatrix {
 public:
  // REQUIRES: num_classes >= 0.
  explicit ConfusionMatrix(int num_classes = 0, double conf = 0.25, double iou = 0.45);

  // REQUIRES: class ids in [0, nc) (DetectionEvaluator validates first).
  void ProcessImage(const std::vector<GroundTruth>& gt, const std::vector<Detection>& preds);
  // What ProcessImage counts for one image, one entry per count: labels in
  // order (matched or missed), then the unmatched predictions above conf.
  std::vector<ConfusionMatch> MatchImage(const std::vector<GroundTruth>& gt,
                                         const std::vector<Detection>& preds) const;
  // The inverse of ToJson; kCorruption (field "confusion") when `j` is not
  // that shape.
  static Result<ConfusionMatrix> FromJson(const nlohmann::json& j);
  // Adds another matrix with the same shape.
  void Merge(const ConfusionMatrix& other);

  int NumClasses() const { return nc_; }
  double Conf() const { return conf_; }
  double Iou() const { return iou_; }
  int64_t At(int pred, int gt) const { return m_[size_t(pred) * size_t(nc_ + 1) + size_t(gt)]; }
  // Row-major [(nc+1) x (nc+1)], cell [pred][gt].
  const std::vector<int64_t>& Counts() const { return m_; }
  // Each column (gt class) divided by its sum (all-zero columns stay 0).
  std::vector<double> ColumnNormalized() const;
  // Per class (nc entries): true positives m[c][c], false positives (row sum
  // without the diagonal), false negatives (column sum without the diagonal).
  void TpFpFn(std::vector<int64_t>* tp, std::vector<int64_t>* fp, std::vector<int64_t>* fn) const;

  // {"conf", "iou", "nc", "matrix": [[...], ...]} with matrix[pred][gt].
  nlohmann::json ToJson() const;

 private:
  int nc_;
  double conf_;
  double iou_;
  std::vector<int64_t> m_;
};

}  // namespace kestrel::eval
