#include "eval/confusion.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace kestrel::eval {

ConfusionMatrix::ConfusionMatrix(int num_classes, double conf, double iou)
    : nc_(std::max(0, num_classes)), conf_(conf), iou_(iou), m_(size_t(nc_ + 1) * size_t(nc_ + 1), 0) {}

void ConfusionMatrix::ProcessImage(const std::vector<GroundTruth>& gt, const std::vector<Detection>& preds) {
  const size_t n = size_t(nc_) + 1;
  for (const ConfusionMatch& m : MatchImage(gt, preds)) ++m_[size_t(m.row) * n + size_t(m.col)];
}

std::vector<ConfusionMatch> ConfusionMatrix::MatchImage(const std::vector<GroundTruth>& gt,
                                                        const std::vector<Detection>& preds) const {
  const int bg = nc_;
  std::vector<ConfusionMatch> out;
  std::vector<int> dets;  // indices into preds with score > conf
  for (size_t i = 0; i < preds.size(); ++i) {
    if (preds[i].score > conf_) dets.push_back(int(i));
  }
  if (gt.empty()) {
    for (int d : dets) out.push_back({-1, d, preds[size_t(d)].class_id, bg});
    return out;
  }
  struct Pair {
    uint32_t g, d;
    double iou;
  };
  std::vector<Pair> pairs;
  for (size_t g = 0; g < gt.size(); ++g) {
    for (size_t d = 0; d < dets.size(); ++d) {
      const double v = eval::Iou(gt[g].box, preds[size_t(dets[d])].box);
      if (v > iou_) pairs.push_back(Pair{uint32_t(g), uint32_t(d), v});
    }
  }
  auto by_iou = [](const Pair& a, const Pair& b) { return a.iou > b.iou; };
  std::stable_sort(pairs.begin(), pairs.end(), by_iou);
  // Best pair per prediction, then best remaining pair per label.
  std::vector<char> det_used(dets.size(), 0);
  std::vector<Pair> per_det;
  for (const Pair& p : pairs) {
    if (!det_used[p.d]) {
      det_used[p.d] = 1;
      per_det.push_back(p);
    }
  }
  std::vector<int> gt_match(gt.size(), -1);
  std::vector<char> det_matched(dets.size(), 0);
  for (const Pair& p : per_det) {  // still IoU-descending
    if (gt_match[p.g] < 0) {
      gt_match[p.g] = int(p.d);
      det_matched[p.d] = 1;
    }
  }
  for (size_t g = 0; g < gt.size(); ++g) {
    const int gc = gt[g].class_id;
    if (gt_match[g] >= 0) {
      const int d = dets[size_t(gt_match[g])];
      out.push_back({int(g), d, preds[size_t(d)].class_id, gc});
    } else {
      out.push_back({int(g), -1, bg, gc});
    }
  }
  for (size_t d = 0; d < dets.size(); ++d) {
    if (!det_matched[d]) out.push_back({-1, dets[d], preds[size_t(dets[d])].class_id, bg});
  }
  return out;
}

Result<ConfusionMatrix> ConfusionMatrix::FromJson(const nlohmann::json& j) {
  const ErrorLocation at{"", 0, "confusion"};
  try {
    ConfusionMatrix cm(j.at("nc").get<int>(), j.at("conf").get<double>(), j.at("iou").get<double>());
    const auto rows = j.at("matrix").get<std::vector<std::vector<int64_t>>>();
    const size_t n = size_t(cm.nc_) + 1;
    if (cm.nc_ < 0 || rows.size() != n) return Status::Corruption("the matrix is not (nc+1) x (nc+1)", at);
    for (size_t p = 0; p < n; ++p) {
      if (rows[p].size() != n) return Status::Corruption("the matrix is not (nc+1) x (nc+1)", at);
      for (size_t g = 0; g < n; ++g) cm.m_[p * n + g] = rows[p][g];
    }
    return cm;
  } catch (const nlohmann::json::exception& e) {
    return Status::Corruption(std::string("not a confusion matrix: ") + e.what(), at);
  }
}

void ConfusionMatrix::Merge(const ConfusionMatrix& other) {
  if (other.nc_ != nc_) return;
  for (size_t i = 0; i < m_.size(); ++i) m_[i] += other.m_[i];
}

std::vector<double> ConfusionMatrix::ColumnNormalized() const {
  const size_t n = size_t(nc_) + 1;
  std::vector<double> out(m_.size(), 0.0);
  for (size_t g = 0; g < n; ++g) {
    int64_t sum = 0;
    for (size_t p = 0; p < n; ++p) sum += m_[p * n + g];
    if (sum == 0) continue;
    for (size_t p = 0; p < n; ++p) out[p * n + g] = double(m_[p * n + g]) / double(sum);
  }
  return out;
}

void ConfusionMatrix::TpFpFn(std::vector<int64_t>* tp, std::vector<int64_t>* fp,
                             std::vector<int64_t>* fn) const {
  const size_t n = size_t(nc_) + 1;
  tp->assign(size_t(nc_), 0);
  fp->assign(size_t(nc_), 0);
  fn->assign(size_t(nc_), 0);
  for (size_t c = 0; c < size_t(nc_); ++c) {
    (*tp)[c] = m_[c * n + c];
    for (size_t k = 0; k < n; ++k) {
      if (k == c) continue;
      (*fp)[c] += m_[c * n + k];
      (*fn)[c] += m_[k * n + c];
    }
  }
}

nlohmann::json ConfusionMatrix::ToJson() const {
  const size_t n = size_t(nc_) + 1;
  nlohmann::json rows = nlohmann::json::array();
  for (size_t p = 0; p < n; ++p) {
    rows.push_back(std::vector<int64_t>(m_.begin() + long(p * n), m_.begin() + long((p + 1) * n)));
  }
  return nlohmann::json{{"conf", conf_}, {"iou", iou_}, {"nc", nc_}, {"matrix", std::move(rows)}};
}

}  // namespace kestrel::eval
