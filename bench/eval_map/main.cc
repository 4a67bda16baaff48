// mAP over a COCO-val-sized synthetic workload: 5,000 images, ~36,000
// labels, ~500,000 predictions, 80 classes. Prints the fast evaluator's time
// (AddImage for every image + Finalize, one core) and the ratio to the naive
// reference transcription, measured in the same run, plus the largest
// difference between their numbers.
//
// Usage: kestrel_bench_eval_map [images=5000]
#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "eval/metrics.h"
#include "naive_reference.h"

using kestrel::eval::Detection;
using kestrel::eval::DetectionEvaluator;
using kestrel::eval::EvalOptions;
using kestrel::eval::GroundTruth;
using kestrel::eval::naive::Image;

namespace {

// CPU time of this thread: the machine is shared, and wall time would count
// other people's work. Both sides of every ratio are measured the same way.
double ThreadSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double Seconds(double since) { return ThreadSeconds() - since; }

std::vector<Image> Workload(int images, int nc) {
  std::mt19937 rng(123);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<Image> out(static_cast<size_t>(images));
  for (Image& im : out) {
    const int ng = int(rng() % 14) + 1;  // mean 7.5
    for (int g = 0; g < ng; ++g) {
      const float w = 8 + 200 * u(rng) * u(rng), h = 8 + 200 * u(rng) * u(rng);
      const float x = (640 - w) * u(rng), y = (480 - h) * u(rng);
      im.gt.push_back({{x, y, x + w, y + h}, int(rng() % unsigned(nc))});
    }
    // ~100 predictions: up to 3 near each label (the real hit, near
    // duplicates, sometimes the wrong class), the rest scattered low scores.
    for (const GroundTruth& g : im.gt) {
      const float w = g.box.x2 - g.box.x1, h = g.box.y2 - g.box.y1;
      for (int k = int(rng() % 4); k > 0; --k) {
        const float j = 0.15f * u(rng);
        Detection d;
        d.box = {g.box.x1 + j * w * (u(rng) - 0.5f), g.box.y1 + j * h * (u(rng) - 0.5f),
                 g.box.x2 + j * w * (u(rng) - 0.5f), g.box.y2 + j * h * (u(rng) - 0.5f)};
        d.class_id = u(rng) < 0.85f ? g.class_id : int(rng() % unsigned(nc));
        d.score = 0.2f + 0.8f * u(rng);
        im.preds.push_back(d);
      }
    }
    while (im.preds.size() < 100) {
      const float w = 8 + 150 * u(rng), h = 8 + 150 * u(rng);
      const float x = (640 - w) * u(rng), y = (480 - h) * u(rng);
      im.preds.push_back({{x, y, x + w, y + h}, 0.0011f + 0.3f * u(rng) * u(rng), int(rng() % unsigned(nc))});
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int images = argc > 1 ? std::atoi(argv[1]) : 5000;
  const int nc = 80;
  const std::vector<Image> work = Workload(images, nc);
  size_t labels = 0, preds = 0;
  for (const Image& im : work) {
    labels += im.gt.size();
    preds += im.preds.size();
  }
  std::printf("workload: %d images, %zu labels, %zu predictions, %d classes\n", images, labels, preds, nc);

  double best_fast = 1e30, best_finalize = 1e30;
  kestrel::eval::EvalResult fast;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = ThreadSeconds();
    EvalOptions o;
    o.num_classes = nc;
    DetectionEvaluator ev(o);
    for (const Image& im : work) {
      if (!ev.AddImage(im.gt, im.preds).IsOk()) return 1;
    }
    const double t_fin = ThreadSeconds();
    auto r = ev.Finalize();
    if (!r.IsOk()) return 1;
    best_finalize = std::min(best_finalize, Seconds(t_fin));
    best_fast = std::min(best_fast, Seconds(t0));
    fast = std::move(r).Value();
  }
  const double t1 = ThreadSeconds();
  const kestrel::eval::naive::NaiveResult slow = kestrel::eval::naive::Naive(work, nc);
  const double naive_s = Seconds(t1);

  double diff = std::max({std::abs(fast.map50 - slow.map50), std::abs(fast.map5095 - slow.map5095),
                          std::abs(fast.precision - slow.p), std::abs(fast.recall - slow.r)});
  std::printf(
      "fast  (AddImage x %d + Finalize, best of 3, thread CPU): %.3f s  "
      "(incl. confusion matrix + error counts)\n",
      images, best_fast);
  std::printf("      of which Finalize (sort, AP, curves): %.3f s\n", best_finalize);
  std::printf("naive (reference transcription, metrics only): %.3f s\n", naive_s);
  std::printf("speedup: %.1fx\n", naive_s / best_fast);
  std::printf("mAP50 %.6f  mAP50-95 %.6f  P %.6f  R %.6f  max |fast - naive| %.3g\n", fast.map50,
              fast.map5095, fast.precision, fast.recall, diff);
  return diff < 1e-9 ? 0 : 2;
}
