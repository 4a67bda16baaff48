// Hand-computed cases and properties of DetectionEvaluator.
#include "eval/metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "eval/ap.h"

namespace kestrel::eval {
namespace {

GroundTruth G(int c, float x1, float y1, float x2, float y2) { return {{x1, y1, x2, y2}, c}; }
Detection D(int c, float x1, float y1, float x2, float y2, float s) { return {{x1, y1, x2, y2}, s, c}; }

EvalResult Evaluate(int nc,
                    const std::vector<std::pair<std::vector<GroundTruth>, std::vector<Detection>>>& images) {
  EvalOptions o;
  o.num_classes = nc;
  DetectionEvaluator ev(o);
  for (const auto& [gt, preds] : images) EXPECT_TRUE(ev.AddImage(gt, preds).IsOk());
  auto r = ev.Finalize();
  EXPECT_TRUE(r.IsOk());
  return std::move(r).Value();
}

// Two images, three classes. IoUs are exact binary fractions so no result
// sits on a rounding edge.
//
// Image A: labels a0 = class 0 [0,0,10,10], a1 = class 1 [20,20,40,40].
//   p 0.90 class 0 [0,0,10,10]       IoU 1 with a0        -> TP at every t
//   p 0.80 class 1 [20,20,40,38.75]  IoU 375/400 = 0.9375 -> TP t<=0.90, FP at 0.95
//   p 0.70 class 0 [50,50,60,60]     no overlap           -> FP
// Image B: labels b0 = class 0 [0,0,20,20], b1 = class 2 [50,50,70,70].
//   p 0.95 class 2 [50,50,70,70]     IoU 1                -> TP at every t
//   p 0.65 class 0 [0,0,20,12.5]     IoU 250/400 = 0.625
//   p 0.60 class 0 [0,0,20,20]       IoU 1
//   Both class-0 predictions want b0. The lowest-index (most confident)
//   prediction reaching t wins: t in {.50,.55,.60}: the 0.65 one is TP and the
//   0.60 one FP; t >= .65: only the 0.60 one reaches t, so it is the TP.
//
// Class 0 (2 labels), predictions by confidence 0.90, 0.70, 0.65, 0.60:
//   t <= .60: TP FP TP FP -> recall .5 .5 1 1, precision 1 .5 2/3 .5
//     envelope over [0,.5,.5,1,1,1] / [1,1,.5,2/3,.5,0] = [1,1,2/3,2/3,.5,0]
//     samples: r<.5 -> 1; r=.5 -> 2/3 (last point with recall .5);
//     .5<r<1 -> 2/3; r=1 -> 0.
//     trapezoid: 49*.01 + (1+2/3)/2*.01 + 49*(2/3)*.01 + (2/3)/2*.01
//              = .49 + 1/120 + .33 = 0.828333...
//   t >= .65: TP FP FP TP -> recall .5 .5 .5 1, precision 1 .5 1/3 .5
//     envelope [1,1,.5,.5,.5,0]: r<.5 -> 1, .5<=r<1 -> .5, r=1 -> 0
//     trapezoid: .49 + .0075 + .245 + .0025 = 0.745
//   AP50 = 0.8283333, AP50-95 = (3*0.8283333 + 7*0.745)/10 = 0.77
// Class 1 (1 label): one TP for t<=.90: recall [1], precision [1] ->
//   samples 1 except r=1 -> 0: AP = .99 + .005 = 0.995; at t=.95 an FP: AP 0.
//   AP50 = 0.995, AP50-95 = 9*0.995/10 = 0.8955
// Class 2: TP everywhere: 0.995 / 0.995.
// mAP50 = (0.8283333 + 0.995 + 0.995)/3 = 0.9394444
// mAP50-95 = (0.77 + 0.8955 + 0.995)/3 = 0.8868333
std::vector<std::pair<std::vector<GroundTruth>, std::vector<Detection>>> HandCase() {
  return {
      {{G(0, 0, 0, 10, 10), G(1, 20, 20, 40, 40)},
       {D(0, 50, 50, 60, 60, 0.70f), D(0, 0, 0, 10, 10, 0.90f), D(1, 20, 20, 40, 38.75f, 0.80f)}},
      {{G(0, 0, 0, 20, 20), G(2, 50, 50, 70, 70)},
       {D(0, 0, 0, 20, 20, 0.60f), D(2, 50, 50, 70, 70, 0.95f), D(0, 0, 0, 20, 12.5f, 0.65f)}},
  };
}

TEST(Metrics, HandComputedTwoImagesThreeClasses) {
  const EvalResult r = Evaluate(3, HandCase());
  ASSERT_EQ(r.classes.size(), 3u);
  const double c0 = 0.49 + 1.0 / 120 + 0.33;
  for (int t = 0; t < 3; ++t) EXPECT_NEAR(r.classes[0].ap[size_t(t)], c0, 1e-12) << t;
  for (int t = 3; t < 10; ++t) EXPECT_NEAR(r.classes[0].ap[size_t(t)], 0.745, 1e-12) << t;
  EXPECT_NEAR(r.classes[0].ap5095, 0.77, 1e-12);
  for (int t = 0; t < 9; ++t) EXPECT_NEAR(r.classes[1].ap[size_t(t)], 0.995, 1e-12);
  EXPECT_NEAR(r.classes[1].ap[9], 0.0, 1e-12);
  EXPECT_NEAR(r.classes[1].ap5095, 0.8955, 1e-12);
  EXPECT_NEAR(r.classes[2].ap5095, 0.995, 1e-12);
  EXPECT_NEAR(r.map50, (c0 + 0.995 + 0.995) / 3, 1e-12);
  EXPECT_NEAR(r.map5095, (0.77 + 0.8955 + 0.995) / 3, 1e-12);
  EXPECT_NEAR(r.fitness, 0.1 * r.map50 + 0.9 * r.map5095, 1e-15);
  EXPECT_EQ(r.classes[0].instances, 2);
  EXPECT_EQ(r.classes[0].images, 2);
  EXPECT_EQ(r.classes[1].images, 1);
  EXPECT_EQ(r.instances, 4);
  EXPECT_EQ(r.predictions, 6);
  // Recall vs confidence for class 0 at IoU .5 (numpy.interp over -conf):
  // conf 0.8 lies between 0.90 (recall .5) and 0.70 (recall .5) -> .5;
  // 0.675 halfway between 0.70 (.5) and 0.65 (1.0) -> .75; precision there
  // halfway between .5 and 2/3; above 0.90 recall 0 and precision 1.
  auto at = [&](const std::vector<double>& curve, double conf) {
    return curve[size_t(std::lround(conf * 999))];
  };
  const double x675 = r.curves.x[674];  // 674/999 = 0.674675
  const double w = (0.70 - x675) / (0.70f - 0.65f);
  EXPECT_NEAR(r.curves.recall[0][674], 0.5 + 0.5 * w, 1e-6);
  EXPECT_NEAR(at(r.curves.recall[0], 0.8), 0.5, 1e-12);
  EXPECT_NEAR(at(r.curves.recall[0], 0.95), 0.0, 1e-12);
  EXPECT_NEAR(at(r.curves.precision[0], 0.95), 1.0, 1e-12);
  EXPECT_NEAR(at(r.curves.precision[0], 0.3), 0.5, 1e-12);  // below all: last value
  EXPECT_GT(r.best_conf, 0.0);
}

TEST(Metrics, ComputeApBasics) {
  EXPECT_NEAR(ComputeAp({1.0}, {1.0}), 0.995, 1e-15);  // perfect: reference convention
  EXPECT_NEAR(ComputeAp({0.0}, {0.0}), 0.0, 1e-15);
  // Only the sentinels (0,1) and (1,0): the line 1 - r, area 0.5.
  EXPECT_NEAR(ComputeAp({}, {}), 0.5, 1e-12);
  // Recall .5 at precision 1: envelope 1 up to r = .5, then the line to the
  // appended (1, 0): area .5 + .25.
  EXPECT_NEAR(ComputeAp({0.5}, {1.0}), 0.75, 1e-12);
}

std::vector<std::pair<std::vector<GroundTruth>, std::vector<Detection>>> RandomScene(std::mt19937& rng,
                                                                                     int images, int nc) {
  std::uniform_real_distribution<float> pos(0, 500), size(10, 100), jitter(-8, 8), u(0, 1);
  std::vector<std::pair<std::vector<GroundTruth>, std::vector<Detection>>> out;
  for (int i = 0; i < images; ++i) {
    std::vector<GroundTruth> gt;
    std::vector<Detection> preds;
    const int ng = int(rng() % 8);
    for (int g = 0; g < ng; ++g) {
      const float x = pos(rng), y = pos(rng);
      gt.push_back(G(int(rng() % unsigned(nc)), x, y, x + size(rng), y + size(rng)));
    }
    for (const GroundTruth& g : gt) {
      if (u(rng) < 0.8f) {
        const int c = u(rng) < 0.9f ? g.class_id : int(rng() % unsigned(nc));
        preds.push_back(D(c, g.box.x1 + jitter(rng), g.box.y1 + jitter(rng), g.box.x2 + jitter(rng),
                          g.box.y2 + jitter(rng), u(rng)));
      }
    }
    for (int k = int(rng() % 4); k > 0; --k) {
      const float x = pos(rng), y = pos(rng);
      preds.push_back(D(int(rng() % unsigned(nc)), x, y, x + size(rng), y + size(rng), u(rng)));
    }
    out.push_back({gt, preds});
  }
  return out;
}

TEST(Metrics, PerfectPredictionsGiveReferenceMaximum) {
  std::mt19937 rng(7);
  auto scene = RandomScene(rng, 20, 4);
  float s = 0.99f;
  for (auto& [gt, preds] : scene) {
    preds.clear();
    for (const GroundTruth& g : gt) preds.push_back(Detection{g.box, s -= 0.001f, g.class_id});
  }
  const EvalResult r = Evaluate(4, scene);
  // The reference's AP of a perfect curve is 0.995 (value 0 at recall 1).
  EXPECT_NEAR(r.map50, 0.995, 1e-12);
  EXPECT_NEAR(r.map5095, 0.995, 1e-12);
  EXPECT_NEAR(r.precision, 1.0, 1e-12);
  EXPECT_NEAR(r.recall, 1.0, 1e-12);
  EXPECT_EQ(r.confusion.At(0, 0) + r.confusion.At(1, 1) + r.confusion.At(2, 2) + r.confusion.At(3, 3),
            r.instances);
}

TEST(Metrics, ShuffledPredictionOrderChangesNothing) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    auto scene = RandomScene(rng, 8, 3);
    const EvalResult a = Evaluate(3, scene);
    for (auto& [gt, preds] : scene) std::shuffle(preds.begin(), preds.end(), rng);
    const EvalResult b = Evaluate(3, scene);
    EXPECT_EQ(a.map50, b.map50);
    EXPECT_EQ(a.map5095, b.map5095);
    EXPECT_EQ(a.precision, b.precision);
    EXPECT_EQ(a.recall, b.recall);
    EXPECT_EQ(a.confusion.Counts(), b.confusion.Counts());
  }
}

