// Parameter importances for `kestrel tune show` (docs/tune.md
// "Importances"): how much of the objective's variation each param
// explains, estimated by permutation importance on a random forest
// (Breiman, "Random Forests", Machine Learning 2001, section 10):
//
//   1. Fit `trees` regression trees to the succeeded trials (params in
//      their internal coordinates -> objective), each on a bootstrap
//      sample, splits chosen among max(1, d/3) random params by squared
//      error, down to `max_depth` or `min_leaf` trials.
//   2. Per tree, the squared error on its out-of-bag trials, then again
//      with one param's column shuffled among them; the rise is that
//      param's importance in the tree.
//   3. Average over trees, clip at 0, normalize to sum 1.
// Categorical params enter as their choice index (an ordered split), a
// documented simplification. Deterministic for a seed (TuneRng).
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "tune/sampler.h"
#include "tune/space.h"

namespace kestrel::tune {

struct ImportanceOptions {
  int trees = 64;     // forest size
  int max_depth = 8;  // tree depth limit
  int min_leaf = 2;   // fewest trials in a leaf
  uint64_t seed = 0;  // bootstrap, split params and shuffles
};

// One importance per space param (sums to 1; all 0 when no param explains
// anything). kFailedPrecondition when fewer than 4 trials succeeded.
Result<std::vector<double>> ParamImportances(const SearchSpace& space, const std::vector<Trial>& trials,
                                             const ImportanceOptions& options = {});

}  // namespace kestrel::tune
