// The fast evaluator against a straightforward transcription of the reference
// algorithm (docs/metrics.md), written here independently, on thousands of
// random cases. Tolerance 1e-9.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "eval/metrics.h"
#include "naive_reference.h"

namespace kestrel::eval {
namespace {

using naive::Image;
using naive::Naive;
using naive::NaiveResult;

std::vector<Image> RandomImages(std::mt19937& rng, int nc) {
  std::uniform_real_distribution<float> u(0, 1);
  auto coord = [&](float lo, float hi) {  // quarter pixels: exact IoU arithmetic
    return std::round((lo + (hi - lo) * u(rng)) * 4) / 4;
  };
  std::vector<Image> out(1 + rng() % 6);
  for (Image& im : out) {
    const int ng = int(rng() % 9);
    for (int g = 0; g < ng; ++g) {
      if (g > 0 && u(rng) < 0.1f) {  // duplicate label: IoU ties between labels
        im.gt.push_back(im.gt.back());
        continue;
      }
      const float x = coord(0, 200), y = coord(0, 200);
      im.gt.push_back({{x, y, x + coord(4, 60), y + coord(4, 60)}, int(rng() % unsigned(nc))});
    }
    const int np = int(rng() % 16);
    for (int d = 0; d < np; ++d) {
      Detection det;
      if (!im.gt.empty() && u(rng) < 0.75f) {
        const GroundTruth& g = im.gt[rng() % im.gt.size()];
        const float j = 6 * u(rng);
        det.box = {g.box.x1 + coord(-j, j), g.box.y1 + coord(-j, j), g.box.x2 + coord(-j, j),
                   g.box.y2 + coord(-j, j)};
        det.class_id = u(rng) < 0.85f ? g.class_id : int(rng() % unsigned(nc));
      } else {
        const float x = coord(0, 200), y = coord(0, 200);
        det.box = {x, y, x + coord(4, 60), y + coord(4, 60)};
        det.class_id = int(rng() % unsigned(nc));
      }
      // Some quantized scores so ties in confidence happen.
      det.score = u(rng) < 0.3f ? std::round(u(rng) * 10) / 10 + 0.05f : 0.002f + 0.99f * u(rng);
      im.preds.push_back(det);
    }
  }
  return out;
}

TEST(Equivalence, FastEvaluatorMatchesNaiveReferenceOnRandomCases) {
  std::mt19937 rng(2024);
  int compared = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int nc = 1 + int(rng() % 4);
    const std::vector<Image> images = RandomImages(rng, nc);
    EvalOptions o;
    o.num_classes = nc;
    DetectionEvaluator ev(o);
    for (const Image& im : images) ASSERT_TRUE(ev.AddImage(im.gt, im.preds).IsOk());
    auto fast = ev.Finalize();
    ASSERT_TRUE(fast.IsOk());
    const NaiveResult slow = Naive(images, nc);
    ASSERT_EQ(fast->classes.size(), slow.classes.size()) << trial;
    for (size_t c = 0; c < slow.classes.size(); ++c) {
      ASSERT_EQ(fast->classes[c].class_id, slow.classes[c]);
      for (size_t t = 0; t < 10; ++t) {
        ASSERT_NEAR(fast->classes[c].ap[t], slow.ap[c][t], 1e-9) << trial << " c" << c << " t" << t;
      }
    }
    ASSERT_NEAR(fast->map50, slow.map50, 1e-9) << trial;
    ASSERT_NEAR(fast->map5095, slow.map5095, 1e-9) << trial;
    ASSERT_NEAR(fast->precision, slow.p, 1e-9) << trial;
    ASSERT_NEAR(fast->recall, slow.r, 1e-9) << trial;
    ++compared;
  }
  EXPECT_EQ(compared, 3000);
}

// MatchPredictions alone, per threshold, against the pairwise rule.
TEST(Equivalence, MatchPredictionsLowestIndexRule) {
  // One label, three same-class predictions in list order with IoUs .6, .9, .7.
  const std::vector<GroundTruth> gt = {{{0, 0, 100, 100}, 0}};
  const std::vector<Detection> preds = {
      {{0, 0, 100, 60}, 0.9f, 0}, {{0, 0, 100, 90}, 0.8f, 0}, {{0, 0, 100, 70}, 0.7f, 0}};
  const std::vector<uint16_t> tp = MatchPredictions(gt, preds);
  // t .50-.60: prediction 0 (lowest index) wins although its IoU is lowest.
  // t .65-.70: prediction 0 no longer reaches t; prediction 1 wins.
  // t .75-.90: only prediction 1 reaches t. t .95: nobody.
  EXPECT_EQ(tp[0], 0b0000000111);
  EXPECT_EQ(tp[1], 0b0111111000);
  EXPECT_EQ(tp[2], 0);
}

}  // namespace
}  // namespace kestrel::eval
