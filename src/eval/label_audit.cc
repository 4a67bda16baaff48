#include "eval/label_audit.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>

#include "eval/box.h"

namespace kestrel::eval {
namespace {

// One candidate (label, prediction) pair of an image.
struct Pair {
  int label;
  int pred;
  double iou;
  double key;  // greedy order, highest first
};

// Greedy one-to-one matching over `pairs` (sorted by key, then label, then
// prediction for a stable order), skipping used labels and predictions.
std::vector<Pair> Greedy(std::vector<Pair> pairs, std::vector<bool>& label_used,
                         std::vector<bool>& pred_used) {
  std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    return std::tie(b.key, a.label, a.pred) < std::tie(a.key, b.label, b.pred);
  });
  std::vector<Pair> out;
  for (const Pair& p : pairs) {
    if (label_used[p.label] || pred_used[p.pred]) continue;
    label_used[p.label] = pred_used[p.pred] = true;
    out.push_back(p);
  }
  return out;
}

// The next value of `rng` in [0, 1): the engine's output is fixed by the
// standard, the library's distributions are not (results must not change
// with the C++ library).
double Uniform(std::mt19937_64& rng) { return double(rng() >> 11) * (1.0 / 9007199254740992.0); }
size_t Below(std::mt19937_64& rng, size_t n) { return n == 0 ? 0 : size_t(rng() % n); }

}  // namespace

const char* AuditKindName(AuditKind kind) {
  switch (kind) {
    case AuditKind::kOk:
      return "ok";
    case AuditKind::kMissing:
      return "missing";
    case AuditKind::kSpurious:
      return "spurious";
    case AuditKind::kWrongClass:
      return "wrong_class";
    case AuditKind::kLocalisation:
      return "localisation";
  }
  return "ok";
}

std::vector<AuditItem> AuditLabels(const std::vector<std::vector<GroundTruth>>& labels,
                                   const std::vector<std::vector<Detection>>& predictions,
                                   const AuditOptions& options) {
  std::vector<AuditItem> items;
  for (size_t img = 0; img < labels.size(); ++img) {
    const std::vector<GroundTruth>& gts = labels[img];
    static const std::vector<Detection> kNone;
    const std::vector<Detection>& all = img < predictions.size() ? predictions[img] : kNone;
    std::vector<int> keep;  // predictions at or above conf
    for (size_t p = 0; p < all.size(); ++p) {
      if (all[p].score >= options.conf) keep.push_back(int(p));
    }
    const size_t ng = gts.size(), np = keep.size();
    std::vector<double> iou(ng * np);
    for (size_t g = 0; g < ng; ++g) {
      for (size_t k = 0; k < np; ++k) iou[g * np + k] = Iou(gts[g].box, all[keep[k]].box);
    }
    auto item_for = [&](int g, int k, AuditKind kind, double score) {
      AuditItem it;
      it.image = img;
      it.kind = kind;
      it.score = std::clamp(score, 0.0, 1.0);
      if (g >= 0) {
        it.label = g;
        it.label_class = gts[g].class_id;
        it.label_box = gts[g].box;
      }
      if (k >= 0) {
        const Detection& d = all[keep[k]];
        it.prediction = keep[k];
        it.predicted_class = d.class_id;
        it.predicted_score = d.score;
        it.predicted_box = d.box;
        it.iou = g >= 0 ? iou[g * np + k] : 0.0;
      }
      items.push_back(it);
    };
    std::vector<bool> g_used(ng, false), p_used(np, false);

    // 1. Same object: IoU >= match_iou, the most confident prediction first.
    std::vector<Pair> strict;
    for (size_t g = 0; g < ng; ++g) {
      for (size_t k = 0; k < np; ++k) {
        if (iou[g * np + k] >= options.match_iou) {
          strict.push_back({int(g), int(k), iou[g * np + k], all[keep[k]].score + 1e-3 * iou[g * np + k]});
        }
      }
    }
    for (const Pair& m : Greedy(strict, g_used, p_used)) {
      const Detection& d = all[keep[m.pred]];
      if (d.class_id == gts[m.label].class_id) {
        // Confirmed: suspicion from how weakly (score) and loosely (IoU).
        item_for(m.label, m.pred, AuditKind::kOk, 0.5 * (1.0 - d.score) * (1.0 - m.iou));
        continue;
      }
      // Another class here; how sure is the model of the label's class?
      double same = 0;
      for (size_t k = 0; k < np; ++k) {
        const Detection& o = all[keep[k]];
        if (o.class_id == gts[m.label].class_id && iou[size_t(m.label) * np + k] >= options.match_iou) {
          same = std::max(same, double(o.score));
        }
      }
      item_for(m.label, m.pred, AuditKind::kWrongClass, d.score * (1.0 - same));
    }
    // Predictions on a matched label's object (the class-aware NMS keeps one
    // box per class) are explained by it: not missing boxes.
    for (size_t k = 0; k < np; ++k) {
      for (size_t g = 0; g < ng && !p_used[k]; ++g) {
        if (g_used[g] && iou[g * np + k] >= options.match_iou) p_used[k] = true;
      }
    }
    // 2. The same object misplaced: the leftovers at IoU >= loose_iou.
    std::vector<Pair> loose;
    for (size_t g = 0; g < ng; ++g) {
      if (g_used[g]) continue;
      for (size_t k = 0; k < np; ++k) {
        if (!p_used[k] && iou[g * np + k] >= options.loose_iou) {
          loose.push_back({int(g), int(k), iou[g * np + k], all[keep[k]].score * iou[g * np + k]});
        }
      }
    }
    for (const Pair& m : Greedy(loose, g_used, p_used)) {
      item_for(m.label, m.pred, AuditKind::kLocalisation, all[keep[m.pred]].score * (1.0 - m.iou / 2));
    }
    // 3. Confident predictions nothing explains: missing labels.
    for (size_t k = 0; k < np; ++k) {
      if (!p_used[k]) item_for(-1, int(k), AuditKind::kMissing, all[keep[k]].score);
    }
    // 4. Labels nothing supports: spurious, less so where any prediction,
    // also one below conf, overlaps (a real object the model is unsure of
    // still gets a weak box; an empty place gets none).
    for (size_t g = 0; g < ng; ++g) {
      if (g_used[g]) continue;
      double support = 0;
      for (const Detection& d : all) support = std::max(support, d.score * Iou(gts[g].box, d.box));
      item_for(int(g), -1, AuditKind::kSpurious, 1.0 - std::sqrt(support));
    }
  }
  std::stable_sort(items.begin(), items.end(), [](const AuditItem& a, const AuditItem& b) {
    return std::tie(b.score, a.image, a.label, a.prediction) <
           std::tie(a.score, b.image, b.label, b.prediction);
  });
  return items;
}

