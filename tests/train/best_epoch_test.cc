// Which epoch is "best" (and so when `patience` stops a run): issue 12's bug,
// where a negative fitness (no val split: minus the train loss) made every
// epoch the best and patience never fired.
#include <gtest/gtest.h>

#include "train/checkpoint.h"

namespace kestrel::train {
namespace {

TEST(BestEpochTest, FirstRecordedEpochIsAlwaysBest) {
  CheckpointState s;  // best_epoch 0: nothing recorded yet
  EXPECT_TRUE(IsNewBest(s, -12.5));
  EXPECT_TRUE(IsNewBest(s, 0.0));
  EXPECT_TRUE(IsNewBest(s, 0.3));
}

TEST(BestEpochTest, NegativeFitnessMustImproveToBeBest) {
  CheckpointState s;
  s.best_epoch = 3;
  s.best_fitness = -5.0;             // train loss 5.0 at epoch 3
  EXPECT_FALSE(IsNewBest(s, -6.0));  // loss went up: not best (the old rule said best)
  EXPECT_FALSE(IsNewBest(s, -5.0));  // equal: not an improvement
  EXPECT_TRUE(IsNewBest(s, -4.0));
}

TEST(BestEpochTest, ValidationFitnessStrictlyBetter) {
  CheckpointState s;
  s.best_epoch = 7;
  s.best_fitness = 0.42;
  EXPECT_FALSE(IsNewBest(s, 0.41));
  EXPECT_FALSE(IsNewBest(s, 0.42));
  EXPECT_TRUE(IsNewBest(s, 0.43));
}

// What the trainer does with it: patience counts epochs since the best one.
TEST(BestEpochTest, PatienceStopsARunWithoutValSplit) {
  CheckpointState s;
  const double losses[] = {9.0, 8.0, 8.5, 8.7, 8.9, 9.1};
  const int patience = 3;
  int stopped_at = 0;
  for (int e = 1; e <= 6; ++e) {
    const double fitness = -losses[e - 1];
    if (IsNewBest(s, fitness)) {
      s.best_fitness = fitness;
      s.best_epoch = e;
    }
    if (e - s.best_epoch >= patience) {
      stopped_at = e;
      break;
    }
  }
  EXPECT_EQ(s.best_epoch, 2);
  EXPECT_EQ(stopped_at, 5);
}

}  // namespace
}  // namespace kestrel::train
