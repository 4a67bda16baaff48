#include "eval/study_plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "eval/internal/plot_canvas.h"

namespace kestrel::eval {

using internal::Axes;

namespace {

const cv::Scalar kDot(180, 119, 31);     // blue (BGR): a trial's objective
const cv::Scalar kBest(40, 39, 214);     // red (BGR): best so far
const cv::Scalar kAxis(0, 0, 0);         // parallel-coordinates axes
const cv::Scalar kBar(180, 119, 31);     // importance bars
const cv::Scalar kMuted(120, 120, 120);  // messages, min/max labels

// "%.3g": params span decades (lr0) or are small fractions (hsv_h).
std::string Short(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

// Light (t = 0) to dark blue (t = 1), as a sequential colour map: later or
// better trials stand out.
cv::Scalar Ramp(double t) {
  t = std::clamp(t, 0.0, 1.0);
  const double r = 198 + (8 - 198) * t, g = 219 + (48 - 219) * t, b = 239 + (107 - 239) * t;
  return cv::Scalar(b, g, r);
}

bool Better(const StudyPlotData& d, double a, double b) { return d.maximize ? a > b : a < b; }

std::string Title(const StudyPlotData& d, const std::string& what) {
  return d.study.empty() ? what : d.study + ": " + what;
}

Status Check(const StudyPlotData& d) {
  const size_t n = d.params.size();
  if (!d.importances.empty() && d.importances.size() != n) {
    return Status::InvalidArgument("importances: " + std::to_string(d.importances.size()) + " values for " +
                                   std::to_string(n) + " params");
  }
  for (const StudyPlotTrial& t : d.trials) {
    const std::string where = "trial " + std::to_string(t.number);
    if (t.params.size() != n) {
      return Status::InvalidArgument(where + ": " + std::to_string(t.params.size()) + " param values for " +
                                     std::to_string(n) + " params");
    }
    for (size_t p = 0; p < n; ++p) {
      const StudyPlotParam& q = d.params[p];
      const double v = t.params[p];
      if (!q.choices.empty()) {
        if (!(v >= 0 && v < double(q.choices.size())) || v != std::floor(v)) {
          return Status::InvalidArgument(where + ": param '" + q.name + "': choice index " + Short(v) +
                                         " outside [0, " + std::to_string(q.choices.size()) + ")");
        }
      } else if (q.log && !(v > 0)) {
        return Status::InvalidArgument(where + ": param '" + q.name + "': log-scaled value " + Short(v) +
                                       " is not > 0");
      }
    }
  }
  return Status();
}

// The trials with a finite value, in trial-number order.
std::vector<const StudyPlotTrial*> Valued(const StudyPlotData& d) {
  std::vector<const StudyPlotTrial*> out;
  for (const StudyPlotTrial& t : d.trials) {
    if (t.value && std::isfinite(*t.value)) out.push_back(&t);
  }
  std::stable_sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->number < b->number; });
  return out;
}

// A param's plotting coordinate: log10 for log params, the value (or
// choice index) otherwise.
double Coord(const StudyPlotParam& q, double v) { return q.log && q.choices.empty() ? std::log10(v) : v; }

// The coordinate range of param p over `trials` (categoricals: every
// choice), padded for dots.
void ParamRange(const StudyPlotData& d, size_t p, const std::vector<const StudyPlotTrial*>& trials,
                double pad, double* lo, double* hi) {
  const StudyPlotParam& q = d.params[p];
  if (!q.choices.empty()) {
    *lo = -0.5;
    *hi = double(q.choices.size()) - 0.5;
    return;
  }
  std::vector<double> xs;
  for (const StudyPlotTrial* t : trials) xs.push_back(Coord(q, t->params[p]));
  internal::DataRange({&xs}, pad, lo, hi);
}

// Tick labels under a param's x axis: choices, powers of ten (log), or
// nice steps.
void ParamTicks(Axes& ax, const StudyPlotParam& q, double lo, double hi) {
  cv::Mat& img = ax.Image();
  const cv::Rect r = ax.PlotRect();
  auto tick = [&](double x, const std::string& text) {
    const cv::Point p = ax.ToPixel(x, 0);
    cv::line(img, cv::Point(p.x, r.y), cv::Point(p.x, r.y + r.height), cv::Scalar(225, 225, 225), 1);
    cv::line(img, cv::Point(p.x, r.y + r.height), cv::Point(p.x, r.y + r.height + 5), kAxis, 1);
    PutText(img, text, cv::Point(p.x, r.y + r.height + 7), internal::kTickPx, cv::Scalar(60, 60, 60),
            FontWeight::kRegular, HAlign::kCenter);
  };
  if (!q.choices.empty()) {
    for (size_t c = 0; c < q.choices.size(); ++c) tick(double(c), q.choices[c]);
  } else if (q.log) {
    const double step = std::max(1.0, std::round(internal::NiceStep(hi - lo, 5)));
    for (double e = std::ceil(lo / step) * step; e <= hi + 1e-9; e += step) tick(e, "1e" + Short(e));
  } else {
    const double step = internal::NiceStep(hi - lo, 5);
    for (double x = std::ceil(lo / step - 1e-9) * step; x <= hi + 1e-9; x += step) {
      tick(x, internal::TickLabel(x, step));
    }
  }
  cv::rectangle(img, r, kAxis, 1);
}

}  // namespace

