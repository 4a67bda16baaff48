#include "eval/postprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

void ScaleToOriginal(std::vector<Detection>& dets, const Letterbox& lb, int orig_width, int orig_height) {
  for (Detection& d : dets) d.box = ScaleToOriginal(d.box, lb, orig_width, orig_height);
}

Status NmsOptions::Validate() const {
  if (!(conf >= 0.f && conf < 1.f)) {
    return Status::InvalidArgument("must be in [0, 1), got " + std::to_string(conf), {"", 0, "conf"});
  }
  if (!(iou >= 0.f && iou <= 1.f)) {
    return Status::InvalidArgument("must be in [0, 1], got " + std::to_string(iou), {"", 0, "iou"});
  }
  if (max_det < 1) {
    return Status::InvalidArgument("must be >= 1, got " + std::to_string(max_det), {"", 0, "max_det"});
  }
  if (max_nms < 1) {
    return Status::InvalidArgument("must be >= 1, got " + std::to_string(max_nms), {"", 0, "max_nms"});
  }
  return Status();
}

namespace {

// best = max(best, row), arg = c where row wins; strict '>' keeps the first
// class on ties. A separate function with restrict parameters and a
// branch-free body so GCC vectorizes it (CMakeLists.txt enables the dynamic
// vectorizer cost model for this file): this loop reads all 672,000 scores
// of a [84, 8400] output and dominates decode time.
void UpdateBest(float* __restrict best, int32_t* __restrict arg, const float* __restrict row, size_t n,
                int32_t c) {
  for (size_t a = 0; a < n; ++a) {
    const float r = row[a], b = best[a];
    const int32_t m = -int32_t(r > b);
    best[a] = r > b ? r : b;
    arg[a] = (c & m) | (arg[a] & ~m);
  }
}

// Number of values > conf; a vectorizable integer reduction.
int CountAbove(const float* __restrict row, size_t n, float conf) {
  int count = 0;
  for (size_t a = 0; a < n; ++a) count += row[a] > conf ? 1 : 0;
  return count;
}

// The best score at anchor `a` of a class other than `c` (0 with one
// class). Strided reads, so only for the anchors that pass conf.
float RunnerUp(const float* scores, size_t n, int num_classes, size_t a, int c) {
  float best = 0;
  for (int k = 0; k < num_classes; ++k) {
    if (k != c) best = std::max(best, scores[size_t(k) * n + a]);
  }
  return best;
}

}  // namespace

std::vector<Detection> DecodeYoloOutput(const float* raw, int num_classes, int num_anchors,
                                        const NmsOptions& opts) {
  std::vector<Detection> out;
  if (num_classes <= 0 || num_anchors <= 0) return out;
  const size_t n = size_t(num_anchors);
  const float* scores = raw + 4 * n;
  auto box_of = [&](size_t a) { return BoxFromCxCyWh(raw[a], raw[n + a], raw[2 * n + a], raw[3 * n + a]); };
  const float conf = opts.conf;
  if (opts.multi_label) {
    // Class-major scan (contiguous rows), then a counting sort by anchor so
    // the result is in (anchor, class) order without strided reads.
    std::vector<uint32_t> hit_anchor;
    std::vector<Detection> hits;
    constexpr size_t kBlock = 64;
    for (int c = 0; c < num_classes; ++c) {
      const float* row = scores + size_t(c) * n;
      for (size_t a0 = 0; a0 < n; a0 += kBlock) {
        const size_t a1 = std::min(n, a0 + kBlock);
        if (CountAbove(row + a0, a1 - a0, conf) == 0) continue;  // the common case
        for (size_t a = a0; a < a1; ++a) {
          if (row[a] > conf) {
            hit_anchor.push_back(uint32_t(a));
            hits.push_back(Detection{Box{}, row[a], c});
          }
        }
      }
    }
    std::vector<uint32_t> start(n + 1, 0);
    for (uint32_t a : hit_anchor) ++start[a + 1];
    for (size_t a = 0; a < n; ++a) start[a + 1] += start[a];
    out.resize(hits.size());
    for (size_t i = 0; i < hits.size(); ++i) {
      Detection d = hits[i];
      d.box = box_of(hit_anchor[i]);
      d.runner_up = RunnerUp(scores, n, num_classes, hit_anchor[i], d.class_id);
      out[start[hit_anchor[i]]++] = d;
    }
    return out;
  }
  // Best class per anchor in one class-major pass (contiguous rows; see
  // UpdateBest for why it is a separate function).
  std::vector<float> best(scores, scores + n);
  std::vector<int32_t> arg(n, 0);
  for (int c = 1; c < num_classes; ++c) {
    UpdateBest(best.data(), arg.data(), scores + size_t(c) * n, n, c);
  }
  for (size_t a = 0; a < n; ++a) {
    if (best[a] > conf)
      out.push_back(Detection{box_of(a), best[a], arg[a], RunnerUp(scores, n, num_classes, a, arg[a])});
  }
  return out;
}

