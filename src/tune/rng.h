// TuneRng: the one random source of the tune module, so that a study's
// suggestions are the same on every platform and standard library.
//
// The engine is std::mt19937_64 (its output sequence is fixed by the C++
// standard); the distributions are written here because the std::
// distributions' algorithms are implementation-defined (libstdc++ and libc++
// return different numbers for the same engine state):
//   Uniform01   the top 53 bits of one draw, times 2^-53: [0, 1)
//   UniformInt  [0, n) by rejection (no modulo bias)
//   Normal      Box-Muller (two Uniform01 draws per value, no caching)
// The transcendental functions (log, sqrt, cos) come from the C library;
// glibc's are correctly rounded or within 1 ulp, so suggestions agree to the
// last bit only within one libm (docs/tune.md "Reproducibility").
//
// Not thread-safe; one TuneRng per suggestion.
#pragma once

#include <cstdint>
#include <random>

namespace kestrel::tune {

// splitmix64 of (study seed, trial number): the seed of trial `number`'s
// suggestion, so trial n's draws depend only on the seed and n (not on how
// many suggestions were made before a restart).
uint64_t TrialSeed(uint64_t study_seed, int64_t trial_number);

class TuneRng {
 public:
  explicit TuneRng(uint64_t seed) : engine_(seed) {}

  double Uniform01();
  // REQUIRES: n >= 1.
  uint64_t UniformInt(uint64_t n);
  // A standard normal draw.
  double Normal();

 private:
  std::mt19937_64 engine_;
};

}  // namespace kestrel::tune
