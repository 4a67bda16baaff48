// `kestrel compare` helpers (torch-free): the metric deltas of two evaluations
// of the same split (B - A), the overlaid mean PR curve, the per-image
// "right" rule, and the self-contained HTML report. docs/evaluation.md.
//
// Thread-safe (pure functions).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "eval/detection.h"
#include "eval/metrics.h"

namespace kestrel::eval {

// An image is "right" for a model when, over its predictions with
// score >= min_conf, matched one-to-one greedily in descending score to
// unmatched same-class labels with IoU >= min_iou (the highest-IoU label),
// every label is matched and no such prediction is left unmatched.
bool ImageIsRight(const std::vector<GroundTruth>& labels, const std::vector<Detection>& preds,
                  double min_conf = 0.25, double min_iou = 0.5);
// ImageIsRight at its defaults in words (compare.json's and the API's "right_rule").
inline constexpr const char* kRightRule =
    "every label matched one-to-one by a same-class prediction with IoU >= 0.5 and conf >= 0.25, "
    "and no prediction with conf >= 0.25 unmatched";

// {"overall": {"map50": {"a", "b", "delta"}, ...}, "classes": [{"class_id",
// "name", "map50": {"a", "b", "delta"}, ...}]} with delta = b - a. Classes are
// those of `a` (both results come from the same split, so the same set).
nlohmann::json CompareMetricsJson(const EvalResult& a, const EvalResult& b);

// The side-by-side table: one row per metric overall, then per class.
std::string CompareMetricsText(const EvalResult& a, const EvalResult& b);

// Mean PR curve (IoU 0.5) of `a` and `b` on one plot, legend with mAP50.
Result<std::string> RenderPrOverlay(const EvalResult& a, const EvalResult& b, const std::string& label_a,
                                    const std::string& label_b);

// Standard base64 (RFC 4648, padded).
std::string Base64(std::string_view bytes);

// The report: `metrics` from CompareMetricsJson, each figure an inline PNG.
struct HtmlFigure {
  std::string title;
  std::string png;  // encoded bytes
};
std::string CompareHtml(const std::string& title, const nlohmann::json& metrics,
                        const std::vector<HtmlFigure>& figures);

}  // namespace kestrel::eval
