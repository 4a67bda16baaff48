#include "tune/importance.h"

#include <algorithm>
#include <memory>
#include <numeric>

#include "tune/rng.h"

namespace kestrel::tune {

namespace {

struct Node {
  int param = -1;  // -1: a leaf
  double threshold = 0;
  double value = 0;  // leaf: the mean objective of its trials
  std::unique_ptr<Node> left, right;
};

class TreeBuilder {
 public:
  TreeBuilder(const std::vector<std::vector<double>>& x, const std::vector<double>& y,
              const ImportanceOptions& options, TuneRng& rng)
      : x_(x), y_(y), options_(options), rng_(rng) {}

  std::unique_ptr<Node> Build(const std::vector<size_t>& rows, int depth) {
    auto node = std::make_unique<Node>();
    double sum = 0;
    for (size_t r : rows) sum += y_[r];
    node->value = sum / static_cast<double>(rows.size());
    if (depth >= options_.max_depth || static_cast<int>(rows.size()) < 2 * options_.min_leaf) return node;
    const size_t d = x_[0].size();
    // max(1, d/3) distinct params, drawn by a partial Fisher-Yates shuffle.
    std::vector<size_t> params(d);
    std::iota(params.begin(), params.end(), 0);
    const size_t m = std::max<size_t>(1, d / 3);
    for (size_t i = 0; i < m; ++i) std::swap(params[i], params[i + rng_.UniformInt(d - i)]);
    double best_sse = Sse(rows);
    int best_param = -1;
    double best_threshold = 0;
    for (size_t i = 0; i < m; ++i) {
      const size_t p = params[i];
      std::vector<size_t> sorted = rows;
      std::stable_sort(sorted.begin(), sorted.end(), [&](size_t a, size_t b) { return x_[a][p] < x_[b][p]; });
      // Prefix sums: the SSE of each left/right cut in one pass.
      double left_sum = 0, left_sq = 0, total_sum = 0, total_sq = 0;
      for (size_t r : sorted) {
        total_sum += y_[r];
        total_sq += y_[r] * y_[r];
      }
      for (size_t k = 0; k + 1 < sorted.size(); ++k) {
        left_sum += y_[sorted[k]];
        left_sq += y_[sorted[k]] * y_[sorted[k]];
        const double nl = static_cast<double>(k + 1), nr = static_cast<double>(sorted.size() - k - 1);
        if (nl < options_.min_leaf || nr < options_.min_leaf) continue;
        const double lo = x_[sorted[k]][p], hi = x_[sorted[k + 1]][p];
        if (lo == hi) continue;
        const double right_sum = total_sum - left_sum, right_sq = total_sq - left_sq;
        const double sse = (left_sq - left_sum * left_sum / nl) + (right_sq - right_sum * right_sum / nr);
        if (sse < best_sse - 1e-12) {
          best_sse = sse;
          best_param = static_cast<int>(p);
          best_threshold = 0.5 * (lo + hi);
        }
      }
    }
    if (best_param < 0) return node;
    std::vector<size_t> left, right;
    for (size_t r : rows)
      (x_[r][static_cast<size_t>(best_param)] <= best_threshold ? left : right).push_back(r);
    node->param = best_param;
    node->threshold = best_threshold;
    node->left = Build(left, depth + 1);
    node->right = Build(right, depth + 1);
    return node;
  }

 private:
  double Sse(const std::vector<size_t>& rows) const {
    double sum = 0, sq = 0;
    for (size_t r : rows) {
      sum += y_[r];
      sq += y_[r] * y_[r];
    }
    return sq - sum * sum / static_cast<double>(rows.size());
  }

  const std::vector<std::vector<double>>& x_;
  const std::vector<double>& y_;
  const ImportanceOptions& options_;
  TuneRng& rng_;
};

double Predict(const Node& node, const std::vector<double>& x) {
  const Node* n = &node;
  while (n->param >= 0) n = x[static_cast<size_t>(n->param)] <= n->threshold ? n->left.get() : n->right.get();
  return n->value;
}

}  // namespace

Result<std::vector<double>> ParamImportances(const SearchSpace& space, const std::vector<Trial>& trials,
                                             const ImportanceOptions& options) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& t : trials) {
    if (t.state != TrialState::kSucceeded || !t.value || t.params.size() != space.params.size()) continue;
    x.push_back(t.params);
    y.push_back(*t.value);
  }
  if (x.size() < 4) {
    return Status::FailedPrecondition("importances need at least 4 succeeded trials, the study has " +
                                      std::to_string(x.size()));
  }
  const size_t n = x.size(), d = space.params.size();
  TuneRng rng(options.seed);
  std::vector<double> rise(d, 0.0);
  for (int tree = 0; tree < options.trees; ++tree) {
    std::vector<size_t> bag;
    std::vector<bool> in_bag(n, false);
    for (size_t i = 0; i < n; ++i) {
      const size_t r = rng.UniformInt(n);
      bag.push_back(r);
      in_bag[r] = true;
    }
    std::vector<size_t> oob;
    for (size_t i = 0; i < n; ++i) {
      if (!in_bag[i]) oob.push_back(i);
    }
    TreeBuilder builder(x, y, options, rng);
    const std::unique_ptr<Node> root = builder.Build(bag, 0);
    if (oob.size() < 2) continue;
    auto oob_error = [&](int permuted, const std::vector<size_t>& order) {
      double err = 0;
      for (size_t i = 0; i < oob.size(); ++i) {
        std::vector<double> row = x[oob[i]];
        if (permuted >= 0) row[static_cast<size_t>(permuted)] = x[order[i]][static_cast<size_t>(permuted)];
        const double e = Predict(*root, row) - y[oob[i]];
        err += e * e;
      }
      return err / static_cast<double>(oob.size());
    };
    const double base = oob_error(-1, oob);
    for (size_t p = 0; p < d; ++p) {
      std::vector<size_t> order = oob;
      for (size_t i = order.size() - 1; i > 0; --i) std::swap(order[i], order[rng.UniformInt(i + 1)]);
      rise[p] += oob_error(static_cast<int>(p), order) - base;
    }
  }
  double total = 0;
  for (double& r : rise) {
    r = std::max(r, 0.0);
    total += r;
  }
  for (double& r : rise) r = total > 0 ? r / total : 0.0;
  return rise;
}

}  // namespace kestrel::tune