TEST(Metrics, DuplicateLowersPrecisionNotRecall) {
  std::vector<std::pair<std::vector<GroundTruth>, std::vector<Detection>>> one = {
      {{G(0, 0, 0, 10, 10)}, {D(0, 0, 0, 10, 10, 0.9f)}}};
  auto two = one;
  two[0].second.push_back(D(0, 0, 0, 10, 10, 0.8f));
  const EvalResult a = Evaluate(1, one), b = Evaluate(1, two);
  // Below both confidences: recall 1 in both, precision 1 -> 0.5.
  EXPECT_NEAR(a.curves.recall[0][100], 1.0, 1e-12);
  EXPECT_NEAR(b.curves.recall[0][100], 1.0, 1e-12);
  EXPECT_NEAR(a.curves.precision[0][100], 1.0, 1e-12);
  EXPECT_NEAR(b.curves.precision[0][100], 0.5, 1e-12);
  EXPECT_NEAR(b.recall, a.recall, 1e-12);
  EXPECT_LE(b.precision, a.precision);
  EXPECT_EQ(b.errors.Total().duplicate, 1);
  EXPECT_EQ(b.errors.Total().true_positive, 1);
}

TEST(Metrics, ImageWithoutLabelsOnlyAddsFalsePositives) {
  std::vector<std::pair<std::vector<GroundTruth>, std::vector<Detection>>> base = {
      {{G(0, 0, 0, 10, 10)}, {D(0, 0, 0, 10, 10, 0.5f)}}};
  auto more = base;
  more.push_back({{}, {D(0, 0, 0, 10, 10, 0.9f), D(1, 5, 5, 9, 9, 0.9f)}});
  const EvalResult a = Evaluate(2, base), b = Evaluate(2, more);
  EXPECT_EQ(b.instances, a.instances);
  EXPECT_EQ(b.classes.size(), 1u);  // class 1 has no labels: not in the means
  EXPECT_EQ(b.classes[0].predictions, 2);
  // The FP now ranks first: recall still reaches 1 but AP drops.
  EXPECT_NEAR(b.curves.recall[0][0], 1.0, 1e-12);
  EXPECT_LT(b.map50, a.map50);
  EXPECT_EQ(b.confusion.At(0, 2), 1);  // class 0 predicted on background
  EXPECT_EQ(b.confusion.At(1, 2), 1);
  EXPECT_EQ(b.errors.Total().background, 2);
}

