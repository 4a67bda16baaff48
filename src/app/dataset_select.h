// `kestrel dataset select pool=DIR model=… strategy=… budget=N` (issue 34,
// "which images to label next"): a model run over a folder of unlabelled
// images, the `budget` images worth labelling first, written as tasks with
// pre-annotations for a labelling tool (app/preannotations.h, the writers
// of `predict format=`) plus the selection list with each image's score and
// why it was chosen. docs/label-audit.md "Which images to label next".
// Torch-free: the detector comes from the caller's loader (app/backends.h
// LoadDetector in the programs).
//
// Strategies (SelectionScores / RankForSelection; ties: pool order):
//   uncertainty  least confident: score 1 - the highest box score of the
//                image (1 when no box reaches conf); highest first.
//   entropy      mean over the image's boxes of the binary entropy (bits)
//                of the box's score: a box carries the winning class's
//                sigmoid score only (eval::Detection), read as "this object
//                is of that class" with probability s; 1 (the maximum) when
//                no box reaches conf; highest first.
//   entropy_sum  the same entropies summed over the image's boxes (0 when
//                no box reaches conf): the image's total uncertainty, so an
//                image with many unsure objects outranks one with a single
//                unsure box (the "sum" aggregation of detection active
//                learning); highest first.
//   margin       margin sampling: 1 - the smallest class margin over the
//                image's boxes, a box's margin being its score minus
//                eval::Detection::runner_up (the best other class at its
//                anchor); 0 when no box reaches conf; highest first.
//   diversity    greedy farthest-point sampling (k-center) on the images'
//                embeddings (embedding=model: the network's pooled
//                features, eval::ImagePrediction::embedding) or 64-bit
//                perceptual hashes (embedding=phash, data/phash.h, the
//                hashes the importer's near-duplicate check uses): the
//                first pick is the pool's medoid (least summed distance),
//                or with labelled= the image farthest from every labelled
//                one; each next one the image farthest from every image
//                picked (or labelled) so far; score = that distance (the
//                medoid: its mean distance).
//   random       each image gets the uniform number SplitMix64(seed, pool
//                index) in [0, 1); the `budget` highest are picked: the same
//                seed and pool give the same picks on every platform.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/detector.h"
#include "app/predict.h"
#include "core/env.h"
#include "core/options.h"
#include "core/status.h"
#include "eval/detection.h"

namespace kestrel::app {

enum class SelectStrategy { kUncertainty, kEntropy, kEntropySum, kMargin, kDiversity, kRandom };
const char* SelectStrategyName(SelectStrategy s);
// kInvalidArgument naming `strategy` for any other text.
Result<SelectStrategy> ParseSelectStrategy(const std::string& name);

// One pool image as the strategies see it.
struct SelectCandidate {
  std::vector<eval::Detection> detections;  // the boxes at or above conf
  uint64_t phash = 0;                       // diversity with embedding=phash
  std::vector<float> embedding;             // diversity with embedding=model (unit length)
};

struct SelectedImage {
  size_t index = 0;    // into the candidates (the pool, in listing order)
  double score = 0;    // the strategy's score when it was picked (see above)
  std::string reason;  // why, in words ("highest box score 0.31")
};

// min(budget, candidates.size()) picks, in pick order (best first).
// kInvalidArgument naming `budget` when budget < 1. Diversity measures
// Euclidean distance between embeddings when every candidate has one (the
// same length), else Hamming bits between phashes; `labelled` (the images
// already labelled, same representation) start as picked: the first pick
// is then the image farthest from all of them instead of the medoid (the
// core-set rule). Other strategies ignore `labelled`.
Result<std::vector<SelectedImage>> RankForSelection(const std::vector<SelectCandidate>& candidates,
                                                    SelectStrategy strategy, size_t budget, uint64_t seed,
                                                    const std::vector<SelectCandidate>& labelled = {});

// The image's highest box score (0 when none) and the mean binary entropy
// of its box scores in bits (1 when none), as uncertainty and entropy use
// them; the sum of those entropies (0 when none), as entropy_sum does.
double MaxBoxScore(const std::vector<eval::Detection>& detections);
double MeanBoxEntropy(const std::vector<eval::Detection>& detections);
double TotalBoxEntropy(const std::vector<eval::Detection>& detections);
// The smallest score - runner_up over the image's boxes (1 when none):
// how close the least decided box came to another class. `at` (optional)
// gets that box's index (the first of equal ones; untouched when none).
double SmallestClassMargin(const std::vector<eval::Detection>& detections, size_t* at = nullptr);

struct SelectKeys {
  std::string pool;   // a folder of images (subfolders included)
  std::string model;  // weights (resolved by the caller's resolver)
  std::string strategy = "uncertainty";
  std::string embedding = "phash";  // diversity: model (pooled network features) or phash
  std::string labelled;             // diversity: a folder of images already labelled ("" = none)
  int budget = 0;                   // required, >= 1
  int64_t seed = 0;
  std::string format = "label-studio";  // label-studio, cvat, yolo or coco (app/preannotations.h)
  double conf = 0.05;                   // boxes the strategies see
  double pre_conf = 0.25;               // boxes written as pre-annotations (>= conf)
  double iou = 0.7;
  int imgsz = 0;  // 0: from the weights (app/imgsz.h)
  int batch = 8;
  int max_det = 300;
  std::string device = "cpu";
  std::string ls_image_root, ls_from_name = "label", ls_to_name = "image";
  std::string project = "runs/detect";
  std::string name;  // default "select"
  std::string out;   // the run folder itself (overrides project/name)
  bool exist_ok = false;
  void Bind(OptionSet& s);
  // Ranges, then: pool and model given, budget >= 1, pre_conf >= conf, the
  // pre-annotation options (ValidatePreannotationOptions). kInvalidArgument
  // naming the key.
  Status Validate() const;
};

struct SelectRow {
  SelectedImage pick;
  std::string image;   // relative to the pool, '/'-separated
  std::string source;  // the path as found
  int width = 0, height = 0;
  size_t boxes = 0;  // at or above conf
  double max_score = 0, mean_entropy = 1;
};

struct SelectReport {
  SelectKeys keys;
  std::string dir;                   // the run folder written
  size_t pool = 0;                   // images predicted
  int imgsz = 0;                     // the network input side in effect
  std::vector<SelectRow> selected;   // pick order
  std::vector<PredictSkip> skipped;  // pool files that could not be read
  std::vector<std::string> files;    // the documents (tasks first), selection.csv, selection.json
};

// Validates, lists the pool (app/predict_source.h: a folder's images,
// subfolders included; a video in it is refused), resolves and loads the
// model, predicts every image (PredictFiles: only per-image JSON kept, under
// <run>/predictions/), ranks, and writes into the run folder (project/name,
// next free "select", "select2", ... or out=; staged and moved in whole): the
// pre-annotation documents of the selected images only, in pick order
// (boxes >= pre_conf), selection.csv (rank, image, score, reason, boxes,
// max_score, mean_entropy) and selection.json (SelectReportJson). Errors name
// their key: kInvalidArgument for the keys and a pool that is not a folder,
// the lister's kNotFound (no image) located at `pool`, the loader's and
// PredictFiles' errors. Nothing is written before the model has loaded and
// nothing is left on failure.
Result<SelectReport> SelectFromPool(Env& env, const SelectKeys& keys, const WeightsResolver& resolve,
                                    const DetectorLoader& load);

nlohmann::json SelectReportJson(const SelectReport& r);
std::string SelectReportCsv(const SelectReport& r);
std::string SelectReportText(const SelectReport& r, size_t top);

}  // namespace kestrel::app
