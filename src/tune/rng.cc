#include "tune/rng.h"

#include <cassert>
#include <cmath>
#include <numbers>

namespace kestrel::tune {

namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t TrialSeed(uint64_t study_seed, int64_t trial_number) {
  return SplitMix64(SplitMix64(study_seed) ^ static_cast<uint64_t>(trial_number));
}

double TuneRng::Uniform01() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

uint64_t TuneRng::UniformInt(uint64_t n) {
  assert(n >= 1);
  // Reject the top partial block of the 2^64 range so every value in [0, n)
  // has the same number of preimages.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x = engine_();
  while (x >= limit) x = engine_();
  return x % n;
}

double TuneRng::Normal() {
  // 1 - U is in (0, 1], so the log is finite.
  const double u1 = 1.0 - Uniform01();
  const double u2 = Uniform01();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace kestrel::tune
