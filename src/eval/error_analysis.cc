#include "eval/error_analysis.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>

namespace kestrel::eval {

void ErrorCounts::Add(const ErrorCounts& o) {
  true_positive += o.true_positive;
  localization += o.localization;
  classification += o.classification;
  both += o.both;
  duplicate += o.duplicate;
  background += o.background;
  missed += o.missed;
}

ErrorAnalyzer::ErrorAnalyzer(int num_classes, ErrorAnalysisOptions opts)
    : opts_(opts), per_class_(size_t(std::max(0, num_classes))) {}

void ErrorAnalyzer::ProcessImage(const std::vector<GroundTruth>& gt, const std::vector<Detection>& preds) {
  std::vector<uint32_t> order;
  for (size_t i = 0; i < preds.size(); ++i) {
    if (preds[i].score > opts_.conf) order.push_back(uint32_t(i));
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return preds[a].score > preds[b].score; });
  std::vector<char> matched(gt.size(), 0);
  for (uint32_t pi : order) {
    const Detection& d = preds[pi];
    ErrorCounts& counts = per_class_[size_t(d.class_id)];
    double best_free = -1.0;  // best unmatched same-class label
    int best_free_index = -1;
    double same = 0.0, other = 0.0;  // highest IoU with same / other class labels
    for (size_t g = 0; g < gt.size(); ++g) {
      const double v = Iou(d.box, gt[g].box);
      if (gt[g].class_id == d.class_id) {
        same = std::max(same, v);
        if (!matched[g] && v >= opts_.fg_iou && v > best_free) {
          best_free = v;
          best_free_index = int(g);
        }
      } else {
        other = std::max(other, v);
      }
    }
    if (best_free_index >= 0) {
      matched[size_t(best_free_index)] = 1;
      ++counts.true_positive;
    } else if (same >= opts_.fg_iou) {
      ++counts.duplicate;
    } else if (other >= opts_.fg_iou) {
      ++counts.classification;
    } else if (same >= opts_.bg_iou) {
      ++counts.localization;
    } else if (other >= opts_.bg_iou) {
      ++counts.both;
    } else {
      ++counts.background;
    }
  }
  for (size_t g = 0; g < gt.size(); ++g) {
    if (!matched[g]) ++per_class_[size_t(gt[g].class_id)].missed;
  }
}

ErrorCounts ErrorAnalyzer::Total() const {
  ErrorCounts t;
  for (const ErrorCounts& c : per_class_) t.Add(c);
  return t;
}

nlohmann::json ErrorCountsToJson(const ErrorCounts& c) {
  return nlohmann::json{{"true_positive", c.true_positive},
                        {"localization", c.localization},
                        {"classification", c.classification},
                        {"both", c.both},
                        {"duplicate", c.duplicate},
                        {"background", c.background},
                        {"missed", c.missed},
                        {"false_positive", c.FalsePositives()}};
}

nlohmann::json ErrorAnalyzer::ToJson() const {
  nlohmann::json per = nlohmann::json::array();
  for (const ErrorCounts& c : per_class_) per.push_back(ErrorCountsToJson(c));
  return nlohmann::json{{"conf", opts_.conf},
                        {"fg_iou", opts_.fg_iou},
                        {"bg_iou", opts_.bg_iou},
                        {"total", ErrorCountsToJson(Total())},
                        {"per_class", std::move(per)}};
}

}  // namespace kestrel::eval