Result<std::string> RenderStudyHistory(const StudyPlotData& d) {
  KESTREL_RETURN_IF_ERROR(Check(d));
  return internal::RenderPng([&] {
    const auto valued = Valued(d);
    std::vector<double> x, y, best;
    for (const StudyPlotTrial* t : valued) {
      x.push_back(double(t->number));
      y.push_back(*t->value);
      best.push_back(best.empty() || Better(d, y.back(), best.back()) ? y.back() : best.back());
    }
    double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    if (!x.empty()) {
      x0 = x.front();
      x1 = x.back();
      const double pad = std::max(0.5, 0.03 * (x1 - x0));
      x0 -= pad;
      x1 += pad;
      internal::DataRange({&y}, 0.08, &y0, &y1);
    }
    internal::Margins m;
    m.bottom = 95;
    Axes ax(cv::Size(kStudyHistoryWidth, kStudyHistoryHeight), x0, x1, y0, y1, m);
    ax.DrawFrame(Title(d, "optimisation history"), "trial", d.metric,
                 std::max(1.0, internal::NiceStep(x1 - x0, 8)), internal::NiceStep(y1 - y0, 6), -1);
    const std::string sub = std::to_string(valued.size()) + " of " + std::to_string(d.trials.size()) +
                            " trials with a value, " + (d.maximize ? "maximize" : "minimize");
    PutText(ax.Image(), sub, cv::Point(kStudyHistoryWidth / 2, kStudyHistoryHeight - 26), internal::kTickPx,
            kMuted, FontWeight::kRegular, HAlign::kCenter);
    if (x.empty()) {
      ax.Message("no trial has a value yet");
      return ax.Image();
    }
    // Best so far as a step line: it holds its value until a better trial.
    std::vector<double> sx, sy;
    for (size_t i = 0; i < x.size(); ++i) {
      if (i > 0) {
        sx.push_back(x[i]);
        sy.push_back(best[i - 1]);
      }
      sx.push_back(x[i]);
      sy.push_back(best[i]);
    }
    ax.Line(sx, sy, kBest, 2);
    ax.Markers(x, y, kDot, 4);
    // The best-so-far line ends high when maximizing: the legend goes low.
    ax.Legend({{d.metric, kDot, 4}, {"best so far", kBest, 2}}, d.maximize);
    return ax.Image();
  });
}