PlantedLabels PlantLabelErrors(const std::vector<std::vector<GroundTruth>>& truth,
                               const std::vector<std::pair<int, int>>& image_sizes, int num_classes,
                               double rate, uint64_t seed) {
  PlantedLabels out;
  out.labels = truth;
  std::mt19937_64 rng(seed);
  std::vector<std::pair<size_t, size_t>> boxes;  // (image, label)
  for (size_t i = 0; i < truth.size(); ++i) {
    for (size_t j = 0; j < truth[i].size(); ++j) boxes.emplace_back(i, j);
  }
  size_t n = size_t(std::lround(rate * double(boxes.size())));
  if (rate > 0 && n == 0 && !boxes.empty()) n = 1;
  n = std::min(n, boxes.size() / 3);
  // Fisher-Yates with the engine's own output.
  for (size_t i = boxes.size(); i > 1; --i) std::swap(boxes[i - 1], boxes[Below(rng, i)]);
  std::vector<std::vector<bool>> removed(truth.size());
  for (size_t i = 0; i < truth.size(); ++i) removed[i].assign(truth[i].size(), false);
  for (size_t e = 0; e < 3 * n; ++e) {
    const auto [img, j] = boxes[e];
    GroundTruth& gt = out.labels[img][j];
    if (e < n) {  // removed: the model's box there is a missing label
      removed[img][j] = true;
      out.errors.push_back({img, AuditKind::kMissing, gt.box, gt.box});
    } else if (e < 2 * n) {  // relabelled
      if (num_classes > 1) {
        gt.class_id =
            int((size_t(gt.class_id) + 1 + Below(rng, size_t(num_classes - 1))) % size_t(num_classes));
      }
      out.errors.push_back({img, AuditKind::kWrongClass, gt.box, gt.box});
    } else {  // shifted along one axis by 35-50 % of the box's size
      const Box before = gt.box;
      const double f = 0.35 + 0.15 * Uniform(rng);
      const double sign = (rng() & 1) ? 1.0 : -1.0;
      const double w = gt.box.x2 - gt.box.x1, h = gt.box.y2 - gt.box.y1;
      const double dx = (rng() & 1) ? sign * f * w : 0.0;
      const double dy = dx == 0.0 ? sign * f * h : 0.0;
      const double W = image_sizes[img].first, H = image_sizes[img].second;
      // Keep the moved box inside the image: move the other way when it would leave.
      double x1 = gt.box.x1 + dx, y1 = gt.box.y1 + dy;
      if (x1 < 0 || x1 + w > W) x1 = gt.box.x1 - dx;
      if (y1 < 0 || y1 + h > H) y1 = gt.box.y1 - dy;
      gt.box = Box{float(std::clamp(x1, 0.0, std::max(0.0, W - w))),
                   float(std::clamp(y1, 0.0, std::max(0.0, H - h))), 0, 0};
      gt.box.x2 = float(gt.box.x1 + w);
      gt.box.y2 = float(gt.box.y1 + h);
      out.errors.push_back({img, AuditKind::kLocalisation, gt.box, before});
    }
  }
  for (size_t i = 0; i < truth.size(); ++i) {
    std::vector<GroundTruth> kept;
    for (size_t j = 0; j < out.labels[i].size(); ++j) {
      if (!removed[i][j]) kept.push_back(out.labels[i][j]);
    }
    out.labels[i] = std::move(kept);
  }
  // Added: a box of 10-30 % of the image's side at a random place.
  for (size_t e = 0; e < n && !truth.empty(); ++e) {
    const size_t img = Below(rng, truth.size());
    const double W = image_sizes[img].first, H = image_sizes[img].second;
    const double w = W * (0.1 + 0.2 * Uniform(rng)), h = H * (0.1 + 0.2 * Uniform(rng));
    const double x = (W - w) * Uniform(rng), y = (H - h) * Uniform(rng);
    GroundTruth gt;
    gt.box = Box{float(x), float(y), float(x + w), float(y + h)};
    gt.class_id = int(Below(rng, size_t(std::max(1, num_classes))));
    out.labels[img].push_back(gt);
    out.errors.push_back({img, AuditKind::kSpurious, gt.box, gt.box});
  }
  return out;
}

