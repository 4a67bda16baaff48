// The parts of the Tree-structured Parzen Estimator (Bergstra et al.,
// "Algorithms for Hyper-Parameter Optimization", NeurIPS 2011), univariate:
// each param is modelled and chosen on its own (docs/tune.md "TPE").
//
//   1. Rank the finished trials by loss: succeeded by their value, then
//      pruned (further rung first, then their last value), then - with the
//      constant liar - queued/running trials as the worst. Failed and
//      infra-failed trials are left out.
//   2. The best TpeGamma(n) of the n ranked trials are "good" (l), the rest
//      "bad" (g); each group in trial-number order gets TpeWeights.
//   3. Per param, a Parzen estimator per group (BuildParzen /
//      BuildCategorical): one kernel per observation plus a prior kernel.
//   4. Draw TpeOptions::ei_candidates values from l and keep the one with
//      the largest log l(x) - log g(x) (expected improvement is monotone in
//      l/g).
// These functions are exposed for the tests that check them against
// hand-computed values. TpeOptions::multivariate replaces steps 3-4 by one
// joint estimator per group (MultivariateSigma0 below).
#pragma once

#include <cstddef>
#include <vector>

#include "tune/rng.h"
#include "tune/sampler.h"
#include "tune/space.h"

namespace kestrel::tune {

// min(ceil(0.1 n), 25): how many of n ranked trials are "good".
int TpeGamma(int n);
// The weights of n observations in trial-number order: all 1 for n < 25;
// otherwise the 25 newest weigh 1 and the n - 25 older ones ramp linearly
// from 1/n up to 1 (evenly spaced, both ends included).
std::vector<double> TpeWeights(int n);

// The ranked split of step 1-2: pointers into `history`, each group in
// trial-number order.
struct TpeSplit {
  std::vector<const Trial*> good;
  std::vector<const Trial*> bad;
};
TpeSplit SplitTrials(const std::vector<Trial>& history, Direction direction, bool constant_liar);

// A mixture of Gaussians truncated to [low, high] in one numeric param's
// internal coordinate (Param::InternalLow/High). The last kernel is the
// prior: mu the middle of the range, sigma its width.
//
// Bandwidths: sort the kernel centres (with the prior's) between the two
// ends low and high; each sigma is the larger distance to its neighbours,
// the smallest and largest centre using the distance to their inner
// neighbour only (the range ends do not widen them); then clipped to
// [(high - low) / min(100, 1 + kernels), high - low].
struct ParzenEstimator {
  std::vector<double> weights;  // normalized, one per kernel
  std::vector<double> mus;
  std::vector<double> sigmas;
  double low = 0, high = 0;

  // A draw: a kernel by weight, then its truncated normal (rejection).
  double Sample(TuneRng& rng) const;
  // A draw from kernel k's truncated normal.
  double SampleKernel(size_t k, TuneRng& rng) const;
  // log density at x (kFloat), or for kInt the log probability of the grid
  // cell of x (the internal interval of value +- step/2).
  double LogPdf(double x, const Param& param) const;
  // The same for kernel k alone (its weight not included).
  double KernelLogPdf(size_t k, double x, const Param& param) const;
};
// `observations`: internal values in trial-number order; `weights`:
// TpeWeights of their count.
ParzenEstimator BuildParzen(const Param& param, const std::vector<double>& observations,
                            const std::vector<double>& weights, double prior_weight);

// The prior kernel's mixture weight that gives it `share` of an estimator
// whose observations weigh `weights`: share / (1 - share) * sum(weights).
// `prior_weight` when share is 0 or there is no observation (the prior is
// then the whole estimator). REQUIRES: 0 <= share < 1.
double PriorWeightForShare(const std::vector<double>& weights, double share, double prior_weight);

// g's prior weight under TpeOptions::bad_prior_share: PriorWeightForShare
// over the weights of the bad trials that finished; the constant liar's
// queued and running trials are not counted (their kernels come on top at
// full weight). `weights`: TpeWeights of `bad`, in the same order.
double BadPriorWeight(const std::vector<const Trial*>& bad, const std::vector<double>& weights,
                      const TpeOptions& options);

// A categorical param's estimator as the probability of each choice: the
// weighted mixture of one kernel per observation (prior_weight / kernels on
// every choice, + 1 on the observed one, normalized) and a uniform prior
// kernel. `prior_mixture_weight` (< 0: prior_weight) is the prior
// kernel's weight in the mixture; prior_weight smooths the kernels.
std::vector<double> BuildCategorical(const Param& param, const std::vector<double>& observations,
                                     const std::vector<double>& weights, double prior_weight,
                                     double prior_mixture_weight = -1);
// The kernels themselves: one row of choice probabilities per observation,
// then the prior's (uniform) row.
std::vector<std::vector<double>> CategoricalKernels(const Param& param,
                                                    const std::vector<double>& observations,
                                                    double prior_weight);

// Multivariate mode (TpeOptions::multivariate; Falkner et al., "BOHB",
// ICML 2018): one joint kernel per observation over all params, so the
// sampler models how params interact. Every numeric kernel's sigma is
// Scott's rule, MultivariateSigma0 * (high - low), magic-clipped as above;
// the prior kernel keeps the width; categoricals as in BuildCategorical.
// Candidates are whole vectors drawn from l and scored by the joint
// log l - log g.
// 0.2 * max(n, 1)^(-1 / (d + 4)) for n observations of d params.
double MultivariateSigma0(int n_observations, int n_params);

}  // namespace kestrel::tune
