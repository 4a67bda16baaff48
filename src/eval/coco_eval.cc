#include "eval/coco_eval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "eval/ap.h"

namespace kestrel::eval {

namespace {

constexpr int kT = 10;  // IoU thresholds
constexpr int kA = 4;   // area ranges: all, small, medium, large
constexpr int kM = 3;   // maxDets
constexpr int kMaxDets[kM] = {1, 10, 100};
constexpr double kAreaLo[kA] = {0.0, 0.0, 32.0 * 32.0, 96.0 * 96.0};
constexpr double kAreaHi[kA] = {1e10, 32.0 * 32.0, 96.0 * 96.0, 1e10};
constexpr double kSpacing1 = 2.220446049250313e-16;  // numpy.spacing(1)

// numpy.linspace(.5, .95, 10), computed the same way.
std::array<double, kT> CocoIouThresholds() {
  std::array<double, kT> t{};
  const double step = (0.95 - 0.5) / 9.0;
  for (int i = 0; i < kT; ++i) t[size_t(i)] = double(i) * step + 0.5;
  t[kT - 1] = 0.95;
  return t;
}

double WhArea(const Box& b) { return (double(b.x2) - b.x1) * (double(b.y2) - b.y1); }

bool Finite(const Box& b) {
  return std::isfinite(b.x1) && std::isfinite(b.y1) && std::isfinite(b.x2) && std::isfinite(b.y2);
}

}  // namespace

struct CocoEvaluator::State {
  // One evaluated detection of one (image, class, area range).
  struct Rec {
    float score;
    uint16_t matched;  // bit t: matched at threshold t
    uint16_t ignored;  // bit t: ignored at threshold t
  };
  struct Block {
    uint32_t offset;
    uint32_t count;
  };
  struct Cell {  // one (class, area range)
    std::vector<Rec> recs;
    std::vector<Block> blocks;  // one per image that had labels or detections
    int64_t npig = 0;           // non-ignored labels over all images
  };
  int nc = 0;
  std::vector<Cell> cells;  // [class * kA + area]
  std::array<double, kT> thr = CocoIouThresholds();