Result<std::string> RenderStudyParallelCoordinates(const StudyPlotData& d) {
  KESTREL_RETURN_IF_ERROR(Check(d));
  return internal::RenderPng([&] {
    cv::Mat img(kStudyParallelHeight, kStudyParallelWidth, CV_8UC3, cv::Scalar::all(255));
    const int left = 70, right = 70, top = 80, bottom = 80;
    PutText(img, Title(d, "parallel coordinates"), cv::Point(kStudyParallelWidth / 2, 14), internal::kTitlePx,
            kAxis, FontWeight::kBold, HAlign::kCenter);
    const auto valued = Valued(d);
    const size_t axes = d.params.size() + 1;  // the objective last
    const int span = kStudyParallelWidth - left - right;
    auto axis_x = [&](size_t a) {
      return axes == 1 ? left + span / 2 : left + int(a) * span / int(axes - 1);
    };
    const int y_top = top, y_bottom = kStudyParallelHeight - bottom;
    // Each axis's range (objective: its values; categoricals: their choices).
    std::vector<double> lo(axes, 0), hi(axes, 1);
    for (size_t p = 0; p < d.params.size(); ++p) ParamRange(d, p, valued, 0.0, &lo[p], &hi[p]);
    std::vector<double> values;
    for (const StudyPlotTrial* t : valued) values.push_back(*t->value);
    internal::DataRange({&values}, 0.0, &lo.back(), &hi.back());
    auto to_y = [&](size_t a, double c) {
      const double f = hi[a] > lo[a] ? (c - lo[a]) / (hi[a] - lo[a]) : 0.5;
      return int(std::lround(y_bottom - f * (y_bottom - y_top)));
    };
    auto label = [&](size_t a, double c) {
      if (a + 1 == axes) return Short(c);
      const StudyPlotParam& q = d.params[a];
      if (!q.choices.empty()) return q.choices[size_t(std::lround(c))];
      return Short(q.log ? std::pow(10.0, c) : c);
    };
    // Lines first (worst first, so the best are on top), then the axes.
    std::vector<size_t> order(valued.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return Better(d, *valued[b]->value, *valued[a]->value); });
    for (size_t rank = 0; rank < order.size(); ++rank) {
      const StudyPlotTrial& t = *valued[order[rank]];
      const double shade = order.size() == 1 ? 1.0 : double(rank) / double(order.size() - 1);
      std::vector<cv::Point> pts;
      for (size_t a = 0; a < axes; ++a) {
        const double c = a + 1 == axes ? *t.value : Coord(d.params[a], t.params[a]);
        pts.emplace_back(axis_x(a), to_y(a, c));
      }
      const bool best = rank + 1 == order.size();
      cv::polylines(img, pts, false, best ? kBest : Ramp(0.15 + 0.85 * shade), best ? 3 : 1, cv::LINE_AA);
    }
    for (size_t a = 0; a < axes; ++a) {
      const int x = axis_x(a);
      cv::line(img, cv::Point(x, y_top), cv::Point(x, y_bottom), kAxis, 2);
      const std::string name = a + 1 == axes ? d.metric : d.params[a].name;
      PutText(img, name, cv::Point(x, y_bottom + 30), internal::kLabelPx, kAxis,
              a + 1 == axes ? FontWeight::kBold : FontWeight::kRegular, HAlign::kCenter);
      if (valued.empty()) continue;
      if (a < d.params.size() && !d.params[a].choices.empty()) {
        for (size_t c = 0; c < d.params[a].choices.size(); ++c) {
          const int y = to_y(a, double(c));
          cv::line(img, cv::Point(x - 4, y), cv::Point(x + 4, y), kAxis, 1);
          PutText(img, d.params[a].choices[c], cv::Point(x + 7, y), internal::kTickPx, kMuted,
                  FontWeight::kRegular, HAlign::kLeft, VAlign::kMiddle);
        }
        continue;
      }
      PutText(img, label(a, hi[a]), cv::Point(x, y_top - 22), internal::kTickPx, kMuted, FontWeight::kRegular,
              HAlign::kCenter);
      PutText(img, label(a, lo[a]), cv::Point(x, y_bottom + 6), internal::kTickPx, kMuted,
              FontWeight::kRegular, HAlign::kCenter);
    }
    if (valued.empty()) {
      PutText(img, "no trial has a value yet", cv::Point(kStudyParallelWidth / 2, kStudyParallelHeight / 2),
              internal::kLabelPx, kMuted, FontWeight::kRegular, HAlign::kCenter, VAlign::kMiddle);
    }
    return img;
  });
}

