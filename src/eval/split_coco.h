// COCO interop for one evaluated split (`kestrel val save_json=true
// coco_metrics=true`): the COCO image ids of its images, a COCO results JSON
// of per-image predictions, and the COCO-style metrics (coco_eval.h) over it.
// docs/evaluation.md.
//
// Boxes: xyxy pixels of the original (EXIF-oriented) image, as EvalSplit.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/coco_eval.h"
#include "eval/dataset_eval.h"
#include "eval/detection.h"

namespace kestrel::eval {

// The image ids of the split under PredictionReadOptions::image_ids:
// "stem" (numeric file stem), "export" (1-based position) or "auto" ("stem"
// when every stem is a distinct integer, else "export") — the resolution
// ReadSplitPredictions applies, so a file written with these ids reads back
// onto the same images.
struct SplitImageIds {
  std::string mode;          // resolved: "stem" or "export"
  std::vector<int64_t> ids;  // parallel to split.images
};
// InvalidArgument (field "image_ids") for an unknown mode, or "stem" when the
// stems are not distinct integers.
Result<SplitImageIds> ResolveSplitImageIds(const EvalSplit& split, const std::string& mode);

// COCO results JSON (prediction_io.h format, category_id = class id + 1) of
// `per_image` (parallel to split.images), every value exact so that reading
// it back with ReadSplitPredictions(image_ids = ids.mode) gives the same
// detections bit for bit.
struct SplitCocoJson {
  std::string text;
  std::string image_ids;  // resolved mode
  int64_t detections = 0;
};
Result<SplitCocoJson> SplitPredictionsCocoJson(const EvalSplit& split,
                                               const std::vector<std::vector<Detection>>& per_image,
                                               const std::string& image_ids_mode);

// CocoEvaluator over the split: every prediction of `per_image` (COCO keeps
// the 100 best per image and category itself), the split's labels. Internal
// error when per_image is not parallel to split.images; InvalidArgument
// (naming the image) on class ids outside the split's classes.
Result<CocoMetrics> CocoEvaluateSplit(const EvalSplit& split,
                                      const std::vector<std::vector<Detection>>& per_image);

}  // namespace kestrel::eval