  void EvaluateImageClass(int c, const std::vector<const GroundTruth*>& gt, std::vector<const Detection*> dt);
};

void CocoEvaluator::State::EvaluateImageClass(int c, const std::vector<const GroundTruth*>& gt,
                                              std::vector<const Detection*> dt) {
  std::stable_sort(dt.begin(), dt.end(),
                   [](const Detection* a, const Detection* b) { return a->score > b->score; });
  if (dt.size() > size_t(kMaxDets[kM - 1])) dt.resize(size_t(kMaxDets[kM - 1]));
  const size_t nd = dt.size();
  std::vector<double> ious(nd * gt.size());
  for (size_t d = 0; d < nd; ++d) {
    for (size_t g = 0; g < gt.size(); ++g) ious[d * gt.size() + g] = Iou(dt[d]->box, gt[g]->box);
  }
  for (int a = 0; a < kA; ++a) {
    Cell& cell = cells[size_t(c) * kA + size_t(a)];
    // Labels: non-ignored first (stable), as COCOeval orders them.
    std::vector<uint32_t> gorder(gt.size());
    std::vector<char> gig(gt.size());
    for (size_t g = 0; g < gt.size(); ++g) {
      const double ar = WhArea(gt[g]->box);
      gig[g] = ar < kAreaLo[a] || ar > kAreaHi[a];
    }
    std::iota(gorder.begin(), gorder.end(), 0u);
    std::stable_sort(gorder.begin(), gorder.end(), [&](uint32_t x, uint32_t y) { return gig[x] < gig[y]; });
    for (size_t g = 0; g < gt.size(); ++g) cell.npig += gig[g] ? 0 : 1;

    std::vector<State::Rec> recs(nd);
    for (size_t d = 0; d < nd; ++d) recs[d].score = dt[d]->score;
    std::vector<char> gtm(gt.size());
    for (int t = 0; t < kT; ++t) {
      std::fill(gtm.begin(), gtm.end(), 0);
      for (size_t d = 0; d < nd; ++d) {
        double iou = std::min(thr[size_t(t)], 1 - 1e-10);
        int m = -1;
        for (uint32_t g : gorder) {
          if (gtm[g]) continue;
          if (m > -1 && !gig[size_t(m)] && gig[g]) break;
          const double v = ious[d * gt.size() + g];
          if (v < iou) continue;
          iou = v;
          m = int(g);
        }
        if (m == -1) {
          // Unmatched detections outside the area range are ignored.
          const double ar = WhArea(dt[d]->box);
          if (ar < kAreaLo[a] || ar > kAreaHi[a]) recs[d].ignored |= uint16_t(1u << t);
          continue;
        }
        gtm[size_t(m)] = 1;
        recs[d].matched |= uint16_t(1u << t);
        if (gig[size_t(m)]) recs[d].ignored |= uint16_t(1u << t);
      }
    }
    cell.blocks.push_back(State::Block{uint32_t(cell.recs.size()), uint32_t(nd)});
    cell.recs.insert(cell.recs.end(), recs.begin(), recs.end());
  }
}

CocoEvaluator::CocoEvaluator(int num_classes) : s_(std::make_unique<State>()) {
  s_->nc = std::max(0, num_classes);
  s_->cells.resize(size_t(s_->nc) * kA);
}
CocoEvaluator::~CocoEvaluator() = default;
CocoEvaluator::CocoEvaluator(CocoEvaluator&&) noexcept = default;
CocoEvaluator& CocoEvaluator::operator=(CocoEvaluator&&) noexcept = default;

Status CocoEvaluator::AddImage(const std::vector<GroundTruth>& gt, const std::vector<Detection>& preds) {
  const int nc = s_->nc;
  std::vector<std::vector<const GroundTruth*>> g_by(static_cast<size_t>(nc));
  std::vector<std::vector<const Detection*>> d_by(static_cast<size_t>(nc));
  for (size_t i = 0; i < gt.size(); ++i) {
    if (gt[i].class_id < 0 || gt[i].class_id >= nc) {
      return Status::InvalidArgument("class id outside [0, nc)",
                                     {"", 0, "labels[" + std::to_string(i) + "].class_id"});
    }
    if (!Finite(gt[i].box)) {
      return Status::InvalidArgument("non-finite box", {"", 0, "labels[" + std::to_string(i) + "].box"});
    }
    g_by[size_t(gt[i].class_id)].push_back(&gt[i]);
  }
  for (size_t i = 0; i < preds.size(); ++i) {
    const std::string at = "predictions[" + std::to_string(i) + "]";
    if (preds[i].class_id < 0 || preds[i].class_id >= nc) {
      return Status::InvalidArgument("class id outside [0, nc)", {"", 0, at + ".class_id"});
    }
    if (!Finite(preds[i].box) || !std::isfinite(preds[i].score)) {
      return Status::InvalidArgument("non-finite value", {"", 0, at});
    }
    d_by[size_t(preds[i].class_id)].push_back(&preds[i]);
  }
  for (int c = 0; c < nc; ++c) {
    if (g_by[size_t(c)].empty() && d_by[size_t(c)].empty()) continue;
    s_->EvaluateImageClass(c, g_by[size_t(c)], std::move(d_by[size_t(c)]));
  }
  return Status();
}

CocoMetrics CocoEvaluator::Evaluate() const {
  const State& s = *s_;
  const size_t nc = size_t(s.nc);
  const std::vector<double> rec_thrs = Linspace01(101);
  // precision[t][r] mean per (class, area, maxdet) and recall[t]; -1 = no labels.
  std::vector<double> ap_mean(nc * kA * kM * kT, -1.0);  // mean over r, per t
  std::vector<double> recall(nc * kA * kM * kT, -1.0);
  auto idx = [&](size_t c, int a, int m, int t) {
    return ((c * kA + size_t(a)) * kM + size_t(m)) * kT + size_t(t);
  };
  std::vector<State::Rec> sel;
  for (size_t c = 0; c < nc; ++c) {
    for (int a = 0; a < kA; ++a) {
      const State::Cell& cell = s.cells[c * kA + size_t(a)];
      if (cell.npig == 0) continue;
      for (int m = 0; m < kM; ++m) {
        sel.clear();
        for (const State::Block& b : cell.blocks) {
          const uint32_t n = std::min<uint32_t>(b.count, uint32_t(kMaxDets[m]));
          sel.insert(sel.end(), cell.recs.begin() + b.offset, cell.recs.begin() + b.offset + n);
        }
        std::stable_sort(sel.begin(), sel.end(),
                         [](const State::Rec& x, const State::Rec& y) { return x.score > y.score; });
        const size_t nd = sel.size();
        std::vector<double> rc(nd), pr(nd);
        for (int t = 0; t < kT; ++t) {
          double tp = 0, fp = 0;
          for (size_t i = 0; i < nd; ++i) {
            const bool ig = (sel[i].ignored >> t) & 1u;
            const bool mt = (sel[i].matched >> t) & 1u;
            tp += (mt && !ig) ? 1 : 0;
            fp += (!mt && !ig) ? 1 : 0;
            rc[i] = tp / double(cell.npig);
            pr[i] = tp / (fp + tp + kSpacing1);
          }
          recall[idx(c, a, m, t)] = nd ? rc[nd - 1] : 0.0;
          for (size_t i = nd; i-- > 1;) {
            if (pr[i] > pr[i - 1]) pr[i - 1] = pr[i];
          }
          double sum = 0;
          size_t i = 0;  // first index with rc[i] >= threshold (searchsorted left)
          for (double r : rec_thrs) {
            while (i < nd && rc[i] < r) ++i;
            if (i >= nd) break;  // the rest stay 0
            sum += pr[i];
          }
          ap_mean[idx(c, a, m, t)] = sum / double(rec_thrs.size());
        }
      }
    }
  }
  // Averages over valid (class, threshold) cells; every recall threshold of a
  // valid cell counts, so averaging the per-t means is the same as COCO's mean.
  auto summarize = [&](const std::vector<double>& v, int a, int m, int only_t) {
    double sum = 0;
    int64_t n = 0;
    for (size_t c = 0; c < nc; ++c) {
      for (int t = 0; t < kT; ++t) {
        if (only_t >= 0 && t != only_t) continue;
        const double x = v[idx(c, a, m, t)];
        if (x < 0) continue;
        sum += x;
        ++n;
      }
    }
    return n ? sum / double(n) : -1.0;
  };
  CocoMetrics out;
  out.stats = {summarize(ap_mean, 0, 2, -1), summarize(ap_mean, 0, 2, 0),  summarize(ap_mean, 0, 2, 5),
               summarize(ap_mean, 1, 2, -1), summarize(ap_mean, 2, 2, -1), summarize(ap_mean, 3, 2, -1),
               summarize(recall, 0, 0, -1),  summarize(recall, 0, 1, -1),  summarize(recall, 0, 2, -1),
               summarize(recall, 1, 2, -1),  summarize(recall, 2, 2, -1),  summarize(recall, 3, 2, -1)};
  out.per_class_ap.assign(nc, -1.0);
  for (size_t c = 0; c < nc; ++c) {
    if (ap_mean[idx(c, 0, 2, 0)] < 0) continue;
    double sum = 0;
    for (int t = 0; t < kT; ++t) sum += ap_mean[idx(c, 0, 2, t)];
    out.per_class_ap[c] = sum / kT;
  }
  return out;
}

namespace {
constexpr const char* kStatNames[12] = {"AP",   "AP50",  "AP75",   "AP_small", "AP_medium", "AP_large",
                                        "AR_1", "AR_10", "AR_100", "AR_small", "AR_medium", "AR_large"};
}  // namespace

nlohmann::json CocoMetricsToJson(const CocoMetrics& m) {
  nlohmann::json j;
  for (size_t i = 0; i < 12; ++i) j[kStatNames[i]] = m.stats[i];
  j["per_class_ap"] = m.per_class_ap;
  return j;
}

std::string CocoSummaryText(const CocoMetrics& m) {
  struct Line {
    const char* kind;
    const char* iou;
    const char* area;
    int dets;
  };
  static const Line kLines[12] = {{"Average Precision  (AP)", "0.50:0.95", "   all", 100},
                                  {"Average Precision  (AP)", "0.50     ", "   all", 100},
                                  {"Average Precision  (AP)", "0.75     ", "   all", 100},
                                  {"Average Precision  (AP)", "0.50:0.95", " small", 100},
                                  {"Average Precision  (AP)", "0.50:0.95", "medium", 100},
                                  {"Average Precision  (AP)", "0.50:0.95", " large", 100},
                                  {"Average Recall     (AR)", "0.50:0.95", "   all", 1},
                                  {"Average Recall     (AR)", "0.50:0.95", "   all", 10},
                                  {"Average Recall     (AR)", "0.50:0.95", "   all", 100},
                                  {"Average Recall     (AR)", "0.50:0.95", " small", 100},
                                  {"Average Recall     (AR)", "0.50:0.95", "medium", 100},
                                  {"Average Recall     (AR)", "0.50:0.95", " large", 100}};
  std::string out;
  char buf[160];
  for (size_t i = 0; i < 12; ++i) {
    std::snprintf(buf, sizeof(buf), " %s @[ IoU=%s | area=%s | maxDets=%3d ] = %.3f\n", kLines[i].kind,
                  kLines[i].iou, kLines[i].area, kLines[i].dets, m.stats[i]);
    out += buf;
  }
  return out;
}

}  // namespace kestrel::eval
