// Validation plots as PNG, drawn with OpenCV (no Python, no OpenCV types in
// this header); text in anti-aliased DejaVu Sans (internal/text_render.h). Render* functions return the
// encoded PNG bytes; WritePlots writes the standard set crash-safely through an Env.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/dataset.h"
#include "data/manifest.h"
#include "eval/confusion.h"
#include "eval/metrics.h"

namespace kestrel::eval {

// The encoding of rendered bytes: PNG, or JPEG at quality 90 (the
// reference's *.jpg files: labels.jpg, the batch grids).
enum class GridFormat { kPng, kJpeg };

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
Result<std::string> RenderConfusionMatrix(const ConfusionMatrix& cm, const std::vector<std::string>& names,
                                          bool normalize);

// One label box normalized to its image: centre and size in [0, 1].
struct LabelBox {
  int class_id = 0;
  float cx = 0, cy = 0, w = 0, h = 0;
};

// What labels.png shows.
struct LabelStats {
  std::vector<std::string> names;  // empty (or short) -> class ids
  std::vector<int64_t> counts;     // labels per class, counts[c]
  std::vector<LabelBox> boxes;     // may be empty: then the class histogram only
  std::string subtitle;            // shown in the header, e.g. "train split: 8 images"
};

// The labels of `split` in `m` (counts for every class of m.names).
LabelStats LabelStatsFromManifest(const data::Manifest& m, data::Split split);

// labels.png, 1400 x 1440: a header line, then a 2x2 grid of instances per
// class (bars, class names under them), the shapes of up to 1000 boxes drawn
// centred (class colour), and 2-D histograms (50 x 50 bins, log-scaled
// colour) of box centres x vs y and of width vs height (normalized, y up).
// Without boxes: 1400 x 740, header and the class histogram only.
// (The reference trainer's labels.jpg shows the same four panels.)
Result<std::string> RenderLabelsPlot(const LabelStats& s, GridFormat format = GridFormat::kPng);

// RenderLabelsPlot of counts only (no geometry).
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
                                        const std::vector<std::string>& names, const GridOptions& opts);

// Writes PR_curve.png, F1_curve.png, P_curve.png, R_curve.png,
// confusion_matrix.png (counts), confusion_matrix_normalized.png and a labels
// plot into `dir` (created), each atomically, as the reference names them.
// The first form (kestrel val) writes labels.png from the label counts of
// `r` (histogram only: an EvalResult keeps no box geometry); the second (a
// training run) writes labels.jpg, the reference trainer's file, from
// `labels` (class histogram, box shapes, centre and size histograms).
Status WritePlots(Env& env, const std::string& dir, const EvalResult& r);
Status WritePlots(Env& env, const std::string& dir, const EvalResult& r, const LabelStats& labels);

}  // namespace kestrel::eval
