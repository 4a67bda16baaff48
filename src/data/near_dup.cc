#include "data/near_dup.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

namespace kestrel::data {
namespace {

// Chunk tables beyond 2^20 buckets cost more to clear and walk than they save.
constexpr int kMaxChunkBits = 20;

// A pair of distinct hash values (ids into the distinct-value array), u < v.
struct ValuePair {
  uint32_t u = 0;
  uint32_t v = 0;
  int distance = 0;
};

struct Chunk {
  int shift = 0;                  // lowest bit of the chunk within the hash
  int bits = 0;                   // width, 1..kMaxChunkBits
  uint64_t mask = 0;              // chunk bits in place (for per-chunk distances)
  std::vector<uint32_t> offsets;  // [2^bits + 1] bucket starts into vals/ids
  std::vector<uint64_t> vals;     // distinct values grouped by chunk value
  std::vector<uint32_t> ids;      // their ids, parallel to vals
  std::vector<uint32_t> probes;   // all bits-wide masks with popcount <= radius

  uint32_t Value(uint64_t h) const {
    return static_cast<uint32_t>((h >> shift) & ((uint64_t{1} << bits) - 1));
  }
};

struct Plan {
  int chunks = 0;  // 0 = compare all pairs of distinct values
  int radius = 0;  // per-chunk search radius, floor(k / chunks)
};

double Binomial(int n, int k) {
  double c = 1;
  for (int i = 1; i <= k; ++i) c = c * (n - k + i) / i;
  return c;
}

// Bits of chunk t when 64 bits are cut into m nearly equal parts.
int ChunkBits(int m, int t) { return 64 / m + (t < 64 % m ? 1 : 0); }

// Picks the chunk count with the lowest modeled cost of the self-join: per
// chunk and probe mask, one pass over the buckets plus the compares between
// bucket pairs (distinct values spread uniformly).
Plan ChoosePlan(double distinct, int k) {
  Plan best;  // all pairs
  double best_cost = distinct * distinct / 2;
  for (int m = 1; m <= 64; ++m) {
    if (ChunkBits(m, 0) > kMaxChunkBits) continue;
    const int r = k / m;
    double cost = 0;
    for (int t = 0; t < m; ++t) {
      const int b = ChunkBits(m, t);
      double probes = 0;
      for (int e = 0; e <= std::min(r, b); ++e) probes += Binomial(b, e);
      const double buckets = std::ldexp(1.0, b);
      cost += probes * (buckets + distinct * distinct / buckets / 2) + buckets + distinct;
    }
    if (cost < best_cost) {
      best_cost = cost;
      best = Plan{m, r};
    }
  }
  return best;
}

// Appends prefix | every mask over bits [from, bits) with <= left bits set.
void EnumerateProbes(int bits, uint32_t prefix, int from, int left, std::vector<uint32_t>& out) {
  out.push_back(prefix);
  if (left == 0) return;
  for (int b = from; b < bits; ++b) {
    EnumerateProbes(bits, prefix | (uint32_t{1} << b), b + 1, left - 1, out);
  }
}

// Multi-index over distinct hash values. Two ways to use it:
//  - SelfJoin: all pairs at once, walking bucket pairs (v, v ^ probe)
//    sequentially; cache-friendly, the fast path.
//  - Query: the neighbours of one value; random bucket access, but lets the
//    caller stream results in index order with bounded memory.
// Both report a pair only from the first chunk whose probe set covers it,
// so every pair comes out exactly once.
class MultiIndex {
 public:
  MultiIndex(const std::vector<uint64_t>& values, int max_distance, Plan plan)
      : values_(values), k_(max_distance), plan_(plan) {
    int shift = 0;
    chunks_.resize(plan.chunks);
    for (int t = 0; t < plan.chunks; ++t) {
      Chunk& c = chunks_[t];
      c.shift = shift;
      c.bits = ChunkBits(plan.chunks, t);
      c.mask = ((uint64_t{1} << c.bits) - 1) << c.shift;
      shift += c.bits;
      EnumerateProbes(c.bits, 0, 0, std::min(plan.radius, c.bits), c.probes);
      // Counting sort of the distinct values by this chunk.
      c.offsets.assign((size_t{1} << c.bits) + 1, 0);
      for (uint64_t v : values_) ++c.offsets[c.Value(v) + 1];
      std::partial_sum(c.offsets.begin(), c.offsets.end(), c.offsets.begin());
      c.vals.resize(values_.size());
      c.ids.resize(values_.size());
      std::vector<uint32_t> fill(c.offsets.begin(), c.offsets.end() - 1);
      for (uint32_t id = 0; id < values_.size(); ++id) {
        const uint32_t slot = fill[c.Value(values_[id])]++;
        c.vals[slot] = values_[id];
        c.ids[slot] = id;
      }
    }
  }

