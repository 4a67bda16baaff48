// The tune module's pure parts: the RNG contract, the space file and its
// validation through the trainer's key bindings, TPE's pieces against
// hand-computed values, sampler determinism, ASHA and median pruning on
// scripted metric streams.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tune/pruner.h"
#include "tune/rng.h"
#include "tune/sampler.h"
#include "tune/space.h"
#include "tune/tpe.h"

namespace kestrel::tune {
namespace {

Param FloatParam(const char* key, double low, double high, bool log = false) {
  Param p;
  p.key = key;
  p.kind = ParamKind::kFloat;
  p.low = low;
  p.high = high;
  p.log = log;
  return p;
}

Trial Done(int64_t number, std::vector<double> params, double value) {
  Trial t;
  t.number = number;
  t.state = TrialState::kSucceeded;
  t.params = std::move(params);
  t.value = value;
  return t;
}

// ---------------------------------------------------------------- RNG

TEST(TuneRng, Uniform01IsTheTop53BitsOfTheStandardEngine) {
  // mt19937_64's first output for seed 5489 is fixed by the C++ standard:
  // 14514284786278117030; >> 11, * 2^-53 = 0.7868209548678019.
  TuneRng rng(5489);
  EXPECT_DOUBLE_EQ(rng.Uniform01(), 0.7868209548678019);
}

TEST(TuneRng, UniformIntStaysInRangeAndCoversIt) {
  TuneRng rng(1);
  std::vector<int> seen(5, 0);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t v = rng.UniformInt(5);
    ASSERT_LT(v, 5u);
    ++seen[v];
  }
  for (int c : seen) EXPECT_GT(c, 150);
}

TEST(TuneRng, NormalHasUnitMomentsAndTrialSeedsDiffer) {
  TuneRng rng(3);
  double sum = 0, sq = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double x = rng.Normal();
    sum += x;
    sq += x * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(sq / n, 1.0, 0.03);
  EXPECT_NE(TrialSeed(0, 1), TrialSeed(0, 2));
  EXPECT_NE(TrialSeed(0, 1), TrialSeed(1, 1));
  EXPECT_EQ(TrialSeed(5, 9), TrialSeed(5, 9));
}

// ---------------------------------------------------------------- space

TEST(TuneSpace, ParsesRangesChoicesStepsAndFixedKeys) {
  auto space = ParseSpaceYaml(
      "lr0: {low: 1.0e-4, high: 1.0e-1, log: true}\n"
      "mosaic: {low: 0, high: 1}\n"
      "close_mosaic: {low: 0, high: 10}\n"
      "imgsz: {low: 320, high: 640, step: 32}\n"
      "optimizer: [SGD, AdamW]\n"
      "cos_lr: true\n",
      "space.yaml");
  ASSERT_TRUE(space.IsOk()) << space.GetStatus().ToString();
  ASSERT_EQ(space->params.size(), 5u);
  EXPECT_EQ(space->params[0].kind, ParamKind::kFloat);
  EXPECT_TRUE(space->params[0].log);
  EXPECT_DOUBLE_EQ(space->params[0].InternalLow(), std::log(1e-4));
  EXPECT_EQ(space->params[2].kind, ParamKind::kInt);  // close_mosaic is an int key
  EXPECT_DOUBLE_EQ(space->params[2].InternalLow(), -0.5);
  EXPECT_DOUBLE_EQ(space->params[2].InternalHigh(), 10.5);
  EXPECT_EQ(space->params[3].step, 32);
  EXPECT_DOUBLE_EQ(space->params[3].ToInternal(space->params[3].Snap(500)), 512);  // 320 + 6 * 32
  EXPECT_EQ(space->params[4].kind, ParamKind::kCategorical);
  EXPECT_EQ(space->params[4].choices, (std::vector<std::string>{"SGD", "AdamW"}));
  EXPECT_EQ(space->fixed.at("cos_lr"), "true");
  const auto tokens = TrialTokens(*space, {std::log(0.01), 0.25, 3, 512, 1});
  // Floats print as the shortest text that reads back to the same double;
  // exp(log(0.01)) is 0.010000000000000004.
  EXPECT_EQ(tokens, (std::vector<std::string>{"cos_lr=true", "lr0=0.010000000000000004", "mosaic=0.25",
                                              "close_mosaic=3", "imgsz=512", "optimizer=AdamW"}));
}

TEST(TuneSpace, BoundOutsideTheKeysRangeNamesKeyRangeFileAndLine) {
  auto space = ParseSpaceYaml("mosaic: {low: 0, high: 1}\ntranslate: {low: 0, high: 0.9}\n", "space.yaml");
  ASSERT_FALSE(space.IsOk());
  const Status& s = space.GetStatus();
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Where().file, "space.yaml");
  EXPECT_EQ(s.Where().line, 2);
  EXPECT_EQ(s.Where().field, "translate");
  EXPECT_NE(s.Message().find("high"), std::string::npos) << s.Message();
  EXPECT_NE(s.Message().find("[0, 0.5)"), std::string::npos) << s.Message();
}

