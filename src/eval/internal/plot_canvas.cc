#include "eval/internal/plot_canvas.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <opencv2/imgproc.hpp>

#include "data/codec.h"

namespace kestrel::eval::internal {

namespace {
const cv::Scalar kBlack(0, 0, 0);
const cv::Scalar kGrid(225, 225, 225);
const cv::Scalar kTickText(60, 60, 60);
}  // namespace

Result<std::string> EncodePng(const cv::Mat& img) { return data::EncodePng(img); }

Result<std::string> EncodeJpeg(const cv::Mat& img) { return data::EncodeJpeg(img, 90); }

cv::Scalar SeriesColor(size_t i) {
  // A qualitative palette (RGB hex), stored as BGR.
  static const unsigned kHex[20] = {0xFF3838, 0xFF9D97, 0xFF701F, 0xFFB21D, 0xCFD231, 0x48F90A, 0x92CC17,
                                    0x3DDB86, 0x1A9334, 0x00D4BB, 0x2C99A8, 0x00C2FF, 0x344593, 0x6473FF,
                                    0x0018EC, 0x8438FF, 0x520085, 0xCB38FF, 0xFF95C8, 0xFF37C7};
  const unsigned h = kHex[i % 20];
  return cv::Scalar(h & 0xFF, (h >> 8) & 0xFF, (h >> 16) & 0xFF);
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

double NiceStep(double range, int target) {
  if (!(range > 0) || !std::isfinite(range)) return 1.0;
  const double raw = range / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double nice = f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10;
  return nice * mag;
}

std::string TickLabel(double v, double step) {
  int digits = 0;
  if (step < 1) digits = std::clamp(int(std::ceil(-std::log10(step) - 1e-9)), 0, 8);
  // A step like 0.25 needs one more digit than its magnitude says.
  if (std::fabs(step * std::pow(10.0, digits) - std::round(step * std::pow(10.0, digits))) > 1e-6) {
    ++digits;
  }
  if (std::fabs(v) < step * 1e-6) v = 0;  // no "-0.00"
  return Fixed(v, digits);
}

bool DataRange(const std::vector<const std::vector<double>*>& ys, double pad, double* lo, double* hi) {
  double mn = INFINITY, mx = -INFINITY;
  for (const std::vector<double>* y : ys) {
    for (double v : *y) {
      if (!std::isfinite(v)) continue;
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
  }
  if (!(mn <= mx)) {
    *lo = 0;
    *hi = 1;
    return false;
  }
  const double span = mx - mn;
  if (span <= std::max(1e-12, std::fabs(mx) * 1e-9)) {
    const double half = mx == 0 ? 0.5 : std::fabs(mx) * 0.1;
    *lo = mn - half;
    *hi = mx + half;
    return true;
  }
  *lo = mn - pad * span;
  *hi = mx + pad * span;
  return true;
}

Axes::Axes(cv::Size size, double x0, double x1, double y0, double y1, Margins m)
    : img_(size, CV_8UC3, cv::Scalar::all(255)), x0_(x0), x1_(x1), y0_(y0), y1_(y1) {
  plot_ = cv::Rect(m.left, m.top, std::max(1, size.width - m.left - m.right),
                   std::max(1, size.height - m.top - m.bottom));
}

cv::Point Axes::ToPixel(double x, double y) const {
  const double fx = (x - x0_) / (x1_ - x0_);
  const double fy = (y - y0_) / (y1_ - y0_);
  return cv::Point(int(std::lround(plot_.x + fx * plot_.width)),
                   int(std::lround(plot_.y + plot_.height - fy * plot_.height)));
}

void Axes::DrawFrame(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                     double dx, double dy, int digits, double title_px) {
  auto label = [&](double v, double step) {
    if (std::fabs(v) < step * 1e-6) v = 0;  // no "-0.0"
    return digits >= 0 ? Fixed(v, digits) : TickLabel(v, step);
  };
  // Ticks on multiples of the step inside the range (a range that does not
  // start on a multiple gets its first tick at the next one). Counted in
  // steps so that rounding never drops the last tick.
  auto ticks = [](double lo, double hi, double step) {
    std::vector<double> out;
    if (!(step > 0)) return out;
    const long first = long(std::ceil(lo / step - 1e-9)), last = long(std::floor(hi / step + 1e-9));
    for (long i = first; i <= last && out.size() < 1000; ++i) out.push_back(double(i) * step);
    return out;
  };
  for (double x : ticks(x0_, x1_, dx)) {
    const cv::Point p = ToPixel(x, y0_);
    cv::line(img_, cv::Point(p.x, plot_.y), cv::Point(p.x, plot_.y + plot_.height), kGrid, 1);
    cv::line(img_, p, p + cv::Point(0, 5), kBlack, 1);
    PutText(img_, label(x, dx), p + cv::Point(0, 7), kTickPx, kTickText, FontWeight::kRegular,
            HAlign::kCenter);
  }
  int tick_w = 0;  // widest y tick label: the y axis label goes left of it
  for (double y : ticks(y0_, y1_, dy)) {
    const cv::Point p = ToPixel(x0_, y);
    cv::line(img_, cv::Point(plot_.x, p.y), cv::Point(plot_.x + plot_.width, p.y), kGrid, 1);
    cv::line(img_, p, p - cv::Point(5, 0), kBlack, 1);
    const std::string s = label(y, dy);
    tick_w = std::max(tick_w, TextSize(s, kTickPx).width);
    PutText(img_, s, p - cv::Point(8, 0), kTickPx, kTickText, FontWeight::kRegular, HAlign::kRight,
            VAlign::kMiddle);
  }
  cv::rectangle(img_, plot_, kBlack, 1);
  PutText(img_, title, cv::Point(plot_.x + plot_.width / 2, std::max(2, plot_.y - LineHeight(title_px) - 8)),
          title_px, kBlack, FontWeight::kBold, HAlign::kCenter);
  const int tick_h = LineHeight(kTickPx);
  PutText(img_, xlabel, cv::Point(plot_.x + plot_.width / 2, plot_.y + plot_.height + 12 + tick_h), kLabelPx,
          kBlack, FontWeight::kRegular, HAlign::kCenter);
  const int ylabel_x = std::max(2, plot_.x - 8 - tick_w - 8 - LineHeight(kLabelPx));
  PutTextVertical(img_, ylabel, cv::Point(ylabel_x, plot_.y + plot_.height / 2), kLabelPx, kBlack,
                  FontWeight::kRegular, HAlign::kLeft, VAlign::kMiddle);
}

void Axes::Line(const std::vector<double>& x, const std::vector<double>& y, const cv::Scalar& color,
                int thickness) {
  std::vector<cv::Point> pts;
  pts.reserve(x.size());
  auto flush = [&] {
    if (pts.size() >= 2) cv::polylines(img_, pts, false, color, thickness, cv::LINE_AA);
    pts.clear();
  };
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (!std::isfinite(y[i])) {
      flush();
      continue;
    }
    pts.push_back(ToPixel(x[i], std::clamp(y[i], y0_, y1_)));
  }
  flush();
}

void Axes::DottedLine(const std::vector<double>& x, const std::vector<double>& y, const cv::Scalar& color,
                      int radius) {
  const double gap = 3.0 * radius + 3.0;
  double carry = 0;  // distance left until the next dot
  bool have_prev = false;
  cv::Point2d prev;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (!std::isfinite(y[i])) {
      have_prev = false;
      continue;
    }
    const cv::Point p = ToPixel(x[i], std::clamp(y[i], y0_, y1_));
    const cv::Point2d cur(p.x, p.y);
    if (!have_prev) {
      cv::circle(img_, p, radius, color, cv::FILLED, cv::LINE_AA);
      carry = gap;
    } else {
      const cv::Point2d d = cur - prev;
      const double len = std::hypot(d.x, d.y);
      double t = carry;
      for (; t <= len; t += gap) {
        const cv::Point2d q = prev + d * (t / len);
        cv::circle(img_, cv::Point(int(std::lround(q.x)), int(std::lround(q.y))), radius, color, cv::FILLED,
                   cv::LINE_AA);
      }
      carry = t - len;
    }
    prev = cur;
    have_prev = true;
  }
}

void Axes::Markers(const std::vector<double>& x, const std::vector<double>& y, const cv::Scalar& color,
                   int radius) {
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    if (!std::isfinite(y[i])) continue;
    cv::circle(img_, ToPixel(x[i], std::clamp(y[i], y0_, y1_)), radius, color, cv::FILLED, cv::LINE_AA);
  }
}