  // Appends every pair of distinct values within k. Returns false, leaving
  // `out` partial, as soon as more than `budget` pairs exist.
  bool SelfJoin(size_t budget, std::vector<ValuePair>& out) const {
    if (chunks_.empty()) {
      for (uint32_t a = 0; a < values_.size(); ++a) {
        for (uint32_t b = a + 1; b < values_.size(); ++b) {
          const int d = std::popcount(values_[a] ^ values_[b]);
          if (d > k_) continue;
          if (out.size() == budget) return false;
          out.push_back({a, b, d});
        }
      }
      return true;
    }
    for (size_t t = 0; t < chunks_.size(); ++t) {
      const Chunk& c = chunks_[t];
      const uint32_t buckets = uint32_t{1} << c.bits;
      auto check = [&](uint32_t p, uint32_t q) {
        const uint64_t x = c.vals[p] ^ c.vals[q];
        const int d = std::popcount(x);
        if (d > k_ || FoundInEarlierChunk(x, t)) return true;
        if (out.size() == budget) return false;
        out.push_back({std::min(c.ids[p], c.ids[q]), std::max(c.ids[p], c.ids[q]), d});
        return true;
      };
      for (uint32_t probe : c.probes) {
        if (probe == 0) {  // pairs inside one bucket
          for (uint32_t v = 0; v < buckets; ++v) {
            const uint32_t end = c.offsets[v + 1];
            for (uint32_t p = c.offsets[v]; p < end; ++p) {
              for (uint32_t q = p + 1; q < end; ++q) {
                if (!check(p, q)) return false;
              }
            }
          }
          continue;
        }
        // Each unordered bucket pair (v, v ^ probe) once: v runs over the
        // values with the probe's top bit clear.
        const uint32_t top = std::bit_floor(probe);
        for (uint32_t high = 0; high < buckets; high += 2 * top) {
          for (uint32_t v = high; v < high + top; ++v) {
            const uint32_t v_begin = c.offsets[v], v_end = c.offsets[v + 1];
            if (v_begin == v_end) continue;
            const uint32_t w = v ^ probe;
            const uint32_t w_begin = c.offsets[w], w_end = c.offsets[w + 1];
            for (uint32_t p = v_begin; p < v_end; ++p) {
              for (uint32_t q = w_begin; q < w_end; ++q) {
                if (!check(p, q)) return false;
              }
            }
          }
        }
      }
    }
    return true;
  }

  // Appends (distinct-value id, distance) for every value within k of q,
  // each exactly once.
  void Query(uint64_t q, std::vector<std::pair<uint32_t, int>>& out) const {
    if (chunks_.empty()) {
      for (uint32_t id = 0; id < values_.size(); ++id) {
        const int d = std::popcount(q ^ values_[id]);
        if (d <= k_) out.emplace_back(id, d);
      }
      return;
    }
    for (size_t t = 0; t < chunks_.size(); ++t) {
      const Chunk& c = chunks_[t];
      const uint32_t qc = c.Value(q);
      for (uint32_t probe : c.probes) {
        const uint32_t bucket = qc ^ probe;
        for (uint32_t p = c.offsets[bucket]; p < c.offsets[bucket + 1]; ++p) {
          const uint64_t x = q ^ c.vals[p];
          const int d = std::popcount(x);
          if (d > k_ || FoundInEarlierChunk(x, t)) continue;
          out.emplace_back(c.ids[p], d);
        }
      }
    }
  }

