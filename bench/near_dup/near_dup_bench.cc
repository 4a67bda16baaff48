// Times FindNearDuplicates (multi-index hashing) against the brute-force
// reference, both measured in this run, on random 64-bit hashes with planted
// near-duplicates (10% of items get a copy at distance 0..max_distance+2).
//
// Usage: near_dup_bench [large_n=100000] [small_n=10000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "data/near_dup.h"

namespace {

using kestrel::data::FindNearDuplicates;
using kestrel::data::FindNearDuplicatesBruteForce;
using kestrel::data::NearDupOptions;
using kestrel::data::NearDupResult;

std::vector<uint64_t> Hashes(int n, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> h;
  h.reserve(n);
  while (static_cast<int>(h.size()) < n) {
    const uint64_t base = rng();
    h.push_back(base);
    if (rng() % 10 == 0 && static_cast<int>(h.size()) < n) {
      uint64_t mask = 0;
      const int flips = static_cast<int>(rng() % (k + 3));
      while (__builtin_popcountll(mask) < flips) mask |= uint64_t{1} << (rng() % 64);
      h.push_back(base ^ mask);
    }
  }
  return h;
}

// Process CPU seconds of f(): on a shared machine wall time overstates cost.
template <typename F>
double CpuSeconds(F&& f) {
  const std::clock_t c0 = std::clock();
  f();
  return static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
}

template <typename F>
double BestSeconds(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double>(t1 - t0).count());
  }
  return best;
}

NearDupResult Run(bool brute, const std::vector<uint64_t>& h, int k) {
  NearDupOptions o;
  o.max_distance = k;
  auto r = brute ? FindNearDuplicatesBruteForce(h, o) : FindNearDuplicates(h, o);
  if (!r.IsOk()) {
    std::fprintf(stderr, "%s\n", r.GetStatus().ToString().c_str());
    std::exit(1);
  }
  return std::move(r).Value();
}

}  // namespace

int main(int argc, char** argv) {
  const int large = argc > 1 ? std::atoi(argv[1]) : 100'000;
  const int small = argc > 2 ? std::atoi(argv[2]) : 10'000;
  std::printf("%-8s %3s %8s %10s %10s %10s %9s %s\n", "n", "k", "pairs", "index_s", "index_cpu", "brute_s",
              "speedup", "same");
  for (int k : {6, 10}) {
    const std::vector<uint64_t> h = Hashes(small, k, 1);
    NearDupResult fast, slow;
    const double t_index = BestSeconds(3, [&] { fast = Run(false, h, k); });
    const double cpu_index = CpuSeconds([&] { fast = Run(false, h, k); });
    const double t_brute = BestSeconds(1, [&] { slow = Run(true, h, k); });
    std::printf("%-8d %3d %8zu %10.4f %10.4f %10.4f %8.1fx %s\n", small, k, fast.pairs.size(), t_index,
                cpu_index, t_brute, t_brute / t_index, fast.pairs == slow.pairs ? "yes" : "NO");
  }
  for (int k : {6, 10}) {
    const std::vector<uint64_t> h = Hashes(large, k, 2);
    NearDupResult fast;
    const double t_index = BestSeconds(1, [&] { fast = Run(false, h, k); });
    const double cpu_index = CpuSeconds([&] { fast = Run(false, h, k); });
    std::printf("%-8d %3d %8zu %10.4f %10.4f %10s %9s %s\n", large, k, fast.pairs.size(), t_index, cpu_index,
                "-", "-", "-");
  }
  return 0;
}
