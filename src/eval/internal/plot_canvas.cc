#include "eval/internal/plot_canvas.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <opencv2/imgproc.hpp>

namespace kestrel::eval::internal {

namespace {
constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;
const cv::Scalar kBlack(0, 0, 0);
const cv::Scalar kGrid(225, 225, 225);
}  // namespace

cv::Scalar SeriesColor(size_t i) {
  // A qualitative palette (RGB hex), stored as BGR.
  static const unsigned kHex[20] = {0xFF3838, 0xFF9D97, 0xFF701F, 0xFFB21D, 0xCFD231,
                                    0x48F90A, 0x92CC17, 0x3DDB86, 0x1A9334, 0x00D4BB,
                                    0x2C99A8, 0x00C2FF, 0x344593, 0x6473FF, 0x0018EC,
                                    0x8438FF, 0x520085, 0xCB38FF, 0xFF95C8, 0xFF37C7};
  const unsigned h = kHex[i % 20];
  return cv::Scalar(h & 0xFF, (h >> 8) & 0xFF, (h >> 16) & 0xFF);
}

cv::Size TextSize(const std::string& text, double scale, int thickness) {
  int base = 0;
  cv::Size s = cv::getTextSize(text, kFont, scale, thickness, &base);
  return cv::Size(s.width, s.height + base);
}

void PutText(cv::Mat& img, const std::string& text, cv::Point org, double scale,
             const cv::Scalar& color, int thickness) {
  cv::putText(img, text, org, kFont, scale, color, thickness, cv::LINE_AA);
}

void PutTextVertical(cv::Mat& img, const std::string& text, cv::Point org, double scale,
                     const cv::Scalar& color) {
  const cv::Size ts = TextSize(text, scale);
  cv::Mat tmp(ts.height + 2, ts.width + 2, img.type(), cv::Scalar::all(255));
  int base = 0;
  const cv::Size raw = cv::getTextSize(text, kFont, scale, 1, &base);
  cv::putText(tmp, text, cv::Point(1, raw.height + 1), kFont, scale, color, 1, cv::LINE_AA);
  cv::Mat rot;
  cv::rotate(tmp, rot, cv::ROTATE_90_COUNTERCLOCKWISE);
  cv::Rect dst(org, rot.size());
  dst &= cv::Rect(0, 0, img.cols, img.rows);
  if (dst.empty()) return;
  cv::Mat roi = img(dst);
  cv::min(roi, rot(cv::Rect(0, 0, dst.width, dst.height)), roi);  // dark text over background
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

Axes::Axes(cv::Size size, double x0, double x1, double y0, double y1)
    : img_(size, CV_8UC3, cv::Scalar::all(255)), x0_(x0), x1_(x1), y0_(y0), y1_(y1) {
  const int left = 80, right = 30, top = 50, bottom = 70;
  plot_ = cv::Rect(left, top, size.width - left - right, size.height - top - bottom);
}

cv::Point Axes::ToPixel(double x, double y) const {
  const double fx = (x - x0_) / (x1_ - x0_);
  const double fy = (y - y0_) / (y1_ - y0_);
  return cv::Point(int(std::lround(plot_.x + fx * plot_.width)),
                   int(std::lround(plot_.y + plot_.height - fy * plot_.height)));
}

void Axes::DrawFrame(const std::string& title, const std::string& xlabel,
                     const std::string& ylabel, double dx, double dy, int digits) {
  const double ts = 0.45;
  for (double x = x0_; x <= x1_ + 1e-9; x += dx) {
    const cv::Point p = ToPixel(x, y0_);
    cv::line(img_, cv::Point(p.x, plot_.y), cv::Point(p.x, plot_.y + plot_.height), kGrid, 1);
    cv::line(img_, p, p + cv::Point(0, 5), kBlack, 1);
    const std::string s = Fixed(x, digits);
    const cv::Size sz = TextSize(s, ts);
    PutText(img_, s, cv::Point(p.x - sz.width / 2, p.y + 8 + sz.height), ts, kBlack);
  }
  for (double y = y0_; y <= y1_ + 1e-9; y += dy) {
    const cv::Point p = ToPixel(x0_, y);
    cv::line(img_, cv::Point(plot_.x, p.y), cv::Point(plot_.x + plot_.width, p.y), kGrid, 1);
    cv::line(img_, p, p - cv::Point(5, 0), kBlack, 1);
    const std::string s = Fixed(y, digits);
    const cv::Size sz = TextSize(s, ts);
    PutText(img_, s, cv::Point(p.x - 8 - sz.width, p.y + sz.height / 2 - 2), ts, kBlack);
  }
  cv::rectangle(img_, plot_, kBlack, 1);
  const cv::Size tsz = TextSize(title, 0.7, 2);
  PutText(img_, title, cv::Point((img_.cols - tsz.width) / 2, 32), 0.7, kBlack, 2);
  const cv::Size xsz = TextSize(xlabel, 0.6);
  PutText(img_, xlabel, cv::Point(plot_.x + (plot_.width - xsz.width) / 2, img_.rows - 18), 0.6,
          kBlack);
  const cv::Size ysz = TextSize(ylabel, 0.6);
  PutTextVertical(img_, ylabel, cv::Point(8, plot_.y + (plot_.height - ysz.width) / 2), 0.6,
                  kBlack);
}

void Axes::Line(const std::vector<double>& x, const std::vector<double>& y,
                const cv::Scalar& color, int thickness) {
  std::vector<cv::Point> pts;
  pts.reserve(x.size());
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    const double cy = std::clamp(y[i], y0_, y1_);
    pts.push_back(ToPixel(x[i], cy));
  }
  if (pts.size() >= 2) cv::polylines(img_, pts, false, color, thickness, cv::LINE_AA);
}

void Axes::Legend(const std::vector<LegendEntry>& entries) {
  if (entries.empty()) return;
  const double ts = 0.45;
  int w = 0, h = 0;
  for (const LegendEntry& e : entries) {
    const cv::Size s = TextSize(e.label, ts);
    w = std::max(w, s.width);
    h = std::max(h, s.height);
  }
  const int row = h + 6;
  const cv::Rect box(plot_.x + plot_.width - w - 50, plot_.y + 8, w + 42,
                     row * int(entries.size()) + 8);
  cv::rectangle(img_, box, cv::Scalar::all(255), cv::FILLED);
  cv::rectangle(img_, box, cv::Scalar::all(160), 1);
  for (size_t i = 0; i < entries.size(); ++i) {
    const int y = box.y + 4 + row * int(i) + row / 2;
    cv::line(img_, cv::Point(box.x + 6, y), cv::Point(box.x + 30, y), entries[i].color,
             std::max(1, entries[i].thickness), cv::LINE_AA);
    PutText(img_, entries[i].label, cv::Point(box.x + 36, y + h / 2 - 2), ts, kBlack);
  }
}

}  // namespace kestrel::eval::internal