TEST(Metrics, BadInputIsRejectedAndChangesNothing) {
  EvalOptions o;
  o.num_classes = 2;
  DetectionEvaluator ev(o);
  ASSERT_TRUE(ev.AddImage({G(0, 0, 0, 10, 10)}, {D(0, 0, 0, 10, 10, 0.9f)}).IsOk());
  Status s = ev.AddImage({G(0, 0, 0, 10, 10)}, {D(0, 0, 0, 10, 10, 0.9f), D(5, 0, 0, 1, 1, .5f)});
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Where().field, "predictions[1].class_id");
  s = ev.AddImage({G(0, 0, 0, std::nanf(""), 10)}, {});
  EXPECT_EQ(s.Where().field, "labels[0].box");
  auto r = ev.Finalize();
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->images, 1);
  EXPECT_EQ(r->instances, 1);
  EvalOptions bad;
  bad.num_classes = 0;
  EXPECT_FALSE(DetectionEvaluator(bad).AddImage({}, {}).IsOk());
}

TEST(Metrics, ConfAndMaxDetFilterAreApplied) {
  EvalOptions o;
  o.num_classes = 1;
  o.max_det = 2;
  DetectionEvaluator ev(o);
  ASSERT_TRUE(ev.AddImage({G(0, 0, 0, 10, 10)}, {D(0, 0, 0, 10, 10, 0.0005f), D(0, 50, 50, 60, 60, 0.9f),
                                                 D(0, 70, 70, 80, 80, 0.8f), D(0, 0, 0, 10, 10, 0.7f)})
                  .IsOk());
  auto r = ev.Finalize();
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->predictions, 2);  // the two most confident (both FPs)
  EXPECT_EQ(r->predictions_dropped, 2);
  EXPECT_EQ(r->map50, 0.0);
}