 private:
  // True when chunk s < t already covers a pair differing by x.
  bool FoundInEarlierChunk(uint64_t x, size_t t) const {
    for (size_t s = 0; s < t; ++s) {
      if (std::popcount(x & chunks_[s].mask) <= plan_.radius) return true;
    }
    return false;
  }

  const std::vector<uint64_t>& values_;
  int k_;
  Plan plan_;
  std::vector<Chunk> chunks_;
};

Status CheckInput(const std::vector<uint64_t>& hashes, const NearDupOptions& options) {
  KESTREL_RETURN_IF_ERROR(options.Validate());
  if (hashes.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::InvalidArgument("near-duplicate search supports at most 2^31-1 hashes, got " +
                                   std::to_string(hashes.size()));
  }
  return Status();
}

// Identical hashes grouped: order[] holds item indices sorted by (hash,
// index), so group g's members order[start[g] .. start[g+1]) ascend.
struct Groups {
  std::vector<uint64_t> values;  // distinct hash of each group
  std::vector<uint32_t> start;   // [groups + 1]
  std::vector<int32_t> order;
  std::vector<uint32_t> group_of;  // item -> group
};

Groups GroupIdentical(const std::vector<uint64_t>& hashes) {
  const auto n = static_cast<int32_t>(hashes.size());
  Groups g;
  g.order.resize(n);
  std::iota(g.order.begin(), g.order.end(), 0);
  std::sort(g.order.begin(), g.order.end(),
            [&](int32_t a, int32_t b) { return hashes[a] != hashes[b] ? hashes[a] < hashes[b] : a < b; });
  g.group_of.resize(n);
  for (int32_t p = 0; p < n; ++p) {
    if (p == 0 || hashes[g.order[p]] != hashes[g.order[p - 1]]) {
      g.values.push_back(hashes[g.order[p]]);
      g.start.push_back(static_cast<uint32_t>(p));
    }
    g.group_of[g.order[p]] = static_cast<uint32_t>(g.values.size() - 1);
  }
  g.start.push_back(static_cast<uint32_t>(n));
  return g;
}

// Emits output pairs item by item in index order; each item's partners are
// sorted, so the output is sorted and a truncated answer is a prefix of the
// full one. `neighbours(i, out)` appends (group, distance) for every group
// within k of item i's hash, its own group included.
template <typename Neighbours>
NearDupResult ExpandInIndexOrder(const Groups& g, size_t max_pairs, Neighbours&& neighbours) {
  NearDupResult result;
  std::vector<std::pair<uint32_t, int>> near;
  std::vector<NearDupPair> partners;
  const auto n = static_cast<int32_t>(g.order.size());
  for (int32_t i = 0; i < n; ++i) {
    near.clear();
    partners.clear();
    neighbours(i, near);
    for (const auto& [grp, d] : near) {
      const auto first = g.order.begin() + g.start[grp];
      const auto last = g.order.begin() + g.start[grp + 1];
      for (auto it = std::upper_bound(first, last, i); it != last; ++it) {
        partners.push_back(NearDupPair{i, *it, d});
      }
    }
    if (partners.empty()) continue;
    if (result.pairs.size() == max_pairs) {
      result.truncated = true;
      break;
    }
    std::sort(partners.begin(), partners.end(),
              [](const NearDupPair& a, const NearDupPair& b) { return a.j < b.j; });
    const size_t room = max_pairs - result.pairs.size();
    if (partners.size() > room) {
      result.pairs.insert(result.pairs.end(), partners.begin(), partners.begin() + room);
      result.truncated = true;
      break;
    }
    result.pairs.insert(result.pairs.end(), partners.begin(), partners.end());
  }
  return result;
}

}  // namespace

Status NearDupOptions::Validate() const {
  if (max_distance < 0 || max_distance > 64) {
    return Status::InvalidArgument("must be in [0, 64], got " + std::to_string(max_distance),
                                   {"", 0, "max_distance"});
  }
  if (max_pairs < 1) {
    return Status::InvalidArgument("must be >= 1", {"", 0, "max_pairs"});
  }
  return Status();
}

Result<NearDupResult> FindNearDuplicates(const std::vector<uint64_t>& hashes, const NearDupOptions& options) {
  KESTREL_RETURN_IF_ERROR(CheckInput(hashes, options));
  const Groups g = GroupIdentical(hashes);
  const MultiIndex index(g.values, options.max_distance,
                         ChoosePlan(static_cast<double>(g.values.size()), options.max_distance));

  // Fast path: join the distinct values, then expand to items. Every
  // distinct pair yields at least one item pair, so more than max_pairs of
  // them means truncation; then stream per item instead, which keeps memory
  // bounded and the answer a sorted prefix.
  std::vector<ValuePair> joined;
  if (index.SelfJoin(options.max_pairs, joined)) {
    std::vector<uint32_t> adj_start(g.values.size() + 1, 0);
    for (const ValuePair& p : joined) {
      ++adj_start[p.u + 1];
      ++adj_start[p.v + 1];
    }
    std::partial_sum(adj_start.begin(), adj_start.end(), adj_start.begin());
    std::vector<std::pair<uint32_t, int>> adj(adj_start.back());
    std::vector<uint32_t> fill(adj_start.begin(), adj_start.end() - 1);
    for (const ValuePair& p : joined) {
      adj[fill[p.u]++] = {p.v, p.distance};
      adj[fill[p.v]++] = {p.u, p.distance};
    }
    return ExpandInIndexOrder(g, options.max_pairs, [&](int32_t i, auto& near) {
      const uint32_t grp = g.group_of[i];
      near.emplace_back(grp, 0);
      near.insert(near.end(), adj.begin() + adj_start[grp], adj.begin() + adj_start[grp + 1]);
    });
  }
  joined = {};
  return ExpandInIndexOrder(g, options.max_pairs,
                            [&](int32_t i, auto& near) { index.Query(hashes[i], near); });
}

Result<NearDupResult> FindNearDuplicatesBruteForce(const std::vector<uint64_t>& hashes,
                                                   const NearDupOptions& options) {
  KESTREL_RETURN_IF_ERROR(CheckInput(hashes, options));
  const auto n = static_cast<int32_t>(hashes.size());
  NearDupResult result;
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t j = i + 1; j < n; ++j) {
      const int d = std::popcount(hashes[i] ^ hashes[j]);
      if (d > options.max_distance) continue;
      if (result.pairs.size() == options.max_pairs) {
        result.truncated = true;
        return result;
      }
      result.pairs.push_back(NearDupPair{i, j, d});
    }
  }
  return result;
}

Result<std::vector<SplitNearDupPair>> ClassifyBySplit(const std::vector<NearDupPair>& pairs,
                                                      const std::vector<Split>& splits) {
  std::vector<SplitNearDupPair> out;
  out.reserve(pairs.size());
  for (const NearDupPair& p : pairs) {
    if (p.i < 0 || p.j < 0 || static_cast<size_t>(p.i) >= splits.size() ||
        static_cast<size_t>(p.j) >= splits.size()) {
      return Status::InvalidArgument("pair (" + std::to_string(p.i) + ", " + std::to_string(p.j) +
                                     ") indexes past " + std::to_string(splits.size()) + " split labels");
    }
    SplitNearDupPair s;
    s.pair = p;
    s.split_i = splits[p.i];
    s.split_j = splits[p.j];
    s.cross_split =
        s.split_i != Split::kUnassigned && s.split_j != Split::kUnassigned && s.split_i != s.split_j;
    out.push_back(s);
  }
  return out;
}

}  // namespace kestrel::data
