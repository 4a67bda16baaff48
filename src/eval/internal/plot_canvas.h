// Private to src/eval (plots.cc): a minimal OpenCV line/bar plot canvas with
// axes, ticks, labels, title and legend. Not for other modules (it exposes
// cv::Mat).
#pragma once

#include <opencv2/core.hpp>
#include <string>
#include <vector>

namespace kestrel::eval::internal {

// A BGR color for class/series i (fixed palette, repeats after 20).
cv::Scalar SeriesColor(size_t i);

// Black text rotated 90 degrees counter-clockwise, its top-left at `org`
// after rotation (reads bottom to top).
void PutTextVertical(cv::Mat& img, const std::string& text, cv::Point org, double scale,
                     const cv::Scalar& color);
// Text size in pixels for the canvas font.
cv::Size TextSize(const std::string& text, double scale, int thickness = 1);
void PutText(cv::Mat& img, const std::string& text, cv::Point org, double scale,
             const cv::Scalar& color, int thickness = 1);
// "%.<digits>f".
std::string Fixed(double v, int digits);

struct LegendEntry {
  std::string label;
  cv::Scalar color;
  int thickness = 2;
};

class Axes {
 public:
  // Plot area inside a `size` canvas with room for labels; data range
  // [x0, x1] x [y0, y1].
  Axes(cv::Size size, double x0, double x1, double y0, double y1);

  // Ticks every `dx` / `dy` with grid lines, tick labels with `digits`.
  void DrawFrame(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                 double dx, double dy, int digits);
  void Line(const std::vector<double>& x, const std::vector<double>& y, const cv::Scalar& color,
            int thickness);
  void Legend(const std::vector<LegendEntry>& entries);

  cv::Mat& Image() { return img_; }
  cv::Point ToPixel(double x, double y) const;
  const cv::Rect& PlotRect() const { return plot_; }

 private:
  cv::Mat img_;
  cv::Rect plot_;
  double x0_, x1_, y0_, y1_;
};

}  // namespace kestrel::eval::internal
