// YOLOv8 post-processing on one image's raw output [4 + 80, 8400] (640x640
// input): decode + NMS with Kestrel's implementation vs a naive O(n^2) NMS
// (class-offset trick, full pairwise suppression) on the same candidates,
// one core, measured in the same run. Also checks both keep the same boxes.
//
// Usage: kestrel_bench_eval_nms [iterations=300]
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "eval/postprocess.h"

using kestrel::eval::Box;
using kestrel::eval::Detection;
using kestrel::eval::NmsOptions;

namespace {

// CPU time of this thread: the machine is shared, and wall time would count
// other people's work. Both sides of every ratio are measured the same way.
double ThreadSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

constexpr int kClasses = 80;
constexpr int kAnchors = 8400;

// A plausible raw output: 25 objects, each lighting up ~40 nearby anchors
// with jittered boxes and a high score for its class; every other score is
// sigmoid(N(-10, 1.2)) noise (about 0.5% of them exceed 0.001).
std::vector<float> RawOutput(std::mt19937& rng, bool uniform_scores) {
  std::vector<float> raw(size_t(4 + kClasses) * kAnchors);
  std::uniform_real_distribution<float> u(0, 1);
  std::normal_distribution<float> noise(-10.f, 1.2f);
  for (int a = 0; a < kAnchors; ++a) {
    raw[size_t(a)] = 640 * u(rng);
    raw[size_t(kAnchors + a)] = 640 * u(rng);
    raw[size_t(2 * kAnchors + a)] = 10 + 90 * u(rng);
    raw[size_t(3 * kAnchors + a)] = 10 + 90 * u(rng);
    for (int c = 0; c < kClasses; ++c) {
      raw[size_t(4 + c) * kAnchors + size_t(a)] =
          uniform_scores ? u(rng) : 1.f / (1.f + std::exp(-noise(rng)));
    }
  }
  if (uniform_scores) return raw;
  for (int o = 0; o < 25; ++o) {
    const float cx = 640 * u(rng), cy = 640 * u(rng), w = 20 + 200 * u(rng), h = 20 + 200 * u(rng);
    const int cls = int(rng() % kClasses);
    for (int k = 0; k < 40; ++k) {
      const int a = int(rng() % kAnchors);
      raw[size_t(a)] = cx + 0.1f * w * (u(rng) - 0.5f);
      raw[size_t(kAnchors + a)] = cy + 0.1f * h * (u(rng) - 0.5f);
      raw[size_t(2 * kAnchors + a)] = w * (0.9f + 0.2f * u(rng));
      raw[size_t(3 * kAnchors + a)] = h * (0.9f + 0.2f * u(rng));
      raw[size_t(4 + cls) * kAnchors + size_t(a)] = 0.3f + 0.65f * u(rng);
    }
  }
  return raw;
}

std::vector<Detection> NaiveNms(std::vector<Detection> c, const NmsOptions& o) {
  std::stable_sort(c.begin(), c.end(),
                   [](const Detection& a, const Detection& b) { return a.score > b.score; });
  if (c.size() > size_t(o.max_nms)) c.resize(size_t(o.max_nms));
  std::vector<Box> s(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    const float off = o.agnostic ? 0.f : float(c[i].class_id) * 7680.f;
    s[i] = {c[i].box.x1 + off, c[i].box.y1 + off, c[i].box.x2 + off, c[i].box.y2 + off};
  }
  std::vector<char> removed(c.size(), 0);
  std::vector<Detection> out;
  for (size_t i = 0; i < c.size(); ++i) {
    if (removed[i]) continue;
    out.push_back(c[i]);
    for (size_t j = i + 1; j < c.size(); ++j) {
      if (kestrel::eval::IouF(s[i], kestrel::eval::BoxAreaF(s[i]), s[j], kestrel::eval::BoxAreaF(s[j])) >
          o.iou) {
        removed[j] = 1;
      }
    }
  }
  if (out.size() > size_t(o.max_det)) out.resize(size_t(o.max_det));
  return out;
}

template <typename F>
double MicrosPerCall(int iters, F&& f) {
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = ThreadSeconds();
    for (int i = 0; i < iters; ++i) f(i);
    const double us = (ThreadSeconds() - t0) * 1e6;
    best = std::min(best, us / iters);
  }
  return best;
}

void Scenario(const char* name, bool uniform, const NmsOptions& o, int iters) {
  std::mt19937 rng(42);
  std::vector<std::vector<float>> raws;
  for (int i = 0; i < 8; ++i) raws.push_back(RawOutput(rng, uniform));
  std::vector<std::vector<Detection>> cands;
  size_t n_cand = 0, n_kept = 0;
  for (const auto& r : raws) {
    cands.push_back(kestrel::eval::DecodeYoloOutput(r.data(), kClasses, kAnchors, o));
    n_cand += cands.back().size();
    n_kept += kestrel::eval::Nms(cands.back(), o).size();
  }
  size_t sink = 0;
  const double full = MicrosPerCall(iters, [&](int i) {
    sink += kestrel::eval::PostprocessYolo(raws[size_t(i) % 8].data(), kClasses, kAnchors, o).size();
  });
  const double nms =
      MicrosPerCall(iters, [&](int i) { sink += kestrel::eval::Nms(cands[size_t(i) % 8], o).size(); });
  const int naive_iters = std::max(1, iters / 50);
  const double naive =
      MicrosPerCall(naive_iters, [&](int i) { sink += NaiveNms(cands[size_t(i) % 8], o).size(); });
  bool same = true;
  for (const auto& c : cands) {
    const auto a = kestrel::eval::Nms(c, o), b = NaiveNms(c, o);
    same = same && a.size() == b.size();
    for (size_t k = 0; same && k < a.size(); ++k) {
      same = a[k].score == b[k].score && a[k].class_id == b[k].class_id;
    }
  }
  std::printf(
      "%-34s conf %-5g multi_label %d: %6zu candidates, %3zu kept | decode+NMS %7.1f us | "
      "NMS %7.1f us | naive NMS %9.1f us | NMS speedup %6.1fx | same kept set: %s%s\n",
      name, double(o.conf), int(o.multi_label), n_cand / 8, n_kept / 8, full, nms, naive, naive / nms,
      same ? "yes" : "NO", sink == 0 ? " " : "");
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 300;
  std::printf("raw output [%d, %d] per image, one core, thread CPU time, best of 3 runs\n", 4 + kClasses,
              kAnchors);
  NmsOptions predict;  // conf 0.25, iou 0.7, max_det 300
  NmsOptions val;
  val.conf = 0.001f;
  val.multi_label = true;
  Scenario("realistic (predict)", false, predict, iters);
  Scenario("realistic (val, multi-label)", false, val, iters);
  NmsOptions agnostic = predict;
  agnostic.agnostic = true;
  Scenario("realistic (predict, agnostic)", false, agnostic, iters);
  Scenario("uniform random scores (worst case)", true, predict, iters / 10 + 1);
  return 0;
}
