// Exact near-duplicate search over 64-bit perceptual hashes (see phash.h):
// all pairs (i, j) with HammingDistance(h[i], h[j]) <= max_distance, in
// sub-quadratic time, plus the split-leakage classification the importer
// turns into findings.
//
// Method: multi-index hashing. Identical hashes are grouped first, so N
// copies of one image cost O(N) to index. The 64 bits are cut into m
// contiguous chunks; by pigeonhole, two hashes within distance k have some
// chunk within distance r = floor(k / m). Each chunk counting-sorts the
// distinct values into 2^bits buckets; a self-join walks bucket pairs
// (v, v ^ mask) for every mask of <= r bits, verifies candidates on all 64
// bits and keeps a pair only in the first chunk that covers it, so every pair
// is reported exactly once. m comes from a cost model per call (k = 6 or 10
// at 100k hashes: 4 chunks of 16 bits), all-pairs when that is cheaper.
// Distinct-value pairs are then expanded to item pairs in index order. When
// they alone exceed max_pairs, it falls back to per-item queries in index
// order (bounded memory, the truncated answer stays a sorted prefix).
//
// Cost: ~0.1 s CPU for 100k hashes at k = 6 (bench/near_dup). Adversarial
// inputs (many distinct hashes sharing chunk values but far apart overall)
// degrade towards N^2 compares, never to wrong answers. Thread-safe (no
// shared state); single-threaded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "data/dataset.h"

namespace kestrel::data {

struct NearDupOptions {
  // Largest Hamming distance that counts as a near duplicate, 0..64. pHash of
  // the same picture re-encoded/resized lands at <= 6; unrelated ~32.
  int max_distance = 6;
  // Stop after this many pairs and set NearDupResult::truncated. Must be >= 1.
  size_t max_pairs = 1'000'000;

  Status Validate() const;
};

// One near-duplicate pair; indices into the input vector, i < j.
struct NearDupPair {
  int32_t i = 0;
  int32_t j = 0;
  int distance = 0;  // Hamming distance, 0..max_distance
  bool operator==(const NearDupPair&) const = default;
};

struct NearDupResult {
  // Sorted by (i, j). When truncated, these are exactly the first
  // options.max_pairs pairs of the full sorted answer.
  std::vector<NearDupPair> pairs;
  bool truncated = false;  // more pairs exist than max_pairs
};

// Fails with kInvalidArgument for bad options or more than INT32_MAX hashes.
Result<NearDupResult> FindNearDuplicates(const std::vector<uint64_t>& hashes,
                                         const NearDupOptions& options = {});

// Same contract, O(N^2) compares. The reference for tests and the benchmark.
Result<NearDupResult> FindNearDuplicatesBruteForce(const std::vector<uint64_t>& hashes,
                                                   const NearDupOptions& options = {});

// A pair annotated with the splits of its two items.
struct SplitNearDupPair {
  NearDupPair pair;
  Split split_i = Split::kUnassigned;
  Split split_j = Split::kUnassigned;
  // True when both items are assigned (train/val/test) and their splits
  // differ: the same picture on both sides of an evaluation = leakage.
  bool cross_split = false;
};

// Annotates `pairs` (same order) with `splits[i]`, `splits[j]`. Fails with
// kInvalidArgument when a pair index is outside `splits`.
Result<std::vector<SplitNearDupPair>> ClassifyBySplit(const std::vector<NearDupPair>& pairs,
                                                      const std::vector<Split>& splits);

}  // namespace kestrel::data
