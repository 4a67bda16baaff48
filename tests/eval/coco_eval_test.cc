#include "eval/coco_eval.h"

#include <gtest/gtest.h>

namespace kestrel::eval {
namespace {

TEST(CocoEval, PerfectPredictionsScoreOne) {
  CocoEvaluator ev(3);
  // Sizes: 10x10 (small), 50x50 (medium), 200x200 (large).
  const std::vector<GroundTruth> gt = {
      {{0, 0, 10, 10}, 0}, {{100, 100, 150, 150}, 1}, {{200, 200, 400, 400}, 2}};
  std::vector<Detection> preds;
  for (const GroundTruth& g : gt) preds.push_back({g.box, 0.9f, g.class_id});
  ASSERT_TRUE(ev.AddImage(gt, preds).IsOk());
  ASSERT_TRUE(ev.AddImage(gt, preds).IsOk());
  const CocoMetrics m = ev.Evaluate();
  for (double s : m.stats) EXPECT_DOUBLE_EQ(s, 1.0);
  EXPECT_DOUBLE_EQ(m.per_class_ap[2], 1.0);
}

TEST(CocoEval, StepInterpolationAndMaxDets) {
  // One label; an FP ranked above the TP. Precision [0, .5] -> envelope
  // [.5, .5]; every recall threshold takes .5 -> AP .5 (the linear AP of
  // metrics.h would differ). With maxDets 1 only the FP counts: AR_1 = 0.
  CocoEvaluator ev(1);
  ASSERT_TRUE(ev.AddImage({{{0, 0, 50, 50}, 0}}, {{{0, 0, 50, 50}, 0.8f, 0}, {{300, 300, 350, 350}, 0.9f, 0}})
                  .IsOk());
  const CocoMetrics m = ev.Evaluate();
  EXPECT_DOUBLE_EQ(m.Ap(), 0.5);
  EXPECT_DOUBLE_EQ(m.Ap50(), 0.5);
  EXPECT_DOUBLE_EQ(m.stats[6], 0.0);   // AR_1
  EXPECT_DOUBLE_EQ(m.stats[8], 1.0);   // AR_100
  EXPECT_DOUBLE_EQ(m.stats[3], -1.0);  // no small labels
  EXPECT_DOUBLE_EQ(m.stats[4], 0.5);   // the 50x50 label is medium
  EXPECT_NE(CocoSummaryText(m).find("maxDets=100"), std::string::npos);
}

TEST(CocoEval, AreaRangeIgnoresOutOfRangeDetections) {
  // A large FP does not hurt AP_small; an out-of-range label is ignored.
  CocoEvaluator ev(1);
  ASSERT_TRUE(ev.AddImage({{{0, 0, 10, 10}, 0}}, {{{0, 0, 10, 10}, 0.5f, 0}, {{100, 100, 300, 300}, 0.9f, 0}})
                  .IsOk());
  const CocoMetrics m = ev.Evaluate();
  EXPECT_DOUBLE_EQ(m.stats[3], 1.0);   // AP_small
  EXPECT_DOUBLE_EQ(m.stats[5], -1.0);  // no large labels
  EXPECT_LT(m.Ap(), 1.0);
  EXPECT_FALSE(ev.AddImage({{{0, 0, 1, 1}, 3}}, {}).IsOk());
}

}  // namespace
}  // namespace kestrel::eval
