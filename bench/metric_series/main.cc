// GET /api/jobs/{id}/metrics's downsampling (app::Downsample) on 1,000,000
// points with 10 single-step spikes, for chart widths 800, 1920 and a zoomed
// window; also the baseline every downsampler pays: one copy of the points.
// Reports per-call thread CPU milliseconds (median of the runs) and checks
// that every spike survived and at most 2 points per column came back.
//
// Usage: kestrel_bench_metric_series [runs=21]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "app/metric_series.h"

using kestrel::app::Downsample;
using kestrel::app::Downsampled;
using kestrel::app::SeriesPoint;

namespace {

// CPU time of this thread: the machine is shared, wall time would count
// other people's work.
double ThreadSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

template <typename F>
double MedianMs(int runs, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const double t0 = ThreadSeconds();
    f();
    ms.push_back(1e3 * (ThreadSeconds() - t0));
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  constexpr int64_t kPoints = 1'000'000;
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> u(0.9, 1.1);
  std::vector<SeriesPoint> pts(kPoints);
  for (int64_t i = 0; i < kPoints; ++i) pts[static_cast<size_t>(i)] = {i + 1, u(rng)};
  std::set<int64_t> spikes;
  for (int k = 0; k < 10; ++k) {
    const int64_t x = 31'337 + k * 97'001;
    pts[static_cast<size_t>(x - 1)].y = k % 2 == 0 ? 40.0 : -40.0;
    spikes.insert(x);
  }
  std::vector<SeriesPoint> copy;
  const double copy_ms = MedianMs(runs, [&] { copy = pts; });
  std::printf("baseline: copy of %lld points: %.2f ms\n", static_cast<long long>(kPoints), copy_ms);
  bool ok = true;
  struct Case {
    const char* what;
    int64_t width;
    int64_t from, to;  // 0 = the whole series
  };
  for (const Case c : {Case{"whole run, 800 columns", 800, 0, 0}, Case{"whole run, 1920 columns", 1920, 0, 0},
                       Case{"zoom 200k..600k, 1920 columns", 1920, 200'000, 600'000}}) {
    Downsampled d;
    const double ms = MedianMs(
        runs, [&] { d = c.from == 0 ? Downsample(pts, c.width) : Downsample(pts, c.width, c.from, c.to); });
    size_t kept = 0, expected = 0;
    for (int64_t s : spikes) {
      if (c.from != 0 && (s < c.from || s > c.to)) continue;
      ++expected;
      kept += std::any_of(d.points.begin(), d.points.end(), [s](const SeriesPoint& p) { return p.x == s; });
    }
    const bool good = kept == expected && static_cast<int64_t>(d.points.size()) <= 2 * c.width;
    ok = ok && good;
    std::printf("%s: %lld points in window -> %zu points, %zu/%zu spikes kept: %.2f ms%s\n", c.what,
                static_cast<long long>(d.in_window), d.points.size(), kept, expected, ms,
                good ? "" : "  FAILED");
  }
  // The route's other costs for a long run: 20 series x 100,000 steps as
  // 100,000 step events (one per step, every series' value): folding them
  // (a job's first request) and the document of a kept fold at width 600
  // (every later request), built and serialized.
  constexpr int64_t kSteps = 100'000;
  std::vector<kestrel::store::EventRecord> events(kSteps);
  for (int64_t i = 0; i < kSteps; ++i) {
    nlohmann::json values = nlohmann::json::object();
    for (int k = 0; k < 20; ++k) values["iter/s" + std::to_string(100 + k).substr(1)] = u(rng) * (k + 1);
    auto& ev = events[static_cast<size_t>(i)];
    ev = {i + 1,
          1,
          1,
          "metric",
          nlohmann::json{{"type", "step"}, {"x", i + 1}, {"epoch", 1}, {"values", values}}.dump(),
          0};
  }
  kestrel::app::MetricSeriesBuilder fold;
  const double fold_ms = MedianMs(std::max(1, runs / 7), [&] {
    fold = {};
    for (const auto& ev : events) fold.Add(ev);
  });
  kestrel::app::MetricsQuery q;
  q.width = 600;
  size_t bytes = 0;
  const double doc_ms =
      MedianMs(runs, [&] { bytes = kestrel::app::JobMetricsJson(1, fold, q).dump().size(); });
  std::printf(
      "20 series x %lld steps: fold of the events %.0f ms (a job's first request); document at width 600 "
      "(%zu bytes) %.2f ms (each later request)\n",
      static_cast<long long>(kSteps), fold_ms, bytes, doc_ms);
  return ok ? 0 : 1;
}