TEST(Metrics, NoLabelsAnywhereGivesZeros) {
  const EvalResult r = Evaluate(2, {{{}, {D(0, 0, 0, 5, 5, 0.5f)}}});
  EXPECT_EQ(r.classes.size(), 0u);
  EXPECT_EQ(r.map50, 0.0);
  EXPECT_EQ(r.precision, 0.0);
}

TEST(Metrics, ConfusionMatrixConvention) {
  ConfusionMatrix cm(2, 0.25, 0.45);
  // label 0 found as class 1; label 1 missed; a class 0 FP on background;
  // a prediction below conf ignored.
  cm.ProcessImage({G(0, 0, 0, 10, 10), G(1, 100, 100, 110, 110)},
                  {D(1, 0, 0, 10, 10, 0.9f), D(0, 50, 50, 60, 60, 0.9f), D(1, 100, 100, 110, 110, 0.2f)});
  EXPECT_EQ(cm.At(1, 0), 1);
  EXPECT_EQ(cm.At(2, 1), 1);
  EXPECT_EQ(cm.At(0, 2), 1);
  int64_t total = 0;
  for (int64_t v : cm.Counts()) total += v;
  EXPECT_EQ(total, 3);
  const std::vector<double> n = cm.ColumnNormalized();
  EXPECT_DOUBLE_EQ(n[1 * 3 + 0], 1.0);
}

TEST(Metrics, ErrorTypesFollowDocumentedThresholds) {
  ErrorAnalyzer ea(3);
  // Labels: class 0 at [0,0,10,10], class 1 at [100,100,110,110].
  const std::vector<GroundTruth> gt = {G(0, 0, 0, 10, 10), G(1, 100, 100, 110, 110)};
  ea.ProcessImage(gt, {
                          D(0, 0, 0, 10, 10, 0.99f),        // TP
                          D(0, 0, 0, 10, 9, 0.98f),         // duplicate (IoU .9, label taken)
                          D(2, 100, 100, 110, 110, 0.97f),  // classification
                          D(0, 0, 0, 10, 3, 0.96f),         // IoU .3 right class: localization
                          D(2, 100, 100, 110, 103, 0.95f),  // IoU .3 wrong class: both
                          D(1, 300, 300, 310, 310, 0.94f),  // background
                          D(1, 300, 300, 310, 310, 0.10f),  // below conf: ignored
                      });
  const ErrorCounts t = ea.Total();
  EXPECT_EQ(t.true_positive, 1);
  EXPECT_EQ(t.duplicate, 1);
  EXPECT_EQ(t.classification, 1);
  EXPECT_EQ(t.localization, 1);
  EXPECT_EQ(t.both, 1);
  EXPECT_EQ(t.background, 1);
  EXPECT_EQ(t.missed, 1);  // the class 1 label
  EXPECT_EQ(ea.PerClass()[1].missed, 1);
  EXPECT_EQ(ea.PerClass()[2].classification, 1);
  EXPECT_EQ(ea.PerClass()[0].FalsePositives(), 2);
}

}  // namespace
}  // namespace kestrel::eval
