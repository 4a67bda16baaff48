#include "train/autobatch.h"

#include <cmath>
#include <cstdio>

namespace kestrel::train {

std::vector<int> AutoBatchSizes(int64_t total_bytes) {
  std::vector<int> sizes = {1, 2, 4, 8, 16};
  if (total_bytes >= (int64_t{16} << 30)) {
    sizes.push_back(32);
    sizes.push_back(64);
  }
  return sizes;
}

namespace {
std::string Gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / double(int64_t{1} << 30));
  return buf;
}
}  // namespace

AutoBatchChoice ChooseAutoBatch(const std::vector<AutoBatchProbe>& probes, int64_t total_bytes,
                                double fraction, int fallback) {
  AutoBatchChoice c;
  auto fall_back = [&](const std::string& why) {
    c.batch = fallback;
    c.fallback = true;
    c.predicted_fraction = 0;
    c.why = why + "; using batch=" + std::to_string(fallback);
    return c;
  };
  if (total_bytes <= 0) return fall_back("device memory unknown");
  std::vector<const AutoBatchProbe*> points;
  int first_oom = 0;  // batch of the first probe that ran out of memory, 0 = none
  for (const auto& p : probes) {
    if (p.out_of_memory) {
      if (first_oom == 0) first_oom = p.batch;
      continue;
    }
    if (p.batch < 1 || p.used_bytes <= 0) continue;
    if (!points.empty() && p.used_bytes <= points.back()->used_bytes) continue;
    points.push_back(&p);
  }
  if (points.size() < 2) {
    return fall_back("fewer than 2 usable memory measurements (" + std::to_string(points.size()) + ")");
  }
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto* p : points) {
    const double x = p->batch, y = double(p->used_bytes);
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  const double n = double(points.size());
  const double den = n * sxx - sx * sx;
  if (den <= 0) return fall_back("the measured batch sizes are all equal");
  const double slope = (n * sxy - sx * sy) / den;
  const double intercept = (sy - slope * sx) / n;
  if (!(slope > 0)) return fall_back("device memory did not grow with the batch size");
  const double target = fraction * double(total_bytes);
  const double raw = std::floor((target - intercept) / slope);
  if (!(raw >= 1)) {
    return fall_back("even batch 1 is predicted above " + std::to_string(int(std::lround(fraction * 100))) +
                     "% of " + Gib(double(total_bytes)));
  }
  if (raw > kAutoBatchMax) {
    return fall_back("predicted batch " + std::to_string(int64_t(raw)) + " is above " +
                     std::to_string(kAutoBatchMax));
  }
  int batch = int(raw);
  std::string capped;
  if (first_oom > 0 && batch >= first_oom) {
    int below = 0;
    for (const auto* p : points) {
      if (p->batch < first_oom && p->batch > below) below = p->batch;
    }
    if (below < 1) return fall_back("batch " + std::to_string(first_oom) + " ran out of memory");
    capped = " (batch " + std::to_string(first_oom) + " ran out of memory: capped at " +
             std::to_string(below) + ")";
    batch = below;
  }
  c.batch = batch;
  c.predicted_fraction = (intercept + slope * batch) / double(total_bytes);
  c.why = "fit " + Gib(intercept) + " + " + Gib(slope) + " per image over " + std::to_string(points.size()) +
          " sizes; batch " + std::to_string(batch) + " predicted at " +
          std::to_string(int(std::lround(c.predicted_fraction * 100))) + "% of " + Gib(double(total_bytes)) +
          capped;
  return c;
}

}  // namespace kestrel::train
