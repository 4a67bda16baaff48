#include "data/near_dup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>
#include <vector>

namespace kestrel::data {
namespace {

// Flips `bits` distinct random bits of h.
uint64_t Flip(uint64_t h, int bits, std::mt19937_64& rng) {
  uint64_t mask = 0;
  while (std::popcount(mask) < bits) mask |= uint64_t{1} << (rng() % 64);
  return h ^ mask;
}

// Random hashes, plus planted near-duplicates at distances 0..12 and tight
// random clusters, shuffled.
std::vector<uint64_t> PlantedHashes(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> h;
  while (static_cast<int>(h.size()) < n) {
    const uint64_t base = rng();
    h.push_back(base);
    const uint64_t kind = rng() % 10;
    if (kind < 3) {
      h.push_back(Flip(base, static_cast<int>(rng() % 13), rng));
    } else if (kind == 3) {
      const int members = 2 + static_cast<int>(rng() % 8);
      for (int m = 0; m < members; ++m) h.push_back(Flip(base, static_cast<int>(rng() % 6), rng));
    }
  }
  h.resize(n);
  std::shuffle(h.begin(), h.end(), rng);
  return h;
}

void ExpectSameAsBruteForce(const std::vector<uint64_t>& h, const NearDupOptions& o) {
  auto fast = FindNearDuplicates(h, o);
  auto slow = FindNearDuplicatesBruteForce(h, o);
  ASSERT_TRUE(fast.IsOk()) << fast.GetStatus().ToString();
  ASSERT_TRUE(slow.IsOk()) << slow.GetStatus().ToString();
  EXPECT_EQ(fast->truncated, slow->truncated) << "k=" << o.max_distance;
  ASSERT_EQ(fast->pairs.size(), slow->pairs.size()) << "k=" << o.max_distance;
  EXPECT_TRUE(fast->pairs == slow->pairs) << "k=" << o.max_distance;
}

TEST(NearDupTest, MatchesBruteForceOnPlantedDuplicates) {
  const std::vector<uint64_t> h = PlantedHashes(4000, 1);
  for (int k : {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12}) {
    NearDupOptions o;
    o.max_distance = k;
    ExpectSameAsBruteForce(h, o);
  }
  auto r = FindNearDuplicates(h, {});
  ASSERT_TRUE(r.IsOk());
  EXPECT_GT(r->pairs.size(), 500u);  // the planted ones were found
}

TEST(NearDupTest, MatchesBruteForceForLargeDistances) {
  const std::vector<uint64_t> h = PlantedHashes(600, 2);
  for (int k : {16, 20, 24, 32, 40, 64}) {
    NearDupOptions o;
    o.max_distance = k;
    ExpectSameAsBruteForce(h, o);
  }
}

TEST(NearDupTest, MatchesBruteForceOnSeveralSeeds) {
  for (uint64_t seed = 10; seed < 20; ++seed) {
    const std::vector<uint64_t> h = PlantedHashes(1500, seed);
    NearDupOptions o;
    o.max_distance = static_cast<int>(seed % 11);
    ExpectSameAsBruteForce(h, o);
  }
}

TEST(NearDupTest, PairsAreSortedWithILessThanJ) {
  auto r = FindNearDuplicates(PlantedHashes(3000, 3), {});
  ASSERT_TRUE(r.IsOk());
  for (size_t k = 0; k < r->pairs.size(); ++k) {
    const NearDupPair& p = r->pairs[k];
    EXPECT_LT(p.i, p.j);
    EXPECT_LE(p.distance, 6);
    if (k > 0) {
      const NearDupPair& q = r->pairs[k - 1];
      EXPECT_TRUE(q.i < p.i || (q.i == p.i && q.j < p.j));
    }
  }
}

TEST(NearDupTest, EmptyAndSingleInputs) {
  auto r = FindNearDuplicates({}, {});
  ASSERT_TRUE(r.IsOk());
  EXPECT_TRUE(r->pairs.empty());
  EXPECT_FALSE(r->truncated);
  r = FindNearDuplicates({42}, {});
  ASSERT_TRUE(r.IsOk());
  EXPECT_TRUE(r->pairs.empty());
}

TEST(NearDupTest, ManyIdenticalHashesGiveAllPairs) {
  std::vector<uint64_t> h(800, 0xDEADBEEFCAFEF00Dull);
  h.push_back(0xDEADBEEFCAFEF00Dull ^ 0x7);  // distance 3 from all of them
  h.push_back(0x0123456789ABCDEFull);        // far away
  NearDupOptions o;
  o.max_pairs = 10'000'000;
  ExpectSameAsBruteForce(h, o);
  auto r = FindNearDuplicates(h, o);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->pairs.size(), 801u * 800u / 2u);
  EXPECT_FALSE(r->truncated);
}

TEST(NearDupTest, IdenticalHashExplosionIsCappedAndTruncationReported) {
  // 20k copies = ~2e8 pairs; the cap must stop the work early.
  std::vector<uint64_t> h(20'000, 7);
  NearDupOptions o;
  o.max_pairs = 1000;
  auto r = FindNearDuplicates(h, o);
  ASSERT_TRUE(r.IsOk());
  EXPECT_TRUE(r->truncated);
  ASSERT_EQ(r->pairs.size(), 1000u);
  // The prefix of the full sorted answer: (0, 1) ... (0, 1000).
  EXPECT_EQ(r->pairs.front(), (NearDupPair{0, 1, 0}));
  EXPECT_EQ(r->pairs.back(), (NearDupPair{0, 1000, 0}));
}

TEST(NearDupTest, TruncatedAnswerIsPrefixOfFullAnswer) {
  const std::vector<uint64_t> h = PlantedHashes(3000, 4);
  auto full = FindNearDuplicates(h, {});
  ASSERT_TRUE(full.IsOk());
  const size_t total = full->pairs.size();
  ASSERT_GT(total, 10u);
  for (size_t cap : {size_t{1}, size_t{7}, total - 1, total, total + 1}) {
    NearDupOptions o;
    o.max_pairs = cap;
    ExpectSameAsBruteForce(h, o);
    auto r = FindNearDuplicates(h, o);
    ASSERT_TRUE(r.IsOk());
    EXPECT_EQ(r->truncated, cap < total) << cap;
    ASSERT_EQ(r->pairs.size(), std::min(cap, total));
    EXPECT_TRUE(std::equal(r->pairs.begin(), r->pairs.end(), full->pairs.begin()));
  }
}

// Every hash shares its low 32 bits: the chunk buckets for those bits hold
// everything. Still exact.
TEST(NearDupTest, SharedChunkValuesStayExact) {
  std::mt19937_64 rng(5);
  std::vector<uint64_t> h;
  for (int i = 0; i < 2000; ++i) h.push_back((rng() << 32) | 0x12345678u);
  for (int i = 0; i < 200; ++i) h.push_back(Flip(h[i], 1 + i % 8, rng));
  for (int k : {0, 3, 6, 10}) {
    NearDupOptions o;
    o.max_distance = k;
    ExpectSameAsBruteForce(h, o);
  }
}

TEST(NearDupTest, RejectsBadOptions) {
  NearDupOptions o;
  o.max_distance = -1;
  auto r = FindNearDuplicates({1, 2}, o);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.GetStatus().Where().field, "max_distance");
  o.max_distance = 65;
  EXPECT_FALSE(FindNearDuplicatesBruteForce({1, 2}, o).IsOk());
  o = {};
  o.max_pairs = 0;
  r = FindNearDuplicates({1, 2}, o);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Where().field, "max_pairs");
}