TEST(TuneSpace, RejectsBadEntriesWithTheKeyNamed) {
  struct Case {
    const char* yaml;
    const char* field;
    const char* text;
  };
  const Case cases[] = {
      {"lr00: {low: 0.001, high: 0.1}\n", "lr00", "did you mean 'lr0'"},
      {"epochs: {low: 1, high: 5}\n", "epochs", "set by the study"},
      {"close_mosaic: {low: 0.5, high: 3}\n", "close_mosaic", "int key"},
      {"optimizer: [SGD, AdamX]\n", "optimizer", "'AdamX' is not one of: auto, SGD, Adam, AdamW"},
      {"optimizer: {low: 0, high: 1}\n", "optimizer", "list of choices"},
      {"lr0: {low: 0.1, high: 0.01}\n", "lr0", "must be below"},
      {"weight_decay: {low: 0, high: 0.01, log: true}\n", "weight_decay", "low > 0"},
      {"lr0: {low: 0.001, high: 0.1, base: 2}\n", "lr0", "unknown field 'base'"},
      {"lr0: {low: 0.001}\n", "lr0", "both low and high"},
      {"optimizer: [SGD, SGD]\n", "optimizer", "listed twice"},
      {"mosaic: {low: 0, high: 1}\nimgsz: 16\n", "imgsz",
       "fixed value: value 16 is outside the allowed range [32, 4096]"},
      {"mosaic: {low: 0, high: 1}\nimgsz: 100\n", "imgsz", "multiple of the stride"},
      // Within imgsz's range, but not a multiple of the stride: the
      // trainer's cross-key check, run on the space's corners.
      {"mosaic: {low: 0, high: 1}\nimgsz: {low: 320, high: 650, step: 10}\n", "imgsz", "multiple"},
      {"cos_lr: true\n", "", "samples no key"},
  };
  for (const auto& c : cases) {
    auto space = ParseSpaceYaml(c.yaml, "space.yaml");
    ASSERT_FALSE(space.IsOk()) << c.yaml;
    EXPECT_EQ(space.GetStatus().Where().field, c.field) << c.yaml << space.GetStatus().ToString();
    EXPECT_NE(space.GetStatus().Message().find(c.text), std::string::npos)
        << c.yaml << " -> " << space.GetStatus().ToString();
    EXPECT_EQ(space.GetStatus().Where().file, "space.yaml");
  }
}

TEST(TuneSpace, DefaultDetectionSpacePassesTheTrainersValidation) {
  // Written out as a space file, the default space must load: every bound
  // is inside its key's range.
  const SearchSpace def = DefaultDetectionSpace();
  std::ostringstream yaml;
  for (const auto& p : def.params) {
    yaml << p.key << ": {low: " << p.low << ", high: " << p.high << (p.log ? ", log: true" : "") << "}\n";
  }
  auto parsed = ParseSpaceYaml(yaml.str(), "default");
  ASSERT_TRUE(parsed.IsOk()) << parsed.GetStatus().ToString();
  EXPECT_EQ(parsed->params.size(), def.params.size());
  EXPECT_EQ(SpaceHash(*parsed), SpaceHash(def));
  ASSERT_NE(def.Find("lr0"), nullptr);
  EXPECT_TRUE(def.Find("lr0")->log);
  EXPECT_EQ(def.Find("close_mosaic")->kind, ParamKind::kInt);
}

