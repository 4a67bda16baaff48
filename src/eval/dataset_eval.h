// Evaluating per-image predictions against one split of a dataset version:
// the torch-free glue between the registry (data/manifest.h), the metrics
// (metrics.h) and the outputs users see (per-class table, result record,
// plots). `kestrel val` (both predictions= and model=) and `kestrel compare`
// go through here, so every path scores the same way. docs/evaluation.md.
//
// Boxes: manifest boxes are normalized cx, cy, w, h of the EXIF-oriented
// image; here they become GroundTruth xyxy in pixels of that image (the
// entry's width/height). Predictions must be in the same pixels.
//
// Thread-safety: pure functions; no shared state.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/dataset.h"
#include "data/manifest.h"
#include "eval/detection.h"
#include "eval/metrics.h"
#include "eval/val_shapes.h"

namespace kestrel::eval {

// One image of the evaluated split.
struct SplitImage {
  std::string path;       // manifest key (ManifestEntry::path)
  std::string stem;       // file name without extension: the YOLO txt key
  std::string image_sha;  // artifact-store blob of the image bytes (sha256)
  // data_mode=reference: the image file instead of a blob (read it with
  // data::ReadImageBytes, data/version_files.h).
  data::ReferencedFile file;
  int width = 0;  // oriented pixels
  int height = 0;
  int64_t export_id = 0;  // 1-based position in the split: the image id of `dataset export --format coco`
  std::vector<GroundTruth> labels;  // xyxy, pixels of the oriented image
};

struct EvalSplit {
  std::vector<std::string> names;  // class names, index = class id
  std::string split;               // "val", ...
  std::vector<SplitImage> images;  // manifest order (sorted by path)
  std::string version;             // "NAME@vN" when known (app::LoadSplit), for errors about image files
};

// The entries of `split` with their labels in pixels. FailedPrecondition
// when the split has no images (naming the splits that do exist).
Result<EvalSplit> LoadEvalSplit(const data::Manifest& m, data::Split split);

// COCO image id of a file stem: the integer value of an all-digit stem (at
// most 18 digits), or -1. One rule for reading COCO results and writing them.
int64_t NumericStem(const std::string& stem);

// How COCO results `image_id`s name images of the split:
//   "stem"   the numeric file stem (000000000030.jpg -> 30), as COCO does;
//   "export" EvalSplit::SplitImage::export_id;
//   "auto"   "stem" when every stem of the split is a distinct integer, else "export".
// category_id is class id + 1 (the `dataset export --format coco` ids and the
// common validator's convention for non-COCO datasets).
struct PredictionReadOptions {
  std::string image_ids = "auto";
};

struct SplitPredictions {
  std::string format;     // "yolo_txt" or "coco_json"
  std::string image_ids;  // resolved mapping for coco_json ("stem"/"export"), "" for yolo_txt
  std::vector<std::vector<Detection>> per_image;  // parallel to EvalSplit::images
};

// Reads predictions made elsewhere: a folder of YOLO txt files (one per
// image stem, `class cx cy w h conf` normalized; missing file = no boxes) or
// a COCO results JSON file. Errors (prediction_io.h) name file, line and
// field; NaN/inf coordinates, unknown classes, files for images that are not
// in the split and duplicate stems are errors. Nothing partial is returned.
Result<SplitPredictions> ReadSplitPredictions(Env& env, const std::string& path, const EvalSplit& split,
                                              const PredictionReadOptions& opts = {});

// The split with its labels as the reference validator scores them when the
// images are letterboxed by `shapes` (each label through ValLabelRoundTrip
// with its image's ValGeometry): what a model run with those shapes is
// scored against (`val model=`, `compare`), so the numbers match the
// reference's. REQUIRES: shapes.Validate() is OK.
EvalSplit ValScoredSplit(const EvalSplit& split, const ValShapeOptions& shapes);

// Runs DetectionEvaluator over the split. `per_image` parallel to
// split.images. opts.num_classes and class_names are filled from the split
// when 0/empty; a different non-zero class count is InvalidArgument.
Result<EvalResult> EvaluateSplit(const EvalSplit& split, const std::vector<std::vector<Detection>>& per_image,
                                 EvalOptions opts);

// The validator's table: a header, an "all" row, then one row per class with
// labels: class, images, instances, P, R, mAP50, mAP50-95 (3 decimals as the
// common validator prints; --json has full precision). Then the best-F1
// confidence and the TIDE error counts.
std::string EvalSummaryText(const EvalResult& r);

// Where a result came from, stored with it.
struct EvalProvenance {
  std::string dataset;     // registry name
  std::string version;     // "v3"
  std::string version_id;  // content id of the dataset version
  std::string split;
  std::string source_kind;                          // "predictions" or "model"
  std::string source;                               // the predictions path or weights path
  nlohmann::json extra = nlohmann::json::object();  // e.g. source format, model spec, imgsz
};

// The result record: {"kind": "kestrel.eval_result", "format_version": 1,
// "created_at", "provenance": {...}, "settings": {...}, "metrics":
// <EvalResultToJson> plus "curves": MeanCurvesJson at kRecordCurvePoints
// (absent when the result has no curves, and in records written before it)}.
inline constexpr size_t kRecordCurvePoints = 101;
nlohmann::json EvalRecordJson(const EvalResult& r, const EvalProvenance& p, int64_t created_at);

// "runs/detect" + "val" -> first free of runs/detect/val, runs/detect/val2, ... (the
// common tools' increment). An explicit `name` that exists is reused only
// with exist_ok. Creates nothing.
std::string NextRunDir(Env& env, const std::string& project, const std::string& name,
                       const std::string& default_name, bool exist_ok);

}  // namespace kestrel::eval