AuditRecall RecallAt(const std::vector<AuditItem>& items, const std::vector<PlantedError>& errors,
                     double share) {
  AuditRecall r;
  r.share = share;
  r.planted = errors.size();
  r.reviewed = std::min(items.size(), size_t(std::ceil(share * double(items.size()))));
  r.per_kind.assign(5, {0, 0});
  for (const PlantedError& e : errors) {
    ++r.per_kind[size_t(e.kind)].second;
    bool found = false;
    for (size_t i = 0; i < r.reviewed && !found; ++i) {
      const AuditItem& it = items[i];
      if (it.image != e.image || it.kind == AuditKind::kOk) continue;
      const Box& b = it.kind == AuditKind::kMissing ? it.predicted_box : it.label_box;
      found = Iou(b, e.box) >= 0.5;
    }
    if (found) {
      ++r.found;
      ++r.per_kind[size_t(e.kind)].first;
    }
  }
  r.recall = r.planted == 0 ? 0.0 : double(r.found) / double(r.planted);
  return r;
}

nlohmann::json AuditItemJson(const AuditItem& item) {
  auto box = [](const Box& b) { return nlohmann::json::array({b.x1, b.y1, b.x2, b.y2}); };
  nlohmann::json j = {{"kind", AuditKindName(item.kind)}, {"score", item.score}, {"image", item.image}};
  if (item.label >= 0) {
    j["label"] = {{"index", item.label}, {"class", item.label_class}, {"box", box(item.label_box)}};
  }
  if (item.prediction >= 0) {
    j["prediction"] = {{"index", item.prediction},
                       {"class", item.predicted_class},
                       {"score", item.predicted_score},
                       {"box", box(item.predicted_box)}};
  }
  if (item.label >= 0 && item.prediction >= 0) j["iou"] = item.iou;
  return j;
}

}  // namespace kestrel::eval