TEST(TuneSpace, HashChangesWithTheSpace) {
  SearchSpace a, b;
  a.params = {FloatParam("mosaic", 0, 1)};
  b.params = {FloatParam("mosaic", 0, 0.5)};
  EXPECT_NE(SpaceHash(a), SpaceHash(b));
  b.params = a.params;
  EXPECT_EQ(SpaceHash(a), SpaceHash(b));
  b.fixed["cos_lr"] = "true";
  EXPECT_NE(SpaceHash(a), SpaceHash(b));
}

// ---------------------------------------------------------------- TPE parts

TEST(Tpe, GammaAndWeights) {
  EXPECT_EQ(TpeGamma(0), 0);
  EXPECT_EQ(TpeGamma(1), 1);
  EXPECT_EQ(TpeGamma(10), 1);
  EXPECT_EQ(TpeGamma(11), 2);
  EXPECT_EQ(TpeGamma(249), 25);
  EXPECT_EQ(TpeGamma(1000), 25);
  EXPECT_EQ(TpeWeights(24), std::vector<double>(24, 1.0));
  // n = 28: the 3 oldest ramp over linspace(1/28, 1, 3) = 1/28, 29/56, 1.
  const auto w = TpeWeights(28);
  ASSERT_EQ(w.size(), 28u);
  EXPECT_DOUBLE_EQ(w[0], 1.0 / 28);
  EXPECT_DOUBLE_EQ(w[1], 29.0 / 56);
  EXPECT_DOUBLE_EQ(w[2], 1.0);
  EXPECT_DOUBLE_EQ(w[27], 1.0);
}

TEST(Tpe, ParzenBandwidthsByHand) {
  // Observations 0.1, 0.7, 0.8 in [0, 1], prior at 0.5. Sorted centres
  // 0.1 0.5 0.7 0.8 between the ends 0 and 1:
  //   0.1: outermost, distance to its inner neighbour 0.5 -> 0.4
  //   0.5: max(0.4, 0.2) = 0.4 (the prior; its sigma is the width, 1)
  //   0.7: max(0.2, 0.1) = 0.2
  //   0.8: outermost, distance to 0.7 -> 0.1, clipped up to 1 / (1 + 4) = 0.2
  const ParzenEstimator pe = BuildParzen(FloatParam("x", 0, 1), {0.1, 0.7, 0.8}, {1, 1, 1}, 1.0);
  ASSERT_EQ(pe.mus.size(), 4u);
  EXPECT_DOUBLE_EQ(pe.mus[3], 0.5);
  EXPECT_DOUBLE_EQ(pe.sigmas[0], 0.4);
  EXPECT_DOUBLE_EQ(pe.sigmas[1], 0.2);
  EXPECT_DOUBLE_EQ(pe.sigmas[2], 0.2);
  EXPECT_DOUBLE_EQ(pe.sigmas[3], 1.0);
  for (double w : pe.weights) EXPECT_DOUBLE_EQ(w, 0.25);
}

