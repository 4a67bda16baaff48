#include "eval/postprocess.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

namespace kestrel::eval {

Letterbox ComputeLetterbox(int orig_width, int orig_height, int input_width, int input_height,
                           bool scale_up) {
  double r = std::min(double(input_height) / orig_height, double(input_width) / orig_width);
  if (!scale_up) r = std::min(r, 1.0);
  // std::nearbyint rounds half to even like Python's round(), which the
  // reference letterbox uses.
  const double new_w = std::nearbyint(orig_width * r);
  const double new_h = std::nearbyint(orig_height * r);
  Letterbox lb;
  lb.scale = r;
  lb.pad_x = std::nearbyint((input_width - new_w) / 2.0 - 0.1);
  lb.pad_y = std::nearbyint((input_height - new_h) / 2.0 - 0.1);
  return lb;
}

Box ScaleToOriginal(const Box& b, const Letterbox& lb, int orig_width, int orig_height) {
  const Box m{float((b.x1 - lb.pad_x) / lb.scale), float((b.y1 - lb.pad_y) / lb.scale),
              float((b.x2 - lb.pad_x) / lb.scale), float((b.y2 - lb.pad_y) / lb.scale)};
  return ClipBox(m, orig_width, orig_height);
}

void ScaleToOriginal(std::vector<Detection>& dets, const Letterbox& lb, int orig_width,
                     int orig_height) {
  for (Detection& d : dets) d.box = ScaleToOriginal(d.box, lb, orig_width, orig_height);
}

Status NmsOptions::Validate() const {
  if (!(conf >= 0.f && conf < 1.f)) {
    return Status::InvalidArgument("must be in [0, 1), got " + std::to_string(conf),
                                   {"", 0, "conf"});
  }
  if (!(iou >= 0.f && iou <= 1.f)) {
    return Status::InvalidArgument("must be in [0, 1], got " + std::to_string(iou),
                                   {"", 0, "iou"});
  }
  if (max_det < 1) {
    return Status::InvalidArgument("must be >= 1, got " + std::to_string(max_det),
                                   {"", 0, "max_det"});
  }
  if (max_nms < 1) {
    return Status::InvalidArgument("must be >= 1, got " + std::to_string(max_nms),
                                   {"", 0, "max_nms"});
  }
  return Status();
}

std::vector<Detection> DecodeYoloOutput(const float* raw, int num_classes, int num_anchors,
                                        const NmsOptions& opts) {
  std::vector<Detection> out;
  if (num_classes <= 0 || num_anchors <= 0) return out;
  const size_t a_count = size_t(num_anchors);
  const float* scores = raw + 4 * a_count;
  // Pass 1, class-major (contiguous rows, vectorizes): the best score per
  // anchor. Most anchors of a real image fail the threshold and are never
  // visited again.
  std::vector<float> best(scores, scores + a_count);
  for (int c = 1; c < num_classes; ++c) {
    const float* row = scores + size_t(c) * a_count;
    for (size_t a = 0; a < a_count; ++a) best[a] = std::max(best[a], row[a]);
  }
  // Pass 2, anchor-major over the surviving anchors only.
  for (size_t a = 0; a < a_count; ++a) {
    if (!(best[a] > opts.conf)) continue;
    const Box box = BoxFromCxCyWh(raw[a], raw[a_count + a], raw[2 * a_count + a],
                                  raw[3 * a_count + a]);
    if (opts.multi_label) {
      for (int c = 0; c < num_classes; ++c) {
        const float s = scores[size_t(c) * a_count + a];
        if (s > opts.conf) out.push_back(Detection{box, s, c});
      }
    } else {
      int best_c = 0;
      for (int c = 0; c < num_classes; ++c) {
        if (scores[size_t(c) * a_count + a] == best[a]) {
          best_c = c;
          break;
        }
      }
      out.push_back(Detection{box, best[a], best_c});
    }
  }
  return out;
}

namespace {

struct Kept {
  Box box;
  float area;
};

}  // namespace

std::vector<Detection> Nms(std::vector<Detection> candidates, const NmsOptions& opts) {
  std::vector<Detection> out;
  const size_t n = candidates.size();
  if (n == 0 || opts.max_det < 1) return out;
  // Sort keys once: (score desc, input index asc) is a total order, so a
  // partial sort for the max_nms cap equals a stable sort truncated.
  struct Key {
    float score;
    uint32_t index;
  };
  std::vector<Key> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = Key{candidates[i].score, uint32_t(i)};
  auto by_score = [](const Key& a, const Key& b) {
    return a.score > b.score || (a.score == b.score && a.index < b.index);
  };
  const size_t limit = std::min(n, size_t(std::max(1, opts.max_nms)));
  if (limit < n) {
    std::partial_sort(order.begin(), order.begin() + long(limit), order.end(), by_score);
    order.resize(limit);
  } else {
    std::sort(order.begin(), order.end(), by_score);
  }

  // Greedy NMS: a box survives iff no already kept box (same class unless
  // agnostic) overlaps it by more than opts.iou. Checking only against kept
  // boxes (at most max_det of them) makes this O(n * kept) and lets us stop
  // as soon as max_det boxes are kept.
  int max_class = 0;
  if (!opts.agnostic) {
    for (const Key& k : order) max_class = std::max(max_class, candidates[k.index].class_id);
  }
  std::vector<std::vector<Kept>> kept(size_t(max_class) + 1);
  out.reserve(std::min(limit, size_t(opts.max_det)));
  for (const Key& k : order) {
    const Detection& d = candidates[k.index];
    const float area = BoxAreaF(d.box);
    std::vector<Kept>& group = kept[opts.agnostic ? 0 : size_t(std::max(0, d.class_id))];
    bool suppressed = false;
    for (const Kept& g : group) {
      if (IouF(g.box, g.area, d.box, area) > opts.iou) {
        suppressed = true;
        break;
      }
    }
    if (suppressed) continue;
    group.push_back(Kept{d.box, area});
    out.push_back(d);
    if (out.size() >= size_t(opts.max_det)) break;
  }
  return out;
}

std::vector<Detection> PostprocessYolo(const float* raw, int num_classes, int num_anchors,
                                       const NmsOptions& opts) {
  return Nms(DecodeYoloOutput(raw, num_classes, num_anchors, opts), opts);
}

}  // namespace kestrel::eval