TEST(ClassifyBySplitTest, MarksCrossSplitPairs) {
  const std::vector<Split> splits = {Split::kTrain, Split::kTrain, Split::kVal, Split::kTest,
                                     Split::kUnassigned};
  const std::vector<NearDupPair> pairs = {{0, 1, 2}, {0, 2, 3}, {2, 3, 0}, {1, 4, 1}, {3, 4, 5}};
  auto r = ClassifyBySplit(pairs, splits);
  ASSERT_TRUE(r.IsOk());
  ASSERT_EQ(r->size(), pairs.size());
  EXPECT_FALSE((*r)[0].cross_split);  // train/train
  EXPECT_TRUE((*r)[1].cross_split);   // train/val: leakage
  EXPECT_EQ((*r)[1].split_i, Split::kTrain);
  EXPECT_EQ((*r)[1].split_j, Split::kVal);
  EXPECT_EQ((*r)[1].pair, pairs[1]);
  EXPECT_TRUE((*r)[2].cross_split);   // val/test
  EXPECT_FALSE((*r)[3].cross_split);  // unassigned is not leakage (yet)
  EXPECT_FALSE((*r)[4].cross_split);
}

TEST(ClassifyBySplitTest, RejectsIndexOutsideLabels) {
  auto r = ClassifyBySplit({{0, 5, 1}}, {Split::kTrain, Split::kVal});
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kestrel::data