TEST(Tpe, ParzenOutermostCentresIgnoreTheRangeEnds) {
  // Observations 4, 4.5, 5.5, 6, 6.5 in [0, 10], prior at 5: the centre 4
  // is 4 from the range end but 0.5 from its inner neighbour, so its sigma
  // is 0.5 (not 4); every sigma is then clipped up to 10 / min(100, 1 + 6).
  const ParzenEstimator pe = BuildParzen(FloatParam("x", 0, 10), {4, 4.5, 5.5, 6, 6.5}, {1, 1, 1, 1, 1}, 1.0);
  for (size_t i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(pe.sigmas[i], 10.0 / 7) << i;
  EXPECT_DOUBLE_EQ(pe.sigmas[5], 10.0);
}

TEST(Tpe, LogDensityOfThePriorAlone) {
  // Only the prior: N(0.5, 1) truncated to [0, 1], at 0.5:
  //   log(phi(0) / (Phi(0.5) - Phi(-0.5))) = -0.918939 + 0.959906 = 0.0409778
  const Param x = FloatParam("x", 0, 1);
  const ParzenEstimator pe = BuildParzen(x, {}, {}, 1.0);
  EXPECT_NEAR(pe.LogPdf(0.5, x), 0.04097780049094957, 1e-12);
}

TEST(Tpe, CategoricalEstimatorByHand) {
  // Two observations (choice 0, choice 0) of three choices, prior weight 1:
  // 3 kernels; each observation kernel is (1/3 + 1, 1/3, 1/3) / 2 =
  // (2/3, 1/6, 1/6), the prior's (1/3, 1/3, 1/3); mixed with weights 1/3:
  // (2/3 + 2/3 + 1/3, 1/6 + 1/6 + 1/3, same) / 3 = (5/9, 2/9, 2/9).
  Param c;
  c.key = "optimizer";
  c.kind = ParamKind::kCategorical;
  c.choices = {"SGD", "Adam", "AdamW"};
  const auto p = BuildCategorical(c, {0, 0}, {1, 1}, 1.0);
  EXPECT_DOUBLE_EQ(p[0], 5.0 / 9);
  EXPECT_DOUBLE_EQ(p[1], 2.0 / 9);
  EXPECT_DOUBLE_EQ(p[2], 2.0 / 9);
}

TEST(Tpe, SplitRanksSucceededThenPrunedThenRunningAsTheLie) {
  std::vector<Trial> h;
  for (int i = 0; i < 18; ++i) h.push_back(Done(i, {0.0}, i));  // maximize: 17 is best
  Trial pruned;
  pruned.number = 18;
  pruned.state = TrialState::kPruned;
  pruned.params = {0.0};
  pruned.intermediate = {100};  // a high value, but pruned ranks below every succeeded trial
  h.push_back(pruned);
  Trial running;
  running.number = 19;
  running.state = TrialState::kRunning;
  running.params = {0.0};
  h.push_back(running);
  Trial failed = running;
  failed.number = 20;
  failed.state = TrialState::kFailed;
  h.push_back(failed);
  // 20 ranked (the failed one is left out): gamma = 2 good.
  TpeSplit s = SplitTrials(h, Direction::kMaximize, /*constant_liar=*/true);
  ASSERT_EQ(s.good.size(), 2u);
  EXPECT_EQ(s.good[0]->number, 16);
  EXPECT_EQ(s.good[1]->number, 17);
  EXPECT_EQ(s.bad.size(), 18u);
  EXPECT_EQ(s.bad.back()->number, 19);
  s = SplitTrials(h, Direction::kMaximize, /*constant_liar=*/false);
  EXPECT_EQ(s.good.size() + s.bad.size(), 19u);  // no running trial
  s = SplitTrials(h, Direction::kMinimize, true);
  EXPECT_EQ(s.good[0]->number, 0);
}

// A history where the answer can be read off: the good trials sit at
// int 2, choice "b" and x near 0.8; the bad ones elsewhere.
struct FixedHistory {
  SearchSpace space;
  std::vector<Trial> trials;
  FixedHistory() {
    Param i;
    i.key = "close_mosaic";
    i.kind = ParamKind::kInt;
    i.low = 0;
    i.high = 2;
    Param c;
    c.key = "optimizer";
    c.kind = ParamKind::kCategorical;
    c.choices = {"a", "b", "c"};
    space.params = {FloatParam("x", 0, 1), i, c};
    for (int n = 0; n < 20; ++n) {
      const bool good = n % 10 == 3;  // 2 of 20: gamma(20) = 2
      trials.push_back(
          good ? Done(n, {0.8 + 0.01 * n / 10, 2, 1}, 1.0)
               : Done(n, {0.05 * (n % 8), static_cast<double>(n % 2), n % 2 == 0 ? 0.0 : 2.0}, 0.0));
    }
  }
};

TEST(Tpe, SuggestionOnAFixedHistoryIsTheHandCheckedMode) {
  FixedHistory f;
  TpeOptions o;
  o.seed = 11;
  for (int64_t number = 20; number < 30; ++number) {
    o.multivariate = number >= 25;  // the same answer from the joint model
    const auto s = TpeSampler(o).Suggest(f.space, f.trials, number);
    ASSERT_EQ(s.size(), 3u);
    // Good x at 0.8, 0.81 (sigma clipped to >= 1/4); bad x in [0, 0.35]:
    // l/g grows towards 1, so the best of 24 draws from l lies high.
    EXPECT_GT(s[0], 0.6) << number;
    EXPECT_EQ(s[1], 2) << number;  // only good trials have 2; bad ones 0 and 1
    EXPECT_EQ(s[2], 1) << number;  // choice b: l(b)/g(b) is the largest
  }
}

TEST(Tpe, PriorWeightForShareByHand) {
  // share / (1 - share) * sum(weights): the prior takes `share` of the mixture.
  EXPECT_DOUBLE_EQ(PriorWeightForShare({1, 1, 1}, 0.5, 1.0), 3.0);
  EXPECT_DOUBLE_EQ(PriorWeightForShare({1, 1, 1}, 0.75, 1.0), 9.0);
  EXPECT_DOUBLE_EQ(PriorWeightForShare({0.5, 1}, 0.5, 1.0), 1.5);
  // Share 0 is the published estimator's fixed weight; no observation: the prior alone.
  EXPECT_DOUBLE_EQ(PriorWeightForShare({1, 1, 1}, 0.0, 2.0), 2.0);
  EXPECT_DOUBLE_EQ(PriorWeightForShare({}, 0.5, 1.0), 1.0);
}

TEST(Tpe, BadPriorWeightCountsFinishedTrialsNotTheLies) {
  std::vector<Trial> t(5);
  t[0].state = TrialState::kSucceeded;
  t[1].state = TrialState::kPruned;
  t[2].state = TrialState::kRunning;  // the constant liar's
  t[3].state = TrialState::kSucceeded;
  t[4].state = TrialState::kQueued;  // the constant liar's
  const std::vector<const Trial*> bad = {&t[0], &t[1], &t[2], &t[3], &t[4]};
  TpeOptions o;
  // 3 finished of weight 1: the prior weighs 3 (not 5), half of the evidence.
  EXPECT_DOUBLE_EQ(BadPriorWeight(bad, {1, 1, 1, 1, 1}, o), 3.0);
  EXPECT_DOUBLE_EQ(BadPriorWeight(bad, {0.5, 0.25, 1, 1, 1}, o), 1.75);
  o.bad_prior_share = 0;
  o.prior_weight = 1.5;
  EXPECT_DOUBLE_EQ(BadPriorWeight(bad, {1, 1, 1, 1, 1}, o), 1.5);  // the published weight
  o.bad_prior_share = 0.5;
  // Only lies: no evidence, the prior keeps prior_weight.
  EXPECT_DOUBLE_EQ(BadPriorWeight({&t[2], &t[4]}, {1, 1}, o), 1.5);
}

TEST(Tpe, BadEstimatorWithHalfItsWeightOnThePriorHasAFloor) {
  // 19 bad observations packed at x = 0.3 on [0, 1]: g's density there is
  // ~19/20 of a narrow kernel's peak with the published weights, but with
  // bad_prior_share 0.5 half of g is the wide prior, so g nowhere falls
  // below half the prior's density and l/g cannot be driven by g's gaps.
  const Param x = FloatParam("x", 0, 1);
  std::vector<double> obs(19, 0.3);
  const std::vector<double> w = TpeWeights(19);
  const ParzenEstimator stock = BuildParzen(x, obs, w, 1.0);
  const ParzenEstimator half = BuildParzen(x, obs, w, PriorWeightForShare(w, 0.5, 1.0));
  EXPECT_NEAR(half.weights.back(), 0.5, 1e-12);
  EXPECT_NEAR(stock.weights.back(), 1.0 / 20, 1e-12);
  // The prior alone: a N(0.5, 1) truncated to [0, 1], density >= ~0.94 on it.
  const double prior_floor = std::exp(half.KernelLogPdf(half.mus.size() - 1, 1.0, x));
  for (double v : {0.0, 0.3, 0.6, 0.95}) {
    EXPECT_GE(std::exp(half.LogPdf(v, x)), 0.5 * prior_floor - 1e-12) << v;
  }
  // Far from the pile, the published g is about 10x lower than the
  // shrunk one: the ratio l/g there is what the share tames.
  EXPECT_LT(stock.LogPdf(0.95, x), half.LogPdf(0.95, x) - std::log(5.0));
}

TEST(Tpe, MultivariateBandwidthIsScottsRule) {
  // 0.2 * 16^(-1/(4 + 4)) = 0.2 / sqrt(2)
  EXPECT_DOUBLE_EQ(MultivariateSigma0(16, 4), 0.2 / std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(MultivariateSigma0(0, 1), 0.2);
}

TEST(Tpe, SameSeedSameSequenceOtherSeedOtherSequence) {
  auto run = [](uint64_t seed, bool multivariate = false) {
    FixedHistory f;
    f.trials.clear();
    TpeOptions o;
    o.seed = seed;
    o.direction = Direction::kMinimize;
    o.multivariate = multivariate;
    const TpeSampler tpe(o);
    std::vector<std::vector<double>> seq;
    for (int64_t n = 0; n < 30; ++n) {
      auto s = tpe.Suggest(f.space, f.trials, n);
      const double loss = (s[0] - 0.3) * (s[0] - 0.3) + s[1] + (s[2] == 1 ? 0 : 1);
      f.trials.push_back(Done(n, s, loss));
      seq.push_back(s);
    }
    return seq;
  };
  const auto a = run(3), b = run(3), c = run(4);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  const auto m = run(3, true);
  EXPECT_EQ(m, run(3, true));
  EXPECT_NE(m, a);
}

TEST(Tpe, StartupTrialsAreTheRandomSamplersDraws) {
  FixedHistory f;
  f.trials.resize(9);  // 9 finished < 10 start-up trials
  TpeOptions o;
  o.seed = 5;
  EXPECT_EQ(TpeSampler(o).Suggest(f.space, f.trials, 9), RandomSampler(5).Suggest(f.space, f.trials, 9));
  f.trials.push_back(Done(9, {0.1, 0, 0}, 0.5));
  // Ten finished: TPE's own draw now (the random one would ignore history).
  FixedHistory g;
  EXPECT_NE(TpeSampler(o).Suggest(g.space, g.trials, 20), RandomSampler(5).Suggest(g.space, g.trials, 20));
}

TEST(Tpe, ConstantLiarMovesTheNextSuggestionAwayFromARunningTrial) {
  FixedHistory f;
  TpeOptions o;
  o.seed = 2;
  const auto first = TpeSampler(o).Suggest(f.space, f.trials, 20);
  const auto next_alone = TpeSampler(o).Suggest(f.space, f.trials, 21);
  Trial running;
  running.number = 20;
  running.state = TrialState::kRunning;
  running.params = first;
  f.trials.push_back(running);
  // Same draws (same trial number), another model: trial 20 is in g now.
  EXPECT_NE(TpeSampler(o).Suggest(f.space, f.trials, 21), next_alone);
  o.constant_liar = false;  // without the liar a running trial is invisible
  EXPECT_EQ(TpeSampler(o).Suggest(f.space, f.trials, 21), next_alone);
}

TEST(Tpe, FailedTrialsAreLeftOutOfTheModel) {
  // A diverged trial (failed) or one the job system lost (infra-failed)
  // changes nothing: the suggestion is the one without it.
  FixedHistory f;
  TpeOptions o;
  o.seed = 4;
  const auto before = TpeSampler(o).Suggest(f.space, f.trials, 21);
  for (TrialState s : {TrialState::kFailed, TrialState::kInfraFailed}) {
    Trial bad;
    bad.number = 20;
    bad.state = s;
    bad.params = {0.8, 2, 1};  // even at the good point
    bad.intermediate = {0.0};
    f.trials.push_back(bad);
    EXPECT_EQ(TpeSampler(o).Suggest(f.space, f.trials, 21), before) << TrialStateName(s);
    f.trials.pop_back();
  }
}

// 4 trials in flight; `order` says which in-flight trial (index into the
// in-flight list) finishes next. Returns every suggestion in order.
std::vector<std::vector<double>> ParallelStudy(const std::vector<int>& order, uint64_t seed) {
  FixedHistory f;
  f.trials.clear();
  TpeOptions o;
  o.seed = seed;
  o.direction = Direction::kMinimize;
  o.startup_trials = 4;
  const TpeSampler tpe(o);
  std::vector<std::vector<double>> seq;
  std::vector<size_t> in_flight;
  int64_t next = 0;
  auto suggest = [&] {
    Trial t;
    t.number = next++;
    t.state = TrialState::kRunning;
    t.params = tpe.Suggest(f.space, f.trials, t.number);
    seq.push_back(t.params);
    in_flight.push_back(f.trials.size());
    f.trials.push_back(t);
  };
  for (int i = 0; i < 4; ++i) suggest();
  for (int pick : order) {
    Trial& done = f.trials[in_flight[static_cast<size_t>(pick)]];
    in_flight.erase(in_flight.begin() + pick);
    done.state = TrialState::kSucceeded;
    done.value = (done.params[0] - 0.3) * (done.params[0] - 0.3) + done.params[1];
    suggest();
  }
  return seq;
}

TEST(Tpe, SameCompletionOrderSameSuggestionsInParallel) {
  const std::vector<int> order = {2, 0, 0, 3, 1, 1, 2, 0, 3, 3, 0, 1, 2, 2, 0, 1};
  const std::vector<int> other(order.size(), 0);  // first in, first out
  const auto a = ParallelStudy(order, 8), b = ParallelStudy(order, 8), c = ParallelStudy(other, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(RandomSampler, StaysInsideTheSpaceAndOnTheGrid) {
  SearchSpace space;
  Param i;
  i.key = "imgsz";
  i.kind = ParamKind::kInt;
  i.low = 320;
  i.high = 640;
  i.step = 32;
  space.params = {FloatParam("lr0", 1e-4, 1e-1, true), i};
  const RandomSampler r(9);
  for (int64_t n = 0; n < 200; ++n) {
    const auto s = r.Suggest(space, {}, n);
    const double lr = space.params[0].FromInternal(s[0]);
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-1);
    EXPECT_EQ(std::fmod(s[1] - 320, 32), 0);
    EXPECT_GE(s[1], 320);
    EXPECT_LE(s[1], 640);
  }
}

TEST(Samplers, MakeSamplerAndPrunerRejectUnknownNames) {
  EXPECT_TRUE(MakeSampler("tpe", {}).IsOk());
  EXPECT_TRUE(MakeSampler("random", {}).IsOk());
  TpeOptions share_one;
  share_one.bad_prior_share = 1.0;  // g would be the prior alone
  EXPECT_EQ(MakeSampler("tpe", share_one).GetStatus().Where().field, "bad_prior_share");
  TpeOptions no_prior;
  no_prior.prior_weight = 0;
  EXPECT_EQ(MakeSampler("tpe", no_prior).GetStatus().Where().field, "prior_weight");
  auto bad = MakeSampler("cmaes", {});
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "sampler");
  auto none = MakePruner("none", {}, {});
  ASSERT_TRUE(none.IsOk());
  EXPECT_EQ(none->get(), nullptr);
  EXPECT_EQ(MakePruner("hyperband", {}, {}).GetStatus().Where().field, "pruner");
  AshaOptions eta1;
  eta1.eta = 1;
  EXPECT_EQ(MakePruner("asha", eta1, {}).GetStatus().Where().field, "eta");
}

// ---------------------------------------------------------------- pruners

TEST(Asha, RungsAtMinEpochsTimesEtaPowers) {
  AshaOptions o;
  o.min_epochs = 1;
  o.max_epochs = 30;
  EXPECT_EQ(AshaRungs(o), (std::vector<int>{1, 3, 9, 27}));
  o.min_epochs = 2;
  o.max_epochs = 18;
  EXPECT_EQ(AshaRungs(o), (std::vector<int>{2, 6}));
}

TEST(Asha, ScriptedStreamPrunesPromotesAndPrunesAgain) {
  AshaOptions o;
  o.min_epochs = 1;
  o.eta = 3;
  o.max_epochs = 9;  // rungs 1, 3
  const AshaPruner asha(o);
  std::vector<Trial> study;
  // Each trial reports epoch 1; the decision is applied as the coordinator would.
  auto report = [&](int64_t number, double v) {
    Trial* t = nullptr;
    for (auto& x : study) {
      if (x.number == number) t = &x;
    }
    if (t == nullptr) {
      study.push_back({});
      t = &study.back();
      t->number = number;
      t->state = TrialState::kRunning;
    }
    t->intermediate.push_back(v);
    const PruneDecision d = asha.Decide(study, *t);
    if (d == PruneDecision::kPrune) t->state = TrialState::kPruned;
    return d;
  };
  using D = PruneDecision;
  EXPECT_EQ(report(0, 0.5), D::kContinue);  // alone at rung 1
  EXPECT_EQ(report(1, 0.4), D::kPrune);     // 2 at the rung: top max(1, 2/3) = 1 -> only 0.5
  EXPECT_EQ(report(2, 0.1), D::kPrune);
  EXPECT_EQ(report(3, 0.1), D::kPrune);
  EXPECT_EQ(report(4, 0.1), D::kPrune);
  EXPECT_EQ(report(5, 0.1), D::kPrune);  // 6 at the rung: top 2 = 0.5, 0.4
  // Trial 1 (0.4, stopped at rung 1) is now in rung 1's top 2: promoted.
  ASSERT_EQ(AshaPromotion(study, o), std::optional<int64_t>(1));
  study[1].state = TrialState::kRunning;
  EXPECT_EQ(AshaPromotion(study, o), std::nullopt);  // no one else qualifies
  // Epoch 2 is no rung; epoch 3 is.
  EXPECT_EQ(report(0, 0.5), D::kContinue);
  EXPECT_EQ(report(0, 0.6), D::kContinue);  // alone at rung 3
  EXPECT_EQ(report(1, 0.45), D::kContinue);
  EXPECT_EQ(report(1, 0.55), D::kPrune);  // 2 at rung 3, top 1 = 0.6
  // Trial 1 stopped at rung 3 is not in its top 1; it has left rung 1.
  EXPECT_EQ(AshaPromotion(study, o), std::nullopt);
  // A third trial at rung 3 that is worse does not change that; the study
  // grows to 3 at rung 3 -> top 1 still.
  EXPECT_EQ(report(6, 0.9), D::kContinue);  // best at rung 1 (7 there: top 2)
  EXPECT_EQ(report(6, 0.9), D::kContinue);
  EXPECT_EQ(report(6, 0.3), D::kPrune);  // 3 at rung 3: top 1 = 0.6
  // Epochs past the last rung are never pruned.
  EXPECT_EQ(report(0, 0.0), D::kContinue);
}

TEST(Asha, MinimizeKeepsTheLowest) {
  AshaOptions o;
  o.direction = Direction::kMinimize;
  o.max_epochs = 3;  // rung 1
  const AshaPruner asha(o);
  std::vector<Trial> study(3);
  for (int i = 0; i < 3; ++i) {
    study[i].number = i;
    study[i].state = TrialState::kRunning;
    study[i].intermediate = {static_cast<double>(3 - i)};  // 3, 2, 1
  }
  EXPECT_EQ(asha.Decide(study, study[2]), PruneDecision::kContinue);  // 1 is the lowest
  EXPECT_EQ(asha.Decide(study, study[1]), PruneDecision::kPrune);
}

TEST(MedianPruner, PrunesBelowTheSucceededMedianAfterStartup) {
  MedianOptions o;
  o.startup_trials = 2;
  const MedianPruner median(o);
  std::vector<Trial> study;
  Trial a = Done(0, {}, 0.3);
  a.intermediate = {0.1, 0.2, 0.3};
  study.push_back(a);
  Trial t;
  t.number = 5;
  t.state = TrialState::kRunning;
  t.intermediate = {0.0, 0.0};
  EXPECT_EQ(median.Decide(study, t), PruneDecision::kContinue);  // 1 succeeded < 2 start-up
  Trial b = Done(1, {}, 0.5);
  b.intermediate = {0.3, 0.4, 0.5};
  study.push_back(b);
  t.intermediate = {0.31};  // median at epoch 1 = (0.1 + 0.3) / 2 = 0.2
  EXPECT_EQ(median.Decide(study, t), PruneDecision::kContinue);
  t.intermediate = {0.31, 0.28};  // best 0.31 vs median at epoch 2 = 0.3
  EXPECT_EQ(median.Decide(study, t), PruneDecision::kContinue);
  t.intermediate = {0.25, 0.28};  // best 0.28 < 0.3
  EXPECT_EQ(median.Decide(study, t), PruneDecision::kPrune);
  o.warmup_epochs = 2;
  EXPECT_EQ(MedianPruner(o).Decide(study, t), PruneDecision::kContinue);
}

TEST(Fitness, IsTheTrainersWeighting) { EXPECT_DOUBLE_EQ(Fitness(0.5, 0.3), 0.05 + 0.27); }

}  // namespace
}  // namespace kestrel::tune