namespace {

// Sort key of a float that orders like the float (IEEE-754 trick).
inline uint32_t OrderedBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

struct Kept {
  Box box;
  float area;
  int next;  // previous kept box of the same group, -1 at the end
};

}  // namespace

std::vector<Detection> Nms(std::vector<Detection> candidates, const NmsOptions& opts) {
  std::vector<Detection> out;
  const size_t n = candidates.size();
  if (n == 0 || opts.max_det < 1) return out;
  // Sort once: LSD radix sort (3 x 11 bits) on descending score. Radix
  // sorting is stable, so equal scores keep input order, i.e. the order is
  // (score desc, index asc), and truncating at max_nms equals a stable sort
  // truncated.
  std::vector<uint32_t> keys(n), order(n), tmp_keys(n), tmp_order(n);
  for (size_t i = 0; i < n; ++i) {
    keys[i] = ~OrderedBits(candidates[i].score);
    order[i] = uint32_t(i);
  }
  for (int shift = 0; shift < 33; shift += 11) {
    uint32_t count[2049] = {0};
    for (size_t i = 0; i < n; ++i) ++count[((keys[i] >> shift) & 0x7FFu) + 1];
    for (int b = 0; b < 2048; ++b) count[b + 1] += count[b];
    for (size_t i = 0; i < n; ++i) {
      const uint32_t dst = count[(keys[i] >> shift) & 0x7FFu]++;
      tmp_keys[dst] = keys[i];
      tmp_order[dst] = order[i];
    }
    keys.swap(tmp_keys);
    order.swap(tmp_order);
  }
  const size_t limit = std::min(n, size_t(std::max(1, opts.max_nms)));

  // Greedy NMS: a box survives iff no already kept box (same class unless
  // agnostic) overlaps it by more than opts.iou. Checking only against kept
  // boxes (at most max_det of them, chained per class) makes this
  // O(n * kept) and lets us stop as soon as max_det boxes are kept.
  int max_class = 0;
  if (!opts.agnostic) {
    for (size_t i = 0; i < limit; ++i) {
      max_class = std::max(max_class, candidates[order[i]].class_id);
    }
  }
  std::vector<int> head(size_t(max_class) + 1, -1);
  std::vector<Kept> kept;
  kept.reserve(std::min(limit, size_t(opts.max_det)));
  out.reserve(kept.capacity());
  for (size_t i = 0; i < limit; ++i) {
    const Detection& d = candidates[order[i]];
    const float area = BoxAreaF(d.box);
    int& group = head[opts.agnostic ? 0 : size_t(std::max(0, d.class_id))];
    bool suppressed = false;
    for (int k = group; k >= 0; k = kept[size_t(k)].next) {
      if (IouF(kept[size_t(k)].box, kept[size_t(k)].area, d.box, area) > opts.iou) {
        suppressed = true;
        break;
      }
    }
    if (suppressed) continue;
    kept.push_back(Kept{d.box, area, group});
    group = int(kept.size()) - 1;
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
