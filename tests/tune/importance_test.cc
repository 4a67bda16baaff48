// Permutation importance on a random forest: a param the objective ignores
// gets (almost) nothing, the one that drives it gets most, and the result
// is the same for the same seed.
#include "tune/importance.h"

#include <gtest/gtest.h>

#include "tune/rng.h"

namespace kestrel::tune {
namespace {

SearchSpace ThreeParams() {
  SearchSpace s;
  for (const char* key : {"lr0", "mosaic", "mixup"}) {
    Param p;
    p.key = key;
    p.kind = ParamKind::kFloat;
    p.low = 0;
    p.high = 1;
    s.params.push_back(p);
  }
  return s;
}

// y = 10 x0 + 2 x1 (x2 ignored) at 60 random points.
std::vector<Trial> Study() {
  TuneRng rng(1);
  std::vector<Trial> trials;
  for (int i = 0; i < 60; ++i) {
    Trial t;
    t.number = i;
    t.state = TrialState::kSucceeded;
    t.params = {rng.Uniform01(), rng.Uniform01(), rng.Uniform01()};
    t.value = 10 * t.params[0] + 2 * t.params[1];
    trials.push_back(t);
  }
  return trials;
}

TEST(ParamImportances, RankTheDrivingParamFirstAndTheIgnoredOneLast) {
  auto imp = ParamImportances(ThreeParams(), Study());
  ASSERT_TRUE(imp.IsOk()) << imp.GetStatus().ToString();
  ASSERT_EQ(imp->size(), 3u);
  EXPECT_NEAR((*imp)[0] + (*imp)[1] + (*imp)[2], 1.0, 1e-12);
  // Variance explained: 100/12 for x0, 4/12 for x1 -> about 0.96 and 0.04.
  EXPECT_GT((*imp)[0], 0.8);
  EXPECT_GT((*imp)[1], (*imp)[2]);
  EXPECT_LT((*imp)[2], 0.03);
}

TEST(ParamImportances, SameSeedSameAnswerAndOnlySucceededTrialsCount) {
  std::vector<Trial> trials = Study();
  const auto a = ParamImportances(ThreeParams(), trials);
  ASSERT_TRUE(a.IsOk());
  EXPECT_EQ(*a, *ParamImportances(ThreeParams(), trials));
  // A failed trial with an absurd value changes nothing: it is not data.
  Trial failed = trials[0];
  failed.number = 60;
  failed.state = TrialState::kFailed;
  failed.value = 1e9;
  trials.push_back(failed);
  EXPECT_EQ(*a, *ParamImportances(ThreeParams(), trials));
}

TEST(ParamImportances, NeedFourSucceededTrials) {
  std::vector<Trial> trials = Study();
  trials.resize(3);
  auto imp = ParamImportances(ThreeParams(), trials);
  ASSERT_FALSE(imp.IsOk());
  EXPECT_EQ(imp.GetStatus().Code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kestrel::tune
