// Detection metrics exactly as the reference YOLO validator computes them
// (mAP50, mAP50-95, P, R at the max of the smoothed mean F1, fitness), plus
// the confusion matrix and TIDE-style error counts. docs/metrics.md states
// every convention; the short version:
//   - IoU in pixels of the original image (boxes xyxy, see box.h).
//   - Per image and IoU threshold t in {0.50, 0.55, ..., 0.95}: pairs of the
//     same class with IoU >= t; each prediction keeps its highest-IoU label
//     (ties: lowest label index); each label keeps the prediction with the
//     LOWEST index in the image's list sorted by descending score.
//   - AP: 101-point linear interpolation + trapezoid (perfect = 0.995).
//   - P/R: per class at the argmax of the mean F1 over 1000 confidences,
//     smoothed by a 101-sample box filter.
//   - Means over classes that have ground truth only.
//
// Usage: one DetectionEvaluator per validation run, AddImage per image,
// Finalize at the end (may be called again after more AddImage).
// Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/confusion.h"
#include "eval/detection.h"
#include "eval/error_analysis.h"

namespace kestrel::eval {

inline constexpr int kNumIouThresholds = 10;
// 0.50, 0.55, ..., 0.95.
extern const std::array<double, kNumIouThresholds> kIouThresholds;

struct EvalOptions {
  int num_classes = 0;                   // required, >= 1
  std::vector<std::string> class_names;  // empty or num_classes names
  // Applied to each image's predictions before matching (the validator's NMS
  // settings; predictions from elsewhere are held to them too): keep score >
  // conf, then the max_det highest scores. `iou` is the NMS IoU, recorded only.
  double conf = 0.001;
  double iou = 0.7;
  int max_det = 300;
  double confusion_conf = 0.25;  // ConfusionMatrix conf (score > this)
  double confusion_iou = 0.45;   // ConfusionMatrix IoU (IoU > this)
  ErrorAnalysisOptions errors;   // TIDE-style counts
  Status Validate() const;
};

struct ClassMetrics {
  int class_id = 0;
  std::string name;
  int64_t images = 0;       // images with at least one label of this class
  int64_t instances = 0;    // labels of this class
  int64_t predictions = 0;  // predictions of this class that were matched/scored
  double precision = 0;     // at the F1-optimal confidence
  double recall = 0;
  double f1 = 0;
  double ap50 = 0;
  double ap5095 = 0;
  std::array<double, kNumIouThresholds> ap{};  // AP per IoU threshold
};

// Curves over confidence (1000 samples) and the PR curve at IoU 0.5, one row
// per class in EvalResult::classes order.
struct EvalCurves {
  std::vector<double> x;                       // 1000 values 0..1
  std::vector<std::vector<double>> precision;  // vs confidence x
  std::vector<std::vector<double>> recall;     // vs confidence x
  std::vector<std::vector<double>> f1;         // vs confidence x
  std::vector<std::vector<double>> pr;         // precision at recall x (envelope)
};

struct EvalResult {
  EvalOptions settings;
  int64_t images = 0;
  int64_t instances = 0;
  int64_t predictions = 0;          // after the conf/max_det filter
  int64_t predictions_dropped = 0;  // removed by the conf/max_det filter
  double precision = 0;             // mean over classes with labels
  double recall = 0;
  double map50 = 0;
  double map5095 = 0;
  double fitness = 0;                 // 0.1 * map50 + 0.9 * map5095
  double best_conf = 0;               // confidence at the max of the smoothed mean F1
  double best_f1 = 0;                 // smoothed mean F1 there
  std::vector<ClassMetrics> classes;  // classes with labels, ascending id
  EvalCurves curves;
  ConfusionMatrix confusion;
  std::vector<int64_t> label_counts;  // labels per class, nc entries
  ErrorAnalyzer errors;
};

// Everything but the curves (set with_curves to include them).
nlohmann::json EvalResultToJson(const EvalResult& r, bool with_curves = false);

// The inverse of EvalResultToJson (without curves) for what it stores:
// settings, counts, overall and per-class metrics, label counts and the
// confusion matrix; curves stay empty and the error counts zero (a stored
// record keeps those as JSON). kCorruption naming the field when `metrics`
// is not that shape.
Result<EvalResult> EvalResultFromJson(const nlohmann::json& metrics);

// The element-wise mean of per-class curves (`rows`, each at least `n`
// points; shorter rows count as 0 past their end); n zeros for no rows.
std::vector<double> MeanOverClasses(const std::vector<std::vector<double>>& rows, size_t n);

// The mean curves over classes at IoU 0.5 that the plots draw (plots.h):
// precision, recall and F1 vs confidence as the mean of the classes' curves
// smoothed by a 5% box filter (SmoothBox), and the mean PR envelope.
struct MeanCurves {
  std::vector<double> confidence;  // x of precision/recall/f1
  std::vector<double> precision, recall, f1;
  std::vector<double> pr_recall;  // x of pr_precision
  std::vector<double> pr_precision;
};
inline constexpr double kMeanCurveSmoothing = 0.05;
// points 0: at the result's own samples (EvalCurves::x, 1000 points); else
// linearly interpolated at `points` evenly spaced values 0..1 (101: 0, 0.01,
// ..., 1). All empty when the result has no curves.
MeanCurves MeanCurvesOf(const EvalResult& r, size_t points = 0);
// {"confidence", "precision", "recall", "f1", "pr": {"recall", "precision"}}.
nlohmann::json MeanCurvesJson(const MeanCurves& c);

// The predictions DetectionEvaluator::AddImage scores for one image (and
// hands to the confusion matrix and the error counts): by descending score
// (stable), score > conf, at most max_det of them.
std::vector<Detection> ScoredPredictions(const std::vector<Detection>& preds, double conf, int max_det);

// Per-prediction match result for one image: bit t of tp[i] is set when
// prediction i (index into `preds`, which must already be in the order that
// defines "lowest index") is a true positive at kIouThresholds[t].
// Exposed for tests and for callers that score images themselves.
std::vector<uint16_t> MatchPredictions(const std::vector<GroundTruth>& gt,
                                       const std::vector<Detection>& preds);

class DetectionEvaluator {
 public:
  explicit DetectionEvaluator(EvalOptions opts);
  ~DetectionEvaluator();
  DetectionEvaluator(DetectionEvaluator&&) noexcept;
  DetectionEvaluator& operator=(DetectionEvaluator&&) noexcept;

  // Validation of the options given to the constructor.
  Status OptionsStatus() const;

  // One image: labels and predictions, both xyxy in original-image pixels.
  // Predictions in any order: sorted here by descending score (stable, so
  // equal scores keep their input order). Fails with InvalidArgument naming
  // the field ("predictions[3].class_id") on class ids outside [0, nc) or
  // non-finite values; a failed call changes nothing.
  Status AddImage(const std::vector<GroundTruth>& gt, const std::vector<Detection>& preds);

  Result<EvalResult> Finalize() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace kestrel::eval
