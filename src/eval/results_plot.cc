#include "eval/results_plot.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "eval/internal/plot_canvas.h"

namespace kestrel::eval {

using internal::Axes;

namespace {

const cv::Scalar kRaw(180, 119, 31);     // blue (BGR)
const cv::Scalar kSmooth(14, 127, 255);  // orange (BGR)

// Mirror index i into [0, n) with period 2n (scipy "reflect": d c b a | a b c d).
size_t Reflect(long i, long n) {
  long m = i % (2 * n);
  if (m < 0) m += 2 * n;
  if (m >= n) m = 2 * n - 1 - m;
  return size_t(m);
}

cv::Mat Panel(const std::vector<double>& x, const ResultsSeries& s, double sigma) {
  const cv::Size size(kResultsPanelWidth, kResultsPanelHeight);
  internal::Margins m;
  m.left = 78;
  m.right = 18;
  m.top = 40;
  m.bottom = 58;
  const double first = x.empty() ? 1 : x.front(), last = x.empty() ? 1 : x.back();
  const double xpad = std::max(0.25, 0.04 * (last - first));
  const std::vector<double> smooth =
      s.missing.empty() ? GaussianSmooth(s.values, sigma) : std::vector<double>{};
  double y0 = 0, y1 = 1;
  const bool any = s.missing.empty() && internal::DataRange({&s.values, &smooth}, 0.08, &y0, &y1);
  Axes ax(size, first - xpad, last + xpad, y0, y1, m);
  const double dx = std::max(1.0, internal::NiceStep(std::max(1.0, last - first), 5));
  const double dy = any ? internal::NiceStep(y1 - y0, 5) : 0.2;
  ax.DrawFrame(s.title, "epoch", s.ylabel, dx, dy, -1, internal::kPanelTitlePx);
  if (!s.missing.empty()) {
    ax.Message(s.missing);
  } else if (!any) {
    ax.Message("no finite values");
  } else {
    ax.Line(x, s.values, kRaw, 2);
    ax.Markers(x, s.values, kRaw, x.size() > 60 ? 2 : 3);
    if (sigma > 0) ax.DottedLine(x, smooth, kSmooth, 2);
  }
  return ax.Image();
}

}  // namespace

std::vector<double> GaussianSmooth(const std::vector<double>& y, double sigma) {
  if (!(sigma > 0) || y.empty()) return y;
  const long n = long(y.size());
  const long radius = std::lround(4.0 * sigma);
  std::vector<double> w(size_t(2 * radius + 1));
  for (long k = -radius; k <= radius; ++k) {
    w[size_t(k + radius)] = std::exp(-0.5 * double(k * k) / (sigma * sigma));
  }
  std::vector<double> out(y.size());
  for (long i = 0; i < n; ++i) {
    double sum = 0, wsum = 0;
    for (long k = -radius; k <= radius; ++k) {
      const double v = y[Reflect(i + k, n)];
      if (!std::isfinite(v)) continue;
      sum += w[size_t(k + radius)] * v;
      wsum += w[size_t(k + radius)];
    }
    out[size_t(i)] = wsum > 0 ? sum / wsum : NAN;
  }
  return out;
}

double ResultsSmoothingSigma(size_t epochs) {
  if (epochs < 3) return 0;
  return std::clamp(double(epochs) / 10.0, 1.0, 3.0);
}

Result<std::string> RenderResultsPlot(const ResultsTable& t) {
  if (t.columns < 1) {
    return Status::InvalidArgument("columns must be >= 1", {"", 0, "ResultsTable.columns"});
  }
  for (size_t i = 0; i < t.series.size(); ++i) {
    if (t.series[i].missing.empty() && t.series[i].values.size() != t.epochs.size()) {
      return Status::InvalidArgument(
          "has " + std::to_string(t.series[i].values.size()) + " values for " +
              std::to_string(t.epochs.size()) + " epochs",
          {"", 0, "ResultsTable.series[" + std::to_string(i) + "] (" + t.series[i].title + ")"});
    }
  }
  return internal::RenderPng([&] {
    const int cols = t.columns;
    const int rows = std::max(1, int((t.series.size() + size_t(cols) - 1) / size_t(cols)));
    cv::Mat img(kResultsHeaderHeight + rows * kResultsPanelHeight, cols * kResultsPanelWidth, CV_8UC3,
                cv::Scalar::all(255));
    const std::vector<double> x(t.epochs.begin(), t.epochs.end());
    const double sigma = ResultsSmoothingSigma(t.epochs.size());
    for (size_t i = 0; i < t.series.size(); ++i) {
      const cv::Mat panel = Panel(x, t.series[i], sigma);
      const int c = int(i % size_t(cols)), r = int(i / size_t(cols));
      panel.copyTo(img(cv::Rect(c * kResultsPanelWidth, kResultsHeaderHeight + r * kResultsPanelHeight,
                                panel.cols, panel.rows)));
    }
    // The legend once, in the header line: what the two lines mean.
    const int y = kResultsHeaderHeight / 2 + 2;
    const double px = internal::kLabelPx;
    const std::string count = std::to_string(t.epochs.size()) + (t.epochs.size() == 1 ? " epoch" : " epochs");
    std::string smooth_label = "smoothed (Gaussian, sigma " + internal::Fixed(sigma, 1) + " epochs)";
    if (sigma <= 0) smooth_label = "smoothed: from 3 epochs on";
    int x0 = 20;
    cv::line(img, cv::Point(x0, y), cv::Point(x0 + 30, y), kRaw, 2, cv::LINE_AA);
    cv::circle(img, cv::Point(x0 + 15, y), 3, kRaw, cv::FILLED, cv::LINE_AA);
    x0 += 38;
    data::PutText(img, "recorded", cv::Point(x0, y), px, cv::Scalar::all(0), FontWeight::kRegular,
                  HAlign::kLeft, VAlign::kMiddle);
    x0 += data::TextSize("recorded", px).width + 30;
    for (int k = 0; k < 5; ++k)
      cv::circle(img, cv::Point(x0 + 3 + 6 * k, y), 2, kSmooth, cv::FILLED, cv::LINE_AA);
    x0 += 38;
    data::PutText(img, smooth_label, cv::Point(x0, y), px, cv::Scalar::all(0), FontWeight::kRegular,
                  HAlign::kLeft, VAlign::kMiddle);
    data::PutText(img, count, cv::Point(img.cols - 20, y), px, cv::Scalar::all(0), FontWeight::kBold,
                  HAlign::kRight, VAlign::kMiddle);
    return img;
  });
}

}  // namespace kestrel::eval
