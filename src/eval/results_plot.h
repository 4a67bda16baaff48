// results.png: the per-epoch training curves of a run (losses and metrics),
// one panel per series with the recorded values and a smoothed line. Drawn
// with OpenCV (no OpenCV types here); the trainer fills the table from its
// epoch history (train/results_png.h). docs/training.md shows the layout.
//
// Thread-safe (no shared state).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::eval {

struct ResultsSeries {
  std::string title;           // panel title, e.g. "train/box_loss"
  std::string ylabel;          // y axis label, e.g. "loss"
  std::vector<double> values;  // one per ResultsTable::epochs entry; non-finite = not recorded
  std::string missing;         // non-empty: no data for this series; the panel shows this text
};

struct ResultsTable {
  std::vector<int> epochs;            // 1-based, ascending; x of every series
  std::vector<ResultsSeries> series;  // panels in row-major order
  int columns = 5;                    // panels per row, >= 1
};

// Pixel size of one panel and of the legend line above the grid.
inline constexpr int kResultsPanelWidth = 440;
inline constexpr int kResultsPanelHeight = 330;
inline constexpr int kResultsHeaderHeight = 40;

// PNG of columns * kResultsPanelWidth x (kResultsHeaderHeight + rows *
// kResultsPanelHeight), rows = ceil(series / columns). Each panel: the values
// as a line with a dot per epoch, the GaussianSmooth line (dotted, sigma
// ResultsSmoothingSigma(epochs)), epoch ticks, y ticks over the data range.
// Errors: InvalidArgument for columns < 1 or a series whose length differs
// from `epochs`; Internal when OpenCV fails.
Result<std::string> RenderResultsPlot(const ResultsTable& t);

// Gaussian smoothing (kernel radius 4 sigma, edges mirrored as in scipy's
// gaussian_filter1d mode "reflect"). Non-finite values are skipped (weights
// renormalized); a point whose whole window is non-finite stays non-finite.
// sigma <= 0 returns the input.
std::vector<double> GaussianSmooth(const std::vector<double>& y, double sigma);

// The sigma results.png uses for `epochs` points: clamp(epochs / 10, 1, 3)
// epochs (Ultralytics always uses 3, which flattens short runs); 0 (no
// smoothing) below 3 epochs.
double ResultsSmoothingSigma(size_t epochs);

}  // namespace kestrel::eval
