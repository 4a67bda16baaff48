// labels.png (plots.h): class histogram, box shapes, centre and size
// distributions of a dataset's labels.
#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "eval/internal/plot_canvas.h"
#include "eval/plots.h"

namespace kestrel::eval {

using internal::Axes;
using internal::Margins;
using internal::SeriesColor;

namespace {

constexpr int kPanel = 700;          // side of each panel of the 2x2 grid
constexpr int kHeader = 40;          // the header line above the grid
constexpr int kHistBins = 50;        // per axis of the 2-D histograms
constexpr size_t kMaxShapes = 1000;  // boxes drawn in the shapes panel
const cv::Scalar kBlack(0, 0, 0);

std::string ClassName(const std::vector<std::string>& names, size_t c) {
  return c < names.size() && !names[c].empty() ? names[c] : std::to_string(c);
}

// `text` cut to at most `max_w` pixels (with "..." when cut).
std::string Ellipsize(const std::string& text, double px, int max_w) {
  if (TextSize(text, px).width <= max_w) return text;
  std::string s = text;
  while (!s.empty()) {
    // Drop one UTF-8 character (and its continuation bytes).
    do {
      s.pop_back();
    } while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80);
    if (!s.empty()) {
      std::string cand = s.substr(0, s.size() - 1) + "...";
      if (TextSize(cand, px).width <= max_w) return cand;
    }
  }
  return "...";
}

// Bars of instances per class in a `size` canvas.
cv::Mat ClassHistogram(const LabelStats& s, cv::Size size) {
  const size_t n = s.counts.size();
  const int64_t cmax = n ? std::max<int64_t>(1, *std::max_element(s.counts.begin(), s.counts.end())) : 1;
  const double step = std::max(1.0, internal::NiceStep(double(cmax), 5));
  const double ymax = step * std::ceil(double(cmax) * 1.08 / step);
  // The bar width decides the name size; long names are cut so the bars keep
  // most of the height.
  const int plot_w = size.width - 100;
  const double bar = double(plot_w) / double(std::max<size_t>(1, n));
  const double name_px = std::clamp(bar * 0.8, 9.0, 14.0);
  const size_t every = size_t(std::ceil(LineHeight(name_px) * 0.9 / bar));  // names shown: every k-th
  const int max_name_w = std::min(200, size.height / 3);
  std::vector<std::string> names(n);
  int name_w = 0;
  for (size_t c = 0; c < n; c += every) {
    names[c] = Ellipsize(ClassName(s.names, c), name_px, max_name_w);
    name_w = std::max(name_w, TextSize(names[c], name_px).width);
  }
  Margins m;
  m.left = 80;
  m.right = 20;
  m.top = 50;
  m.bottom = name_w + 24;
  Axes ax(size, 0, double(std::max<size_t>(1, n)), 0, ymax, m);
  ax.DrawFrame("Instances per class (" + std::to_string(n) + " classes)", "", "instances", 0, step, -1,
               internal::kPanelTitlePx);
  cv::Mat& img = ax.Image();
  const cv::Rect& plot = ax.PlotRect();
  const bool values = n <= 20;
  for (size_t c = 0; c < n; ++c) {
    const cv::Point p0 = ax.ToPixel(double(c), 0), p1 = ax.ToPixel(double(c + 1), double(s.counts[c]));
    const int gap = bar >= 6 ? std::max(1, int(bar * 0.12)) : 0;
    const cv::Rect rc(cv::Point(p0.x + gap, p1.y), cv::Point(std::max(p0.x + gap + 1, p1.x - gap), p0.y));
    if (s.counts[c] > 0) cv::rectangle(img, rc, SeriesColor(c), cv::FILLED);
    if (values && s.counts[c] > 0) {
      PutText(img, std::to_string(s.counts[c]), cv::Point((p0.x + p1.x) / 2, p1.y - 2), internal::kTickPx,
              kBlack, FontWeight::kRegular, HAlign::kCenter, VAlign::kBottom);
    }
    if (!names[c].empty()) {
      PutTextVertical(img, names[c], cv::Point((p0.x + p1.x) / 2, plot.y + plot.height + 6), name_px, kBlack,
                      FontWeight::kRegular, HAlign::kCenter, VAlign::kTop);
    }
  }
  if (n == 0) ax.Message("no classes");
  cv::rectangle(img, plot, kBlack, 1);
  return img;
}

// Up to kMaxShapes boxes (every k-th, so a large set is sampled evenly),
// centred in a unit square: how big and how elongated the boxes are.
cv::Mat Shapes(const LabelStats& s, cv::Size size) {
  Margins m;
  m.left = 80;
  m.right = 40;
  m.top = 50;
  m.bottom = 80;
  Axes ax(size, 0, 1, 0, 1, m);
  const size_t k = (s.boxes.size() + kMaxShapes - 1) / kMaxShapes;
  const size_t shown = k ? (s.boxes.size() + k - 1) / k : 0;
  ax.DrawFrame(
      "Box shapes (" + std::to_string(shown) + " of " + std::to_string(s.boxes.size()) + ", centred)",
      "width", "height", 0.2, 0.2, 1, internal::kPanelTitlePx);
  cv::Mat& img = ax.Image();
  // Drawn on a copy and blended, so dense areas get darker instead of flat.
  cv::Mat layer = img.clone();
  for (size_t i = 0; k && i < s.boxes.size(); i += k) {
    const LabelBox& b = s.boxes[i];
    const cv::Point p0 = ax.ToPixel(0.5 - b.w / 2, 0.5 + b.h / 2);
    const cv::Point p1 = ax.ToPixel(0.5 + b.w / 2, 0.5 - b.h / 2);
    cv::rectangle(layer, cv::Rect(p0, p1), SeriesColor(size_t(std::max(0, b.class_id))), 1, cv::LINE_AA);
  }
  cv::addWeighted(layer, 0.6, img, 0.4, 0, img);
  cv::rectangle(img, ax.PlotRect(), kBlack, 1);
  if (s.boxes.empty()) ax.Message("no boxes");
  return img;
}

// 2-D histogram over [0, 1]^2 of (x(b), y(b)).
template <typename X, typename Y>
cv::Mat Histogram2d(const LabelStats& s, cv::Size size, const std::string& title, const std::string& xlabel,
                    const std::string& ylabel, X x_of, Y y_of) {
  Margins m;
  m.left = 80;
  m.right = 40;
  m.top = 50;
  m.bottom = 80;
  Axes ax(size, 0, 1, 0, 1, m);
  ax.DrawFrame(title, xlabel, ylabel, 0.2, 0.2, 1, internal::kPanelTitlePx);
  std::vector<int64_t> bins(size_t(kHistBins) * kHistBins, 0);
  for (const LabelBox& b : s.boxes) {
    const double x = x_of(b), y = y_of(b);
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    const int bx = std::clamp(int(x * kHistBins), 0, kHistBins - 1);
    const int by = std::clamp(int(y * kHistBins), 0, kHistBins - 1);
    ++bins[size_t(by) * kHistBins + size_t(bx)];
  }
  const int64_t bmax = *std::max_element(bins.begin(), bins.end());
  cv::Mat& img = ax.Image();
  for (int by = 0; by < kHistBins; ++by) {
    for (int bx = 0; bx < kHistBins; ++bx) {
      const int64_t c = bins[size_t(by) * kHistBins + size_t(bx)];
      if (c == 0) continue;
      // Log scale, so one box in a bin is visible next to a thousand.
      const double f = 0.15 + 0.85 * std::log1p(double(c)) / std::log1p(double(bmax));
      const cv::Scalar color(255 - 80 * f, 255 - 200 * f, 255 - 230 * f);
      const cv::Point p0 = ax.ToPixel(double(bx) / kHistBins, double(by + 1) / kHistBins);
      const cv::Point p1 = ax.ToPixel(double(bx + 1) / kHistBins, double(by) / kHistBins);
      cv::rectangle(img, cv::Rect(p0, p1), color, cv::FILLED);
    }
  }
  cv::rectangle(img, ax.PlotRect(), kBlack, 1);
  if (bmax == 0) {
    ax.Message("no boxes");
  } else {
    ax.Legend({{"max " + std::to_string(bmax) + " per bin (log colour)", cv::Scalar(175, 55, 25), 3}});
  }
  return img;
}

}  // namespace

