#include "eval/plots.h"

#include <algorithm>
#include <cmath>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

#include "data/codec.h"
#include "eval/ap.h"
#include "eval/internal/plot_canvas.h"

namespace kestrel::eval {

using internal::Axes;
using internal::Fixed;
using internal::LegendEntry;
using internal::SeriesColor;

namespace {

const cv::Scalar kBlack(0, 0, 0);
const cv::Scalar kGray(190, 190, 190);
const cv::Scalar kMean(180, 119, 31);  // a strong blue (BGR)
constexpr double kCaptionPx = 12;      // box captions and tile titles of image grids

// OpenCV reports failures by exception; turn them into a Status here.
template <typename F>
Result<std::string> Encode(F&& draw, GridFormat format = GridFormat::kPng) {
  try {
    cv::Mat img = draw();
    return format == GridFormat::kJpeg ? data::EncodeJpeg(img, 90) : data::EncodePng(img);
  } catch (const cv::Exception& e) {
    return Status::Internal(std::string("OpenCV: ") + e.what());
  }
}

std::string ClassName(const std::vector<std::string>& names, size_t c) {
  return c < names.size() && !names[c].empty() ? names[c] : std::to_string(c);
}

std::string ResultClassName(const EvalResult& r, size_t row) {
  const ClassMetrics& c = r.classes[row];
  return c.name.empty() ? std::to_string(c.class_id) : c.name;
}

}  // namespace

Result<std::string> RenderPrCurve(const EvalResult& r) {
  return Encode([&] {
    Axes ax(cv::Size(900, 700), 0, 1, 0, 1);
    ax.DrawFrame("Precision-Recall Curve (IoU 0.5)", "Recall", "Precision", 0.2, 0.2, 1);
    const std::vector<double>& x = r.curves.x;
    const bool per_class_legend = r.classes.size() <= 20;
    std::vector<LegendEntry> legend;
    for (size_t i = 0; i < r.curves.pr.size(); ++i) {
      const cv::Scalar color = per_class_legend ? SeriesColor(i) : kGray;
      ax.Line(x, r.curves.pr[i], color, 1);
      if (per_class_legend) {
        legend.push_back({ResultClassName(r, i) + " " + Fixed(r.classes[i].ap50, 3), color, 2});
      }
    }
    ax.Line(x, MeanCurvesOf(r).pr_precision, kMean, 3);
    legend.push_back({"all classes " + Fixed(r.map50, 3) + " mAP@0.5", kMean, 3});
    ax.Legend(legend);
    return ax.Image();
  });
}

Result<std::string> RenderConfidenceCurve(const EvalResult& r, ConfidenceCurve which) {
  const std::vector<std::vector<double>>& rows = which == ConfidenceCurve::kF1          ? r.curves.f1
                                                 : which == ConfidenceCurve::kPrecision ? r.curves.precision
                                                                                        : r.curves.recall;
  const char* name = which == ConfidenceCurve::kF1          ? "F1"
                     : which == ConfidenceCurve::kPrecision ? "Precision"
                                                            : "Recall";
  return Encode([&] {
    Axes ax(cv::Size(900, 700), 0, 1, 0, 1);
    ax.DrawFrame(std::string(name) + "-Confidence Curve", "Confidence", name, 0.2, 0.2, 1);
    const std::vector<double>& x = r.curves.x;
    const bool per_class_legend = rows.size() <= 20;
    std::vector<LegendEntry> legend;
    for (size_t i = 0; i < rows.size(); ++i) {
      const cv::Scalar color = per_class_legend ? SeriesColor(i) : kGray;
      ax.Line(x, rows[i], color, 1);
      if (per_class_legend) legend.push_back({ResultClassName(r, i), color, 2});
    }
    // The mean curve is drawn smoothed (5% box filter), as the reference plots do.
    const MeanCurves means = MeanCurvesOf(r);
    const std::vector<double>& mean = which == ConfidenceCurve::kF1          ? means.f1
                                      : which == ConfidenceCurve::kPrecision ? means.precision
                                                                             : means.recall;
    ax.Line(x, mean, kMean, 3);
    if (!mean.empty()) {
      const size_t best = size_t(std::max_element(mean.begin(), mean.end()) - mean.begin());
      legend.push_back({"all classes " + Fixed(mean[best], 2) + " at " + Fixed(x[best], 3), kMean, 3});
    }
    ax.Legend(legend);
    return ax.Image();
  });
}

Result<std::string> RenderConfusionMatrix(const ConfusionMatrix& cm, const std::vector<std::string>& names,
                                          bool normalize) {
  return Encode([&] {
    const int n = cm.NumClasses() + 1;
    std::vector<double> v(cm.Counts().size());
    if (normalize) {
      v = cm.ColumnNormalized();
    } else {
      for (size_t i = 0; i < v.size(); ++i) v[i] = double(cm.Counts()[i]);
    }
    const double vmax = std::max(1e-12, *std::max_element(v.begin(), v.end()));
    const int cell = std::clamp(1200 / n, 12, 60);
    const double px = std::clamp(cell * 0.4, 9.0, 15.0);  // class names
    std::vector<std::string> labels;
    int label_w = 0;
    for (int c = 0; c < n; ++c) {
      labels.push_back(c == n - 1 ? "background" : ClassName(names, size_t(c)));
      label_w = std::max(label_w, TextSize(labels.back(), px).width);
    }
    const int axis_h = data::LineHeight(internal::kLabelPx);
    const int left = label_w + axis_h + 24, top = 60, bottom = label_w + axis_h + 24, right = 30;
    const std::string title = normalize ? "Confusion Matrix Normalized" : "Confusion Matrix";
    const int title_w = TextSize(title, internal::kTitlePx, FontWeight::kBold).width + 40;
    cv::Mat img(top + n * cell + bottom, std::max(left + n * cell + right, title_w), CV_8UC3,
                cv::Scalar::all(255));
    PutText(img, title, cv::Point(img.cols / 2, 18), internal::kTitlePx, kBlack, FontWeight::kBold,
            HAlign::kCenter);
    for (int p = 0; p < n; ++p) {
      for (int g = 0; g < n; ++g) {
        const double f = v[size_t(p) * size_t(n) + size_t(g)] / vmax;
        // White to dark blue.
        const cv::Scalar color(255 - 80 * f, 255 - 200 * f, 255 - 230 * f);
        const cv::Rect rc(left + g * cell, top + p * cell, cell, cell);
        cv::rectangle(img, rc, color, cv::FILLED);
        cv::rectangle(img, rc, cv::Scalar::all(235), 1);
        if (n <= 31 && v[size_t(p) * size_t(n) + size_t(g)] > 0) {
          const double val = v[size_t(p) * size_t(n) + size_t(g)];
          const std::string s = normalize ? Fixed(val, 2) : std::to_string(int64_t(val));
          PutText(img, s, cv::Point(rc.x + cell / 2, rc.y + cell / 2), px * 0.9,
                  f > 0.5 ? cv::Scalar::all(255) : kBlack, FontWeight::kRegular, HAlign::kCenter,
                  VAlign::kMiddle);
        }
      }
    }
    cv::rectangle(img, cv::Rect(left, top, n * cell, n * cell), kBlack, 1);
    for (int c = 0; c < n; ++c) {
      // Row labels (predicted) on the left, column labels (true) below, vertical.
      PutText(img, labels[size_t(c)], cv::Point(left - 6, top + c * cell + cell / 2), px, kBlack,
              FontWeight::kRegular, HAlign::kRight, VAlign::kMiddle);
      PutTextVertical(img, labels[size_t(c)], cv::Point(left + c * cell + cell / 2, top + n * cell + 6), px,
                      kBlack, FontWeight::kRegular, HAlign::kCenter, VAlign::kTop);
    }
    PutText(img, "True", cv::Point(left + n * cell / 2, img.rows - 8), internal::kLabelPx, kBlack,
            FontWeight::kRegular, HAlign::kCenter, VAlign::kBottom);
    PutTextVertical(img, "Predicted", cv::Point(8, top + n * cell / 2), internal::kLabelPx, kBlack,
                    FontWeight::kRegular, HAlign::kLeft, VAlign::kMiddle);
    return img;
  });
}

Result<std::string> RenderDetectionGrid(const std::vector<GridTile>& tiles,
                                        const std::vector<std::string>& names, const GridOptions& opts) {
  if (opts.columns < 1 || opts.tile_size < 32) {
    return Status::InvalidArgument("columns must be >= 1 and tile_size >= 32", {"", 0, "GridOptions"});
  }
  for (size_t i = 0; i < tiles.size(); ++i) {
    const ImageView& v = tiles[i].image;
    if (!v.data || v.width <= 0 || v.height <= 0 || (v.channels != 1 && v.channels != 3) ||
        v.stride < size_t(v.width) * size_t(v.channels)) {
      return Status::InvalidArgument("bad image view", {"", 0, "tiles[" + std::to_string(i) + "]"});
    }
  }
  return Encode(
      [&] {
        const int cols = std::max(1, std::min(opts.columns, int(std::max<size_t>(1, tiles.size()))));
        const int rows = int((tiles.size() + size_t(cols) - 1) / size_t(cols));
        const int ts = opts.tile_size;
        cv::Mat grid(std::max(1, rows) * ts, cols * ts, CV_8UC3, cv::Scalar::all(114));
        for (size_t i = 0; i < tiles.size(); ++i) {
          const GridTile& t = tiles[i];
          cv::Mat src(t.image.height, t.image.width, t.image.channels == 3 ? CV_8UC3 : CV_8UC1,
                      const_cast<uint8_t*>(t.image.data), t.image.stride);
          cv::Mat bgr;
          if (t.image.channels == 1) {
            cv::cvtColor(src, bgr, cv::COLOR_GRAY2BGR);
          } else {
            bgr = src;
          }
          const double s = std::min(double(ts) / t.image.width, double(ts) / t.image.height);
          const int w = std::max(1, int(std::lround(t.image.width * s)));
          const int h = std::max(1, int(std::lround(t.image.height * s)));
          const int ox = int(i % size_t(cols)) * ts + (ts - w) / 2;
          const int oy = int(i / size_t(cols)) * ts + (ts - h) / 2;
          cv::Mat roi = grid(cv::Rect(ox, oy, w, h));
          cv::resize(bgr, roi, roi.size(), 0, 0, cv::INTER_AREA);
          auto to_rect = [&](const Box& b) {
            return cv::Rect(cv::Point(ox + int(std::lround(b.x1 * s)), oy + int(std::lround(b.y1 * s))),
                            cv::Point(ox + int(std::lround(b.x2 * s)), oy + int(std::lround(b.y2 * s))));
          };
          // A class-coloured box with its caption on a filled tab above it.
          auto draw_named = [&](const Box& b, int class_id, const std::string& label) {
            const cv::Scalar color = SeriesColor(size_t(std::max(0, class_id)));
            const cv::Rect rc = to_rect(b);
            cv::rectangle(grid, rc, color, 2, cv::LINE_AA);
            data::DrawBoxLabel(grid, label, rc.tl(), kCaptionPx, color, oy);
          };
          for (const GroundTruth& g : t.labels) {
            if (opts.label_names) {
              draw_named(g.box, g.class_id, ClassName(names, size_t(std::max(0, g.class_id))));
            } else {
              cv::rectangle(grid, to_rect(g.box), cv::Scalar::all(255), 1, cv::LINE_AA);
            }
          }
          for (const Detection& d : t.predictions) {
            if (d.score < opts.min_score) continue;
            draw_named(d.box, d.class_id,
                       ClassName(names, size_t(std::max(0, d.class_id))) + " " + Fixed(d.score, 2));
          }
          if (!t.title.empty()) {
            // Dark text on a light tab, readable over any image.
            const cv::Point at(int(i % size_t(cols)) * ts + 3, int(i / size_t(cols)) * ts + 3);
            const cv::Size sz = TextSize(t.title, kCaptionPx);
            cv::Mat tab = grid(cv::Rect(at, cv::Size(std::min(sz.width + 6, ts - 6), sz.height)));
            tab = tab * 0.35 + cv::Scalar::all(255 * 0.65);
            PutText(grid, t.title, at + cv::Point(3, 0), kCaptionPx, kBlack);
          }
        }
        for (int c = 1; c < cols; ++c) {
          cv::line(grid, cv::Point(c * ts, 0), cv::Point(c * ts, grid.rows), cv::Scalar::all(255), 2);
        }
        for (int r = 1; r < rows; ++r) {
          cv::line(grid, cv::Point(0, r * ts), cv::Point(grid.cols, r * ts), cv::Scalar::all(255), 2);
        }
        return grid;
      },
      opts.format);
}

namespace {

Status WritePlotSet(Env& env, const std::string& dir, const EvalResult& r, const char* labels_file,
                    Result<std::string> labels) {
  KESTREL_RETURN_IF_ERROR(env.CreateDirs(dir));
  struct Out {
    const char* file;
    Result<std::string> bytes;
  };
  std::vector<Out> outs;
  outs.push_back({"PR_curve.png", RenderPrCurve(r)});
  outs.push_back({"F1_curve.png", RenderConfidenceCurve(r, ConfidenceCurve::kF1)});
  outs.push_back({"P_curve.png", RenderConfidenceCurve(r, ConfidenceCurve::kPrecision)});
  outs.push_back({"R_curve.png", RenderConfidenceCurve(r, ConfidenceCurve::kRecall)});
  outs.push_back({"confusion_matrix.png", RenderConfusionMatrix(r.confusion, r.settings.class_names, false)});
  outs.push_back(
      {"confusion_matrix_normalized.png", RenderConfusionMatrix(r.confusion, r.settings.class_names, true)});
  outs.push_back({labels_file, std::move(labels)});
  for (Out& o : outs) {
    if (!o.bytes.IsOk()) return o.bytes.GetStatus().WithContext(o.file);
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(dir, o.file), *o.bytes));
  }
  return Status();
}

}  // namespace

Status WritePlots(Env& env, const std::string& dir, const EvalResult& r) {
  LabelStats labels;
  labels.names = r.settings.class_names;
  labels.counts = r.label_counts;
  labels.subtitle =
      std::to_string(r.images) + " images, " + std::to_string(r.instances) + " instances (counts only)";
  return WritePlotSet(env, dir, r, "labels.png", RenderLabelsPlot(labels));
}

Status WritePlots(Env& env, const std::string& dir, const EvalResult& r, const LabelStats& labels) {
  return WritePlotSet(env, dir, r, "labels.jpg", RenderLabelsPlot(labels, GridFormat::kJpeg));
}

}  // namespace kestrel::eval