void Axes::Legend(const std::vector<LegendEntry>& entries, bool bottom) {
  if (entries.empty()) return;
  int w = 0;
  for (const LegendEntry& e : entries) w = std::max(w, TextSize(e.label, kTickPx).width);
  const int row = LineHeight(kTickPx) + 4;
  const int height = row * int(entries.size()) + 8;
  const cv::Rect box(plot_.x + plot_.width - w - 50,
                     bottom ? plot_.y + plot_.height - height - 8 : plot_.y + 8, w + 42, height);
  cv::rectangle(img_, box, cv::Scalar::all(255), cv::FILLED);
  cv::rectangle(img_, box, cv::Scalar::all(160), 1);
  for (size_t i = 0; i < entries.size(); ++i) {
    const int y = box.y + 4 + row * int(i) + row / 2;
    const LegendEntry& e = entries[i];
    if (e.dotted) {
      for (int x = box.x + 8; x <= box.x + 30; x += 6) {
        cv::circle(img_, cv::Point(x, y), std::max(1, e.thickness), e.color, cv::FILLED, cv::LINE_AA);
      }
    } else {
      cv::line(img_, cv::Point(box.x + 6, y), cv::Point(box.x + 30, y), e.color, std::max(1, e.thickness),
               cv::LINE_AA);
    }
    PutText(img_, e.label, cv::Point(box.x + 36, y), kTickPx, kBlack, FontWeight::kRegular, HAlign::kLeft,
            VAlign::kMiddle);
  }
}

void Axes::Message(const std::string& text) {
  PutText(img_, text, cv::Point(plot_.x + plot_.width / 2, plot_.y + plot_.height / 2), kLabelPx,
          cv::Scalar::all(120), FontWeight::kRegular, HAlign::kCenter, VAlign::kMiddle);
}

}  // namespace kestrel::eval::internal
