// Private to src/eval (plots.cc, compare_plots.cc, results_plot.cc,
// labels_plot.cc): a minimal OpenCV line/bar plot canvas with axes, ticks,
// labels, title and legend. Text goes through data/text_render.h. Not for other
// modules (it exposes cv::Mat).
#pragma once

#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "data/text_render.h"

namespace kestrel::eval {

// The shared renderer's names, as the canvas and every plot file of src/eval
// use them unqualified.
using data::FontWeight;
using data::HAlign;
using data::LineHeight;
using data::PutText;
using data::PutTextVertical;
using data::TextSize;
using data::VAlign;

}  // namespace kestrel::eval

namespace kestrel::eval::internal {

// Text sizes in pixels shared by the plots (text_render.h `px`).
inline constexpr double kTitlePx = 20;       // canvas titles (bold)
inline constexpr double kPanelTitlePx = 16;  // panel titles (bold)
inline constexpr double kLabelPx = 16;       // axis labels
inline constexpr double kTickPx = 13;        // tick labels, legends

// PNG bytes of `img` (8-bit BGR).
Result<std::string> EncodePng(const cv::Mat& img);

// JPEG bytes of `img` (8-bit BGR), quality 90.
Result<std::string> EncodeJpeg(const cv::Mat& img);

// Runs `draw` (returning a cv::Mat) and encodes the image as JPEG or PNG;
// OpenCV failures become Status::Internal.
template <typename F>
Result<std::string> RenderImage(bool jpeg, F&& draw) {
  try {
    cv::Mat img = draw();
    return jpeg ? EncodeJpeg(img) : EncodePng(img);
  } catch (const cv::Exception& e) {
    return Status::Internal(std::string("OpenCV: ") + e.what());
  }
}

// Runs `draw` (returning a cv::Mat) and encodes the image as PNG; OpenCV
// reports failures by exception, they become Status::Internal here.
template <typename F>
Result<std::string> RenderPng(F&& draw) {
  try {
    return EncodePng(draw());
  } catch (const cv::Exception& e) {
    return Status::Internal(std::string("OpenCV: ") + e.what());
  }
}

// A BGR color for class/series i (fixed palette, repeats after 20).
cv::Scalar SeriesColor(size_t i);

// "%.<digits>f".
std::string Fixed(double v, int digits);

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about
// `target` ticks over `range` (> 0).
double NiceStep(double range, int target);

// Tick label for value `v` on an axis with step `step`: as many decimals as
// the step needs (0.05 -> 2), no "-0".
std::string TickLabel(double v, double step);

// The range [lo, hi] of the finite values in `ys` (all vectors), padded by
// `pad` of its span on each side; a flat or empty range becomes a unit-wide
// one around its value. Returns false when nothing is finite.
bool DataRange(const std::vector<const std::vector<double>*>& ys, double pad, double* lo, double* hi);

struct LegendEntry {
  std::string label;
  cv::Scalar color;
  int thickness = 2;
  bool dotted = false;  // drawn as dots (a smoothed series)
};

struct Margins {
  int left = 80, right = 30, top = 50, bottom = 70;
};

class Axes {
 public:
  // Plot area inside a `size` canvas with `margins` for labels; data range
  // [x0, x1] x [y0, y1] (x1 > x0, y1 > y0).
  Axes(cv::Size size, double x0, double x1, double y0, double y1, Margins margins = {});

  // Ticks every `dx` / `dy` (<= 0: none on that axis) with grid lines, tick
  // labels with `digits` (digits < 0: TickLabel). Title centred above the
  // plot area, bold. Empty labels are not drawn.
  void DrawFrame(const std::string& title, const std::string& xlabel, const std::string& ylabel, double dx,
                 double dy, int digits, double title_px = kTitlePx);
  // Polyline through the points with finite y (clamped to the y range); a
  // non-finite y breaks the line.
  void Line(const std::vector<double>& x, const std::vector<double>& y, const cv::Scalar& color,
            int thickness);
  // Same, drawn as dots every ~6 pixels along the curve.
  void DottedLine(const std::vector<double>& x, const std::vector<double>& y, const cv::Scalar& color,
                  int radius);
  // A filled circle per finite point.
  void Markers(const std::vector<double>& x, const std::vector<double>& y, const cv::Scalar& color,
               int radius);
  // Box in the top-right corner of the plot area (bottom-right when
  // `bottom`), one row per entry.
  void Legend(const std::vector<LegendEntry>& entries, bool bottom = false);
  // Text centred in the plot area (e.g. "no data").
  void Message(const std::string& text);

  cv::Mat& Image() { return img_; }
  cv::Point ToPixel(double x, double y) const;
  const cv::Rect& PlotRect() const { return plot_; }

 private:
  cv::Mat img_;
  cv::Rect plot_;
  double x0_, x1_, y0_, y1_;
};

}  // namespace kestrel::eval::internal
