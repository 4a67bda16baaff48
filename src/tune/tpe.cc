#include "tune/tpe.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <optional>
#include <tuple>

namespace kestrel::tune {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Standard normal CDF.
double Phi(double z) { return 0.5 * std::erfc(-z / std::numbers::sqrt2); }

double LogSumExp(const std::vector<double>& v) {
  double m = -kInf;
  for (double x : v) m = std::max(m, x);
  if (m == -kInf) return -kInf;
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

size_t PickByWeight(const std::vector<double>& weights, TuneRng& rng) {
  const double u = rng.Uniform01();
  double acc = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    acc += weights[i];
    if (u < acc) return i;
  }
  return weights.size() - 1;  // u within rounding of 1
}

std::vector<double> NormalizedWithPrior(const std::vector<double>& weights, double prior_weight) {
  std::vector<double> w = weights;
  w.push_back(prior_weight);
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& x : w) x /= sum;
  return w;
}

// The rank key of a trial (lower is better), or nullopt when it is left out.
std::optional<std::tuple<int, double, double>> RankKey(const Trial& t, Direction d, bool constant_liar) {
  switch (t.state) {
    case TrialState::kSucceeded:
      if (!t.value) return std::nullopt;
      return std::tuple{0, Loss(d, *t.value), 0.0};
    case TrialState::kPruned:
      // Further rungs first, then the value at the last reported epoch.
      return std::tuple{1, -static_cast<double>(t.intermediate.size()),
                        t.intermediate.empty() ? kInf : Loss(d, t.intermediate.back())};
    case TrialState::kQueued:
    case TrialState::kRunning:
      if (!constant_liar) return std::nullopt;
      return std::tuple{2, 0.0, 0.0};
    case TrialState::kFailed:
    case TrialState::kInfraFailed:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

int TpeGamma(int n) { return std::min(static_cast<int>(std::ceil(0.1 * n)), 25); }

std::vector<double> TpeWeights(int n) {
  if (n < 25) return std::vector<double>(static_cast<size_t>(std::max(n, 0)), 1.0);
  const int ramp = n - 25;
  std::vector<double> w;
  w.reserve(static_cast<size_t>(n));
  for (int i = 0; i < ramp; ++i) {
    // linspace(1/n, 1, ramp)
    const double lo = 1.0 / n;
    w.push_back(ramp == 1 ? lo : lo + (1.0 - lo) * i / (ramp - 1));
  }
  w.insert(w.end(), 25, 1.0);
  return w;
}

TpeSplit SplitTrials(const std::vector<Trial>& history, Direction direction, bool constant_liar) {
  std::vector<std::pair<std::tuple<int, double, double>, const Trial*>> ranked;
  for (const auto& t : history) {
    if (auto key = RankKey(t, direction, constant_liar)) ranked.emplace_back(*key, &t);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first < b.first;
    return a.second->number < b.second->number;
  });
  const size_t n_good = static_cast<size_t>(TpeGamma(static_cast<int>(ranked.size())));
  TpeSplit split;
  for (size_t i = 0; i < ranked.size(); ++i)
    (i < n_good ? split.good : split.bad).push_back(ranked[i].second);
  auto by_number = [](const Trial* a, const Trial* b) { return a->number < b->number; };
  std::sort(split.good.begin(), split.good.end(), by_number);
  std::sort(split.bad.begin(), split.bad.end(), by_number);
  return split;
}

ParzenEstimator BuildParzen(const Param& param, const std::vector<double>& observations,
                            const std::vector<double>& weights, double prior_weight) {
  ParzenEstimator pe;
  pe.low = param.InternalLow();
  pe.high = param.InternalHigh();
  const double width = pe.high - pe.low;
  pe.mus = observations;
  pe.mus.push_back(0.5 * (pe.low + pe.high));  // the prior's centre
  const size_t k = pe.mus.size();

  std::vector<size_t> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pe.mus[a] < pe.mus[b]; });
  // Sorted centres between the range ends.
  std::vector<double> s(k + 2);
  s[0] = pe.low;
  s[k + 1] = pe.high;
  for (size_t i = 0; i < k; ++i) s[i + 1] = pe.mus[order[i]];
  std::vector<double> sorted_sigma(k);
  for (size_t i = 1; i <= k; ++i) sorted_sigma[i - 1] = std::max(s[i] - s[i - 1], s[i + 1] - s[i]);
  if (k >= 2) {
    // The outermost centres take the distance to their inner neighbour.
    sorted_sigma[0] = s[2] - s[1];
    sorted_sigma[k - 1] = s[k] - s[k - 1];
  }
  const double min_sigma = width / std::min(100.0, 1.0 + static_cast<double>(k));
  pe.sigmas.assign(k, 0);
  for (size_t i = 0; i < k; ++i) pe.sigmas[order[i]] = std::clamp(sorted_sigma[i], min_sigma, width);
  pe.sigmas[k - 1] = width;  // the prior
  pe.weights = NormalizedWithPrior(weights, prior_weight);
  return pe;
}

