// Validation plots as PNG, drawn with OpenCV (no Python, no OpenCV types in
// this header). Render* functions return the encoded PNG bytes; WritePlots
// writes the standard set crash-safely through an Env.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "eval/confusion.h"
#include "eval/metrics.h"

namespace kestrel::eval {

// Precision vs recall at IoU 0.5 per class (legend with AP50 when there are
// at most 20 classes, thin gray lines otherwise) and the mean over classes
// (thick, legend "all classes <mAP50> mAP@0.5").
Result<std::string> RenderPrCurve(const EvalResult& r);

enum class ConfidenceCurve { kF1, kPrecision, kRecall };
// F1 / precision / recall vs confidence per class and the mean (legend: the
// mean's maximum and the confidence where it is reached).
Result<std::string> RenderConfidenceCurve(const EvalResult& r, ConfidenceCurve which);

// (nc+1) x (nc+1) matrix, columns = true class, rows = predicted class, last
// = background. `normalize`: each column divided by its sum. Cell values are
// printed when nc <= 30. `names` empty -> class ids.
Result<std::string> RenderConfusionMatrix(const ConfusionMatrix& cm,
                                          const std::vector<std::string>& names, bool normalize);

// Bar chart of label counts per class (`counts[c]`), names under the bars.
Result<std::string> RenderLabelHistogram(const std::vector<int64_t>& counts,
                                         const std::vector<std::string>& names);

// A borrowed 8-bit image: 1 (gray) or 3 (BGR) channels, `stride` bytes per
// row. Must stay alive during the call.
struct ImageView {
  const uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  int channels = 3;
  size_t stride = 0;
};

struct GridTile {
  ImageView image;
  std::vector<Detection> predictions;  // xyxy pixels of `image`
  std::vector<GroundTruth> labels;     // xyxy pixels of `image`, drawn thin white-outlined
  std::string title;                   // e.g. the file name
};

enum class GridFormat { kPng, kJpeg };

struct GridOptions {
  int columns = 4;          // tiles per row, >= 1
  int tile_size = 320;      // each tile is letterboxed into tile_size^2 pixels, >= 32
  float min_score = 0.25f;  // predictions with a lower score are not drawn
  // Labels drawn in their class colour with the class name (a ground-truth
  // grid such as val_batch0_labels.jpg) instead of thin white outlines.
  bool label_names = false;
  GridFormat format = GridFormat::kPng;  // encoding of the returned bytes (JPEG quality 90)
};

// Images in a grid with predicted boxes (class color, "name 0.87") and labels.
Result<std::string> RenderDetectionGrid(const std::vector<GridTile>& tiles,
                                        const std::vector<std::string>& names,
                                        const GridOptions& opts);

// Writes PR_curve.png, F1_curve.png, P_curve.png, R_curve.png,
// confusion_matrix_normalized.png and labels.png into `dir` (created).
Status WritePlots(Env& env, const std::string& dir, const EvalResult& r);

}  // namespace kestrel::eval