Result<std::string> RenderStudySlices(const StudyPlotData& d) {
  KESTREL_RETURN_IF_ERROR(Check(d));
  return internal::RenderPng([&] {
    const int n = std::max<int>(1, int(d.params.size()));
    const int cols = std::min(n, kStudySliceColumns), rows = (n + cols - 1) / cols;
    cv::Mat grid(rows * kStudySlicePanelHeight, cols * kStudySlicePanelWidth, CV_8UC3, cv::Scalar::all(255));
    const auto valued = Valued(d);
    std::vector<double> values;
    for (const StudyPlotTrial* t : valued) values.push_back(*t->value);
    double y0 = 0, y1 = 1;
    internal::DataRange({&values}, 0.08, &y0, &y1);
    const double last = valued.empty() ? 0 : double(valued.back()->number);
    const double first = valued.empty() ? 0 : double(valued.front()->number);
    for (size_t p = 0; p < d.params.size(); ++p) {
      const StudyPlotParam& q = d.params[p];
      double x0 = 0, x1 = 1;
      ParamRange(d, p, valued, 0.06, &x0, &x1);
      internal::Margins m;
      m.left = 78;
      m.right = 18;
      m.top = 40;
      m.bottom = 58;
      Axes ax(cv::Size(kStudySlicePanelWidth, kStudySlicePanelHeight), x0, x1, y0, y1, m);
      ax.DrawFrame(Title(d, q.name), "", d.metric, 0, internal::NiceStep(y1 - y0, 5), -1,
                   internal::kPanelTitlePx);
      ParamTicks(ax, q, x0, x1);
      PutText(ax.Image(), q.log ? q.name + " (log scale)" : q.name,
              cv::Point(m.left + (kStudySlicePanelWidth - m.left - m.right) / 2, kStudySlicePanelHeight - 24),
              internal::kLabelPx, kAxis, FontWeight::kRegular, HAlign::kCenter);
      if (valued.empty()) ax.Message("no trial has a value yet");
      for (const StudyPlotTrial* t : valued) {
        const double age = last > first ? (double(t->number) - first) / (last - first) : 1.0;
        ax.Markers({Coord(q, t->params[p])}, {*t->value}, Ramp(0.25 + 0.75 * age), 5);
      }
      const int r = int(p) / cols, c = int(p) % cols;
      ax.Image().copyTo(grid(cv::Rect(c * kStudySlicePanelWidth, r * kStudySlicePanelHeight,
                                      kStudySlicePanelWidth, kStudySlicePanelHeight)));
    }
    return grid;
  });
}

Result<std::string> RenderStudyImportances(const StudyPlotData& d) {
  KESTREL_RETURN_IF_ERROR(Check(d));
  return internal::RenderPng([&] {
    const int rows = std::max<int>(1, int(d.params.size()));
    const int height = 90 + 36 * rows, left = 200, right = 90, top = 60;
    cv::Mat img(height, kStudyImportanceWidth, CV_8UC3, cv::Scalar::all(255));
    PutText(img, Title(d, "parameter importances"), cv::Point(kStudyImportanceWidth / 2, 14),
            internal::kTitlePx, kAxis, FontWeight::kBold, HAlign::kCenter);
    if (d.importances.empty()) {
      PutText(img, "no importances: they need at least 4 succeeded trials",
              cv::Point(kStudyImportanceWidth / 2, top + (height - top) / 2), internal::kLabelPx, kMuted,
              FontWeight::kRegular, HAlign::kCenter, VAlign::kMiddle);
      return img;
    }
    std::vector<size_t> order(d.params.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return d.importances[a] > d.importances[b]; });
    const double top_share = std::max(1e-12, d.importances[order.front()]);
    const int bar_span = kStudyImportanceWidth - left - right;
    for (size_t i = 0; i < order.size(); ++i) {
      const size_t p = order[i];
      const int y = top + 36 * int(i);
      const double share = std::max(0.0, d.importances[p]);
      const int w = int(std::lround(bar_span * share / top_share));
      if (w > 0) cv::rectangle(img, cv::Rect(left, y + 6, w, 24), kBar, cv::FILLED);
      PutText(img, d.params[p].name, cv::Point(left - 10, y + 18), internal::kLabelPx, kAxis,
              FontWeight::kRegular, HAlign::kRight, VAlign::kMiddle);
      PutText(img, internal::Fixed(share, 3), cv::Point(left + w + 8, y + 18), internal::kTickPx, kAxis,
              FontWeight::kRegular, HAlign::kLeft, VAlign::kMiddle);
    }
    cv::line(img, cv::Point(left, top), cv::Point(left, top + 36 * rows), kAxis, 1);
    PutText(img, "share of the objective's variation (permutation importance)",
            cv::Point(left + bar_span / 2, top + 36 * rows + 8), internal::kTickPx, kMuted,
            FontWeight::kRegular, HAlign::kCenter);
    return img;
  });
}

Status WriteStudyPlots(Env& env, const std::string& dir, const StudyPlotData& d) {
  KESTREL_RETURN_IF_ERROR(Check(d));
  KESTREL_RETURN_IF_ERROR(env.CreateDirs(dir));
  struct Out {
    const char* file;
    Result<std::string> png;
  };
  std::vector<Out> outs;
  outs.push_back({"history.png", RenderStudyHistory(d)});
  outs.push_back({"parallel_coordinates.png", RenderStudyParallelCoordinates(d)});
  outs.push_back({"slice.png", RenderStudySlices(d)});
  outs.push_back({"importances.png", RenderStudyImportances(d)});
  for (Out& o : outs) {
    if (!o.png.IsOk()) return o.png.GetStatus().WithContext(o.file);
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(dir, o.file), *o.png));
  }
  return Status();
}

}  // namespace kestrel::eval