double ParzenEstimator::Sample(TuneRng& rng) const { return SampleKernel(PickByWeight(weights, rng), rng); }

double ParzenEstimator::SampleKernel(size_t k, TuneRng& rng) const {
  // Every centre lies in [low, high] and sigma <= high - low, so one draw
  // in three or more lands inside: a bounded loop, with the clamp only as
  // the end of a vanishingly unlikely run.
  for (int tries = 0; tries < 1000; ++tries) {
    const double x = mus[k] + sigmas[k] * rng.Normal();
    if (x >= low && x <= high) return x;
  }
  return std::clamp(mus[k], low, high);
}

double ParzenEstimator::KernelLogPdf(size_t k, double x, const Param& param) const {
  const double z = Phi((high - mus[k]) / sigmas[k]) - Phi((low - mus[k]) / sigmas[k]);
  double log_p = 0;
  if (param.kind == ParamKind::kInt) {
    // The probability of x's grid cell (value +- step/2, in the internal coordinate).
    const double v = param.FromInternal(x);
    const double half = param.log ? 0.5 : 0.5 * static_cast<double>(param.step);
    const double cell_lo = std::max(low, param.ToInternal(v - half));
    const double cell_hi = std::min(high, param.ToInternal(v + half));
    const double mass = Phi((cell_hi - mus[k]) / sigmas[k]) - Phi((cell_lo - mus[k]) / sigmas[k]);
    log_p = std::log(std::max(mass, 1e-300));
  } else {
    const double u = (x - mus[k]) / sigmas[k];
    log_p = -0.5 * u * u - std::log(sigmas[k]) - 0.5 * std::log(2 * std::numbers::pi);
  }
  return log_p - std::log(std::max(z, 1e-300));
}

double ParzenEstimator::LogPdf(double x, const Param& param) const {
  std::vector<double> terms(mus.size());
  for (size_t k = 0; k < mus.size(); ++k) terms[k] = std::log(weights[k]) + KernelLogPdf(k, x, param);
  return LogSumExp(terms);
}

std::vector<std::vector<double>> CategoricalKernels(const Param& param,
                                                    const std::vector<double>& observations,
                                                    double prior_weight) {
  const size_t n_choices = param.choices.size();
  const size_t kernels = observations.size() + 1;
  std::vector<std::vector<double>> rows;
  for (size_t k = 0; k < kernels; ++k) {
    std::vector<double> row(n_choices, prior_weight / static_cast<double>(kernels));
    if (k < observations.size()) row[static_cast<size_t>(observations[k])] += 1.0;
    const double sum = std::accumulate(row.begin(), row.end(), 0.0);
    for (double& x : row) x /= sum;
    rows.push_back(std::move(row));
  }
  return rows;
}

double PriorWeightForShare(const std::vector<double>& weights, double share, double prior_weight) {
  const double sum = std::accumulate(weights.begin(), weights.end(), 0.0);
  if (!(share > 0) || !(sum > 0)) return prior_weight;
  return share / (1.0 - share) * sum;
}

