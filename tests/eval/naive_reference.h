// A straightforward transcription of the reference metric algorithm
// (docs/metrics.md): all (label, prediction) pairs per threshold, sorted by
// IoU, unique per prediction, then the lowest prediction index per label;
// numpy.interp by binary search; direct box filter. Written independently of
// src/eval's fast path so the two can be compared (equivalence_test.cc and
// bench/eval_map). Header-only; test/bench code, not a library.
#pragma once

#include <algorithm>
#include <array>
#include <numeric>
#include <vector>

#include "eval/detection.h"

namespace kestrel::eval::naive {

struct Image {
  std::vector<GroundTruth> gt;
  std::vector<Detection> preds;
};

struct NaiveResult {
  std::vector<int> classes;
  std::vector<std::array<double, 10>> ap;
  double map50 = 0, map5095 = 0, p = 0, r = 0;
};

// numpy.interp by binary search (independent of eval::InterpAscending).
inline double NpInterp(double q, const std::vector<double>& xp, const std::vector<double>& fp, double left,
                       double right) {
  const size_t n = xp.size();
  if (q < xp[0]) return left;
  if (q > xp[n - 1]) return right;
  const size_t j = size_t(std::upper_bound(xp.begin(), xp.end(), q) - xp.begin()) - 1;
  if (j == n - 1 || xp[j] == q) return fp[j];
  return (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j]) * (q - xp[j]) + fp[j];
}

inline double NaiveAp(const std::vector<double>& rec, const std::vector<double>& prec) {
  std::vector<double> mrec = {0.0}, mpre = {1.0};
  mrec.insert(mrec.end(), rec.begin(), rec.end());
  mpre.insert(mpre.end(), prec.begin(), prec.end());
  mrec.push_back(1.0);
  mpre.push_back(0.0);
  for (size_t i = mpre.size() - 1; i > 0; --i) mpre[i - 1] = std::max(mpre[i - 1], mpre[i]);
  double ap = 0;
  double prev_x = 0, prev_y = NpInterp(0, mrec, mpre, 1, 0);
  for (int k = 1; k <= 100; ++k) {
    const double x = k == 100 ? 1.0 : k * (1.0 / 100);
    const double y = NpInterp(x, mrec, mpre, 1, 0);
    ap += (x - prev_x) * (prev_y + y) / 2;
    prev_x = x;
    prev_y = y;
  }
  return ap;
}

inline NaiveResult Naive(const std::vector<Image>& images, int nc) {
  const double thr[10] = {0.50, 0.55, 0.60, 0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 0.95};
  struct Stat {
    double conf;
    int cls;
    std::array<bool, 10> tp;
  };
  std::vector<Stat> stats;
  std::vector<int> n_labels(size_t(nc), 0);
  for (const Image& im : images) {
    for (const GroundTruth& g : im.gt) ++n_labels[size_t(g.class_id)];
    std::vector<Detection> p = im.preds;
    std::stable_sort(p.begin(), p.end(),
                     [](const Detection& a, const Detection& b) { return a.score > b.score; });
    std::vector<std::array<bool, 10>> correct(p.size());
    for (int t = 0; t < 10; ++t) {
      struct Pair {
        size_t l, d;
        double iou;
      };
      std::vector<Pair> pairs;  // label-major, like numpy.nonzero
      for (size_t l = 0; l < im.gt.size(); ++l) {
        for (size_t d = 0; d < p.size(); ++d) {
          const double iou = im.gt[l].class_id == p[d].class_id ? Iou(im.gt[l].box, p[d].box) : 0;
          if (iou >= thr[t]) pairs.push_back({l, d, iou});
        }
      }
      std::stable_sort(pairs.begin(), pairs.end(),
                       [](const Pair& a, const Pair& b) { return a.iou > b.iou; });
      std::vector<Pair> first_per_pred;
      std::vector<bool> seen_d(p.size(), false);
      for (const Pair& q : pairs) {
        if (!seen_d[q.d]) {
          seen_d[q.d] = true;
          first_per_pred.push_back(q);
        }
      }
      std::sort(first_per_pred.begin(), first_per_pred.end(),
                [](const Pair& a, const Pair& b) { return a.d < b.d; });
      std::vector<bool> seen_l(im.gt.size(), false);
      for (const Pair& q : first_per_pred) {
        if (!seen_l[q.l]) {
          seen_l[q.l] = true;
          correct[q.d][size_t(t)] = true;
        }
      }
    }
    for (size_t d = 0; d < p.size(); ++d) stats.push_back({p[d].score, p[d].class_id, correct[d]});
  }
  std::stable_sort(stats.begin(), stats.end(),
                   [](const Stat& a, const Stat& b) { return float(a.conf) > float(b.conf); });
  NaiveResult res;
  std::vector<double> x(1000);
  for (int k = 0; k < 1000; ++k) x[size_t(k)] = k * (1.0 / 999);
  x[999] = 1.0;
  std::vector<std::vector<double>> pc, rc;
  for (int c = 0; c < nc; ++c) {
    if (n_labels[size_t(c)] == 0) continue;
    res.classes.push_back(c);
    std::array<double, 10> ap{};
    std::vector<double> negconf, rec0, prec0;
    std::vector<double> pcurve(1000, 0.0), rcurve(1000, 0.0);
    for (int t = 0; t < 10; ++t) {
      std::vector<double> rec, prec;
      double tp = 0, fp = 0;
      for (const Stat& s : stats) {
        if (s.cls != c) continue;
        if (s.tp[size_t(t)])
          tp += 1;
        else
          fp += 1;
        rec.push_back(tp / (n_labels[size_t(c)] + 1e-16));
        prec.push_back(tp / (tp + fp));
        if (t == 0) negconf.push_back(-s.conf);
      }
      if (rec.empty()) break;
      ap[size_t(t)] = NaiveAp(rec, prec);
      if (t == 0) {
        rec0 = rec;
        prec0 = prec;
      }
    }
    if (!negconf.empty()) {
      for (int k = 0; k < 1000; ++k) {
        rcurve[size_t(k)] = NpInterp(-x[size_t(k)], negconf, rec0, 0, rec0.back());
        pcurve[size_t(k)] = NpInterp(-x[size_t(k)], negconf, prec0, 1, prec0.back());
      }
    }
    res.ap.push_back(ap);
    pc.push_back(pcurve);
    rc.push_back(rcurve);
  }
  const size_t k = res.classes.size();
  if (k == 0) return res;
  std::vector<double> f1(1000, 0.0);
  for (size_t i = 0; i < 1000; ++i) {
    for (size_t c = 0; c < k; ++c) f1[i] += 2 * pc[c][i] * rc[c][i] / (pc[c][i] + rc[c][i] + 1e-16);
    f1[i] /= double(k);
  }
  std::vector<double> sm(1000);
  for (int i = 0; i < 1000; ++i) {
    double s = 0;
    for (int j = i - 50; j <= i + 50; ++j) s += f1[size_t(std::clamp(j, 0, 999))] * (1.0 / 101);
    sm[size_t(i)] = s;
  }
  const size_t best = size_t(std::max_element(sm.begin(), sm.end()) - sm.begin());
  for (size_t c = 0; c < k; ++c) {
    res.p += pc[c][best] / double(k);
    res.r += rc[c][best] / double(k);
    res.map50 += res.ap[c][0] / double(k);
    for (double a : res.ap[c]) res.map5095 += a / double(k * 10);
  }
  return res;
}

}  // namespace kestrel::eval::naive
