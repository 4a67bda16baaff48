#include "eval/compare_plots.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "data/codec.h"
#include "eval/box.h"
#include "eval/internal/plot_canvas.h"

namespace kestrel::eval {
namespace {

using internal::Axes;
using internal::LegendEntry;

struct MetricField {
  const char* key;
  double ClassMetrics::*cls;
  double EvalResult::*all;
};
const MetricField kFields[] = {
    {"precision", &ClassMetrics::precision, &EvalResult::precision},
    {"recall", &ClassMetrics::recall, &EvalResult::recall},
    {"map50", &ClassMetrics::ap50, &EvalResult::map50},
    {"map5095", &ClassMetrics::ap5095, &EvalResult::map5095},
};

nlohmann::json Triple(double a, double b) { return {{"a", a}, {"b", b}, {"delta", b - a}}; }

const ClassMetrics* FindClass(const EvalResult& r, int id) {
  for (const auto& c : r.classes) {
    if (c.class_id == id) return &c;
  }
  return nullptr;
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string Num(double v, const char* fmt = "%.4f") {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

}  // namespace

bool ImageIsRight(const std::vector<GroundTruth>& labels, const std::vector<Detection>& preds,
                  double min_conf, double min_iou) {
  std::vector<size_t> order;
  for (size_t i = 0; i < preds.size(); ++i) {
    if (preds[i].score >= min_conf) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return preds[x].score > preds[y].score; });
  std::vector<bool> used(labels.size(), false);
  for (size_t pi : order) {
    const Detection& p = preds[pi];
    double best = min_iou;
    size_t best_j = labels.size();
    for (size_t j = 0; j < labels.size(); ++j) {
      if (used[j] || labels[j].class_id != p.class_id) continue;
      const double iou = Iou(p.box, labels[j].box);
      if (iou >= best && (best_j == labels.size() || iou > best)) {
        best = iou;
        best_j = j;
      }
    }
    if (best_j == labels.size()) return false;  // a false positive at conf >= min_conf
    used[best_j] = true;
  }
  return std::all_of(used.begin(), used.end(), [](bool u) { return u; });
}

nlohmann::json CompareMetricsJson(const EvalResult& a, const EvalResult& b) {
  nlohmann::json overall = nlohmann::json::object();
  for (const auto& f : kFields) overall[f.key] = Triple(a.*(f.all), b.*(f.all));
  overall["fitness"] = Triple(a.fitness, b.fitness);
  nlohmann::json classes = nlohmann::json::array();
  for (const auto& ca : a.classes) {
    const ClassMetrics* cb = FindClass(b, ca.class_id);
    const ClassMetrics zero{};
    const ClassMetrics& rb = cb != nullptr ? *cb : zero;
    nlohmann::json c = {{"class_id", ca.class_id}, {"name", ca.name}, {"instances", ca.instances}};
    for (const auto& f : kFields) c[f.key] = Triple(ca.*(f.cls), rb.*(f.cls));
    c["f1"] = Triple(ca.f1, rb.f1);
    classes.push_back(std::move(c));
  }
  return {{"overall", overall}, {"classes", classes}};
}

std::string CompareMetricsText(const EvalResult& a, const EvalResult& b) {
  char line[256];
  std::string out;
  std::snprintf(line, sizeof(line), "%-20s %-10s %9s %9s %9s\n", "Class", "Metric", "A", "B", "B-A");
  out += line;
  auto rows = [&](const std::string& name, auto get_a, auto get_b) {
    for (const auto& f : kFields) {
      const double va = get_a(f), vb = get_b(f);
      std::snprintf(line, sizeof(line), "%-20s %-10s %9.4f %9.4f %+9.4f\n", name.c_str(), f.key, va, vb,
                    vb - va);
      out += line;
    }
  };
  rows(
      "all", [&](const MetricField& f) { return a.*(f.all); },
      [&](const MetricField& f) { return b.*(f.all); });
  for (const auto& ca : a.classes) {
    const ClassMetrics* cb = FindClass(b, ca.class_id);
    rows(
        ca.name, [&](const MetricField& f) { return ca.*(f.cls); },
        [&](const MetricField& f) { return cb != nullptr ? (*cb).*(f.cls) : 0.0; });
  }
  return out;
}

Result<std::string> RenderPrOverlay(const EvalResult& a, const EvalResult& b, const std::string& label_a,
                                    const std::string& label_b) {
  try {
    Axes ax(cv::Size(900, 700), 0, 1, 0, 1);
    ax.DrawFrame("Mean Precision-Recall Curve (IoU 0.5)", "Recall", "Precision", 0.2, 0.2, 1);
    const cv::Scalar ca = internal::SeriesColor(0), cb = internal::SeriesColor(1);
    ax.Line(a.curves.x, MeanCurvesOf(a).pr_precision, ca, 3);
    ax.Line(b.curves.x, MeanCurvesOf(b).pr_precision, cb, 3);
    ax.Legend({{"A " + label_a + " " + internal::Fixed(a.map50, 3) + " mAP@0.5", ca, 3},
               {"B " + label_b + " " + internal::Fixed(b.map50, 3) + " mAP@0.5", cb, 3}});
    return data::EncodePng(ax.Image());
  } catch (const cv::Exception& e) {
    return Status::Internal(std::string("OpenCV: ") + e.what());
  }
}

std::string Base64(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint32_t(uint8_t(bytes[i])) << 16) | (uint32_t(uint8_t(bytes[i + 1])) << 8) |
                       uint32_t(uint8_t(bytes[i + 2]));
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += kAlphabet[v & 63];
  }
  const size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (rest == 2) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

std::string CompareHtml(const std::string& title, const nlohmann::json& metrics,
                        const std::vector<HtmlFigure>& figures) {
  std::string h =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + HtmlEscape(title) +
      "</title>\n<style>body{font-family:sans-serif;margin:20px}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}.neg{color:#b00}.pos{color:#070}"
      "img{max-width:100%}</style></head><body>\n<h1>" +
      HtmlEscape(title) +
      "</h1>\n<table><tr><th>Class</th><th>Metric</th><th>A</th><th>B</th>"
      "<th>B &minus; A</th></tr>\n";
  auto rows = [&](const std::string& name, const nlohmann::json& m) {
    for (const char* k : {"precision", "recall", "map50", "map5095"}) {
      const double d = m[k]["delta"].get<double>();
      h += "<tr><td>" + HtmlEscape(name) + "</td><td>" + k + "</td><td>" + Num(m[k]["a"].get<double>()) +
           "</td><td>" + Num(m[k]["b"].get<double>()) + "</td><td class=\"" + (d < 0 ? "neg" : "pos") +
           "\">" + Num(d, "%+.4f") + "</td></tr>\n";
    }
  };
  rows("all", metrics["overall"]);
  for (const auto& c : metrics["classes"]) rows(c["name"].get<std::string>(), c);
  h += "</table>\n";
  for (const auto& f : figures) {
    h += "<h2>" + HtmlEscape(f.title) + "</h2>\n<img alt=\"" + HtmlEscape(f.title) +
         "\" src=\"data:image/png;base64," + Base64(f.png) + "\">\n";
  }
  h += "</body></html>\n";
  return h;
}

}  // namespace kestrel::eval