LabelStats LabelStatsFromManifest(const data::Manifest& m, data::Split split) {
  LabelStats s;
  s.names = m.names;
  s.counts.assign(m.names.size(), 0);
  int64_t images = 0;
  for (const data::ManifestEntry& e : m.entries) {
    if (e.split != split) continue;
    ++images;
    for (const data::Box& b : e.boxes) {
      if (b.cls >= 0 && size_t(b.cls) < s.counts.size()) ++s.counts[size_t(b.cls)];
      s.boxes.push_back({b.cls, float(b.cx), float(b.cy), float(b.w), float(b.h)});
    }
  }
  s.subtitle = std::string(data::SplitName(split)) + " split: " + std::to_string(images) + " images, " +
               std::to_string(s.boxes.size()) + " instances";
  return s;
}

Result<std::string> RenderLabelsPlot(const LabelStats& s, GridFormat format) {
  return internal::RenderImage(format == GridFormat::kJpeg, [&] {
    const bool geometry = !s.boxes.empty();
    const int rows = geometry ? 2 : 1;
    cv::Mat img(kHeader + rows * kPanel, 2 * kPanel, CV_8UC3, cv::Scalar::all(255));
    std::string header = "Labels";
    if (!s.subtitle.empty()) header += ": " + s.subtitle;
    PutText(img, header, cv::Point(img.cols / 2, 10), internal::kTitlePx, kBlack, FontWeight::kBold,
            HAlign::kCenter);
    auto place = [&](const cv::Mat& panel, int col, int row) {
      panel.copyTo(img(cv::Rect(col * kPanel, kHeader + row * kPanel, panel.cols, panel.rows)));
    };
    if (!geometry) {
      place(ClassHistogram(s, cv::Size(2 * kPanel, kPanel)), 0, 0);
      return img;
    }
    place(ClassHistogram(s, cv::Size(kPanel, kPanel)), 0, 0);
    place(Shapes(s, cv::Size(kPanel, kPanel)), 1, 0);
    place(Histogram2d(
              s, cv::Size(kPanel, kPanel), "Box centres", "x", "y",
              [](const LabelBox& b) { return double(b.cx); }, [](const LabelBox& b) { return double(b.cy); }),
          0, 1);
    place(Histogram2d(
              s, cv::Size(kPanel, kPanel), "Box sizes", "width", "height",
              [](const LabelBox& b) { return double(b.w); }, [](const LabelBox& b) { return double(b.h); }),
          1, 1);
    return img;
  });
}

Result<std::string> RenderLabelHistogram(const std::vector<int64_t>& counts,
                                         const std::vector<std::string>& names) {
  LabelStats s;
  s.names = names;
  s.counts = counts;
  return RenderLabelsPlot(s);
}

}  // namespace kestrel::eval
