// Reading predictions made elsewhere and writing COCO results JSON.
//
// YOLO txt predictions: one file per image, named <image stem>.txt, one line
// per box: `class cx cy w h conf` separated by spaces/tabs; cx, cy, w, h
// normalized to [0, 1] by the ORIGINAL image width/height (which the caller
// supplies per image), conf in [0, 1]. Blank lines are allowed. Boxes come
// back xyxy in original-image pixels.
//
// COCO results JSON: an array of {"image_id": int, "category_id": int,
// "bbox": [x, y, w, h] (original-image pixels, top-left corner + size),
// "score": number}.
//
// Errors are InvalidArgument/NotFound with the file, the 1-based line (txt)
// and the field (txt: "class", "cx", "cy", "w", "h", "conf"; JSON: "[7].bbox")
// of the first problem. On error nothing is returned: no partial results.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "eval/detection.h"

namespace kestrel::eval {

struct ImageSize {
  int width = 0;   // pixels, > 0
  int height = 0;  // pixels, > 0
};

// Parses one YOLO prediction file's text. `origin` names the file in errors.
Result<std::vector<Detection>> ParseYoloPredictions(const std::string& text, const std::string& origin,
                                                    ImageSize size, int num_classes);

// Reads <dir>/<stem>.txt for every stem in `sizes` (a missing file means no
// predictions: an empty vector). Any other *.txt in `dir` whose stem has no
// size is an error (NotFound, naming the file) so nothing is silently skipped.
Result<std::map<std::string, std::vector<Detection>>> ReadYoloPredictionDir(
    Env& env, const std::string& dir, const std::map<std::string, ImageSize>& sizes, int num_classes);

// `category_ids[class_id]` is the COCO category id of each class; empty means
// category_id == class_id. Unknown category ids are errors.
Result<std::map<int64_t, std::vector<Detection>>> ParseCocoResults(const std::string& json_text,
                                                                   const std::string& origin,
                                                                   const std::vector<int>& category_ids,
                                                                   int num_classes);
Result<std::map<int64_t, std::vector<Detection>>> ReadCocoResults(Env& env, const std::string& path,
                                                                  const std::vector<int>& category_ids,
                                                                  int num_classes);

// COCO results JSON text for (image_id, detections in original-image pixels)
// pairs, in the given order; bbox rounded to 3 decimals, score to 5.
std::string CocoResultsJson(const std::vector<std::pair<int64_t, std::vector<Detection>>>& images,
                            const std::vector<int>& category_ids);

struct CocoWriteOptions {
  // Round bbox to 3 decimals and score to 5 (the common validator's files).
  // false: every value exactly (shortest text that reads back to the same
  // double), so ParseCocoResults gives back bit-identical float boxes and
  // scores and re-scoring the file reproduces the metrics exactly.
  bool round = true;
};
std::string CocoResultsJson(const std::vector<std::pair<int64_t, std::vector<Detection>>>& images,
                            const std::vector<int>& category_ids, const CocoWriteOptions& opts);
// Same, written crash-safely with env.WriteFileAtomic.
Status WriteCocoResults(Env& env, const std::string& path,
                        const std::vector<std::pair<int64_t, std::vector<Detection>>>& images,
                        const std::vector<int>& category_ids);

}  // namespace kestrel::eval