// The lies are left out of the sum: a lie is a placeholder that keeps
// parallel suggestions apart, not evidence about the objective, so its
// kernel keeps its full weight on top (shrinking it with the evidence let
// 4 parallel suggestions cluster: docs/tune.md "Why g keeps half its
// weight on the prior").
double BadPriorWeight(const std::vector<const Trial*>& bad, const std::vector<double>& weights,
                      const TpeOptions& options) {
  std::vector<double> finished;
  for (size_t i = 0; i < bad.size(); ++i) {
    if (bad[i]->state != TrialState::kQueued && bad[i]->state != TrialState::kRunning)
      finished.push_back(weights[i]);
  }
  return PriorWeightForShare(finished, options.bad_prior_share, options.prior_weight);
}

std::vector<double> BuildCategorical(const Param& param, const std::vector<double>& observations,
                                     const std::vector<double>& weights, double prior_weight,
                                     double prior_mixture_weight) {
  const std::vector<double> w =
      NormalizedWithPrior(weights, prior_mixture_weight < 0 ? prior_weight : prior_mixture_weight);
  const auto rows = CategoricalKernels(param, observations, prior_weight);
  std::vector<double> probs(param.choices.size(), 0.0);
  for (size_t k = 0; k < rows.size(); ++k) {
    for (size_t c = 0; c < probs.size(); ++c) probs[c] += w[k] * rows[k][c];
  }
  return probs;
}

double MultivariateSigma0(int n_observations, int n_params) {
  return 0.2 * std::pow(static_cast<double>(std::max(n_observations, 1)), -1.0 / (std::max(n_params, 1) + 4));
}

namespace {

// One group's joint estimator (multivariate mode): kernel k is the product
// over params of param p's kernel k.
struct JointEstimator {
  std::vector<double> weights;                                // normalized, prior last
  std::vector<ParzenEstimator> numeric;                       // per param (numeric params)
  std::vector<std::vector<std::vector<double>>> categorical;  // per param: rows per kernel

  // prior_mixture_weight: the prior kernel's weight in the mixture
  // (BadPriorWeight for g); prior_weight smooths categorical kernels.
  JointEstimator(const SearchSpace& space, const std::vector<const Trial*>& group, double prior_weight,
                 double prior_mixture_weight) {
    weights = NormalizedWithPrior(TpeWeights(static_cast<int>(group.size())), prior_mixture_weight);
    const double sigma0 =
        MultivariateSigma0(static_cast<int>(group.size()), static_cast<int>(space.params.size()));
    numeric.resize(space.params.size());
    categorical.resize(space.params.size());
    for (size_t p = 0; p < space.params.size(); ++p) {
      const Param& param = space.params[p];
      std::vector<double> obs;
      for (const Trial* t : group) obs.push_back(t->params[p]);
      if (param.kind == ParamKind::kCategorical) {
        categorical[p] = CategoricalKernels(param, obs, prior_weight);
        continue;
      }
      ParzenEstimator pe = BuildParzen(param, obs, std::vector<double>(obs.size(), 1.0), prior_weight);
      // Scott's rule for every observation's kernel (the same width in every
      // kernel, so the joint kernels are axis-aligned boxes of one shape);
      // the magic clip as in the univariate mode; the prior stays the width.
      const double width = pe.high - pe.low;
      const double min_sigma = width / std::min(100.0, 1.0 + static_cast<double>(pe.mus.size()));
      for (size_t k = 0; k + 1 < pe.sigmas.size(); ++k)
        pe.sigmas[k] = std::clamp(sigma0 * width, min_sigma, width);
      numeric[p] = std::move(pe);
    }
  }

  std::vector<double> Sample(const SearchSpace& space, TuneRng& rng) const {
    const size_t k = PickByWeight(weights, rng);
    std::vector<double> x(space.params.size());
    for (size_t p = 0; p < space.params.size(); ++p) {
      const Param& param = space.params[p];
      x[p] = param.kind == ParamKind::kCategorical ? static_cast<double>(PickByWeight(categorical[p][k], rng))
                                                   : param.Snap(numeric[p].SampleKernel(k, rng));
    }
    return x;
  }

  double LogPdf(const SearchSpace& space, const std::vector<double>& x) const {
    std::vector<double> terms(weights.size());
    for (size_t k = 0; k < weights.size(); ++k) {
      double t = std::log(weights[k]);
      for (size_t p = 0; p < space.params.size(); ++p) {
        const Param& param = space.params[p];
        t += param.kind == ParamKind::kCategorical ? std::log(categorical[p][k][static_cast<size_t>(x[p])])
                                                   : numeric[p].KernelLogPdf(k, x[p], param);
      }
      terms[k] = t;
    }
    return LogSumExp(terms);
  }
};

}  // namespace

std::vector<double> TpeSampler::Suggest(const SearchSpace& space, const std::vector<Trial>& history,
                                        int64_t number) const {
  // Trials of another space shape (none in a study: its space is fixed by
  // its hash) carry no usable observation.
  std::vector<Trial> usable;
  int finished = 0;
  for (const auto& t : history) {
    if (t.params.size() != space.params.size()) continue;
    usable.push_back(t);
    if (t.state == TrialState::kSucceeded || t.state == TrialState::kPruned) ++finished;
  }
  if (finished < options_.startup_trials) return RandomSampler(options_.seed).Suggest(space, history, number);

  TuneRng rng(TrialSeed(options_.seed, number));
  const TpeSplit split = SplitTrials(usable, options_.direction, options_.constant_liar);
  if (options_.multivariate) {
    const JointEstimator l(space, split.good, options_.prior_weight, options_.prior_weight);
    const JointEstimator g(
        space, split.bad, options_.prior_weight,
        BadPriorWeight(split.bad, TpeWeights(static_cast<int>(split.bad.size())), options_));
    std::vector<double> best;
    double best_score = -kInf;
    for (int c = 0; c < options_.ei_candidates; ++c) {
      std::vector<double> x = l.Sample(space, rng);
      const double score = l.LogPdf(space, x) - g.LogPdf(space, x);
      if (score > best_score) {
        best_score = score;
        best = std::move(x);
      }
    }
    return best;
  }
  const std::vector<double> w_good = TpeWeights(static_cast<int>(split.good.size()));
  const std::vector<double> w_bad = TpeWeights(static_cast<int>(split.bad.size()));
  // g leans on its prior (TpeOptions::bad_prior_share): a candidate's score
  // is then mostly l's, and g only steers away from where bad trials pile up.
  const double g_prior = BadPriorWeight(split.bad, w_bad, options_);
  std::vector<double> out;
  for (size_t p = 0; p < space.params.size(); ++p) {
    const Param& param = space.params[p];
    auto column = [&](const std::vector<const Trial*>& group) {
      std::vector<double> v;
      for (const Trial* t : group) v.push_back(t->params.at(p));
      return v;
    };
    const std::vector<double> good = column(split.good), bad = column(split.bad);
    double best = 0, best_score = -kInf;
    if (param.kind == ParamKind::kCategorical) {
      const auto l = BuildCategorical(param, good, w_good, options_.prior_weight);
      const auto g = BuildCategorical(param, bad, w_bad, options_.prior_weight, g_prior);
      for (int c = 0; c < options_.ei_candidates; ++c) {
        const size_t x = PickByWeight(l, rng);
        const double score = std::log(l[x]) - std::log(g[x]);
        if (score > best_score) {
          best_score = score;
          best = static_cast<double>(x);
        }
      }
    } else {
      const ParzenEstimator l = BuildParzen(param, good, w_good, options_.prior_weight);
      const ParzenEstimator g = BuildParzen(param, bad, w_bad, g_prior);
      for (int c = 0; c < options_.ei_candidates; ++c) {
        const double x = param.Snap(l.Sample(rng));
        const double score = l.LogPdf(x, param) - g.LogPdf(x, param);
        if (score > best_score) {
          best_score = score;
          best = x;
        }
      }
    }
    out.push_back(best);
  }
  return out;
}

}  // namespace kestrel::tune
