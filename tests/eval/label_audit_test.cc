// eval/label_audit.h: the kinds and scores on a hand-made image, the
// planted errors, and the ranking's recall against a simulated detector
// (the benchmark with a real model: bench/label_audit, docs/datasets.md).
#include "eval/label_audit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kestrel::eval {
namespace {

GroundTruth Gt(float x1, float y1, float x2, float y2, int cls) { return {Box{x1, y1, x2, y2}, cls}; }
Detection Det(float x1, float y1, float x2, float y2, float score, int cls) {
  return {Box{x1, y1, x2, y2}, score, cls};
}

const AuditItem* Find(const std::vector<AuditItem>& items, AuditKind kind, int label, int pred) {
  for (const AuditItem& it : items) {
    if (it.kind == kind && it.label == label && it.prediction == pred) return &it;
  }
  return nullptr;
}

TEST(LabelAudit, EachKindWithItsHandComputedScore) {
  // Label 0: confirmed (IoU 1, score 0.9). Label 1: the model says class 2
  // at 0.8 and class 1 (the label's) at 0.3 -> wrong class, 0.8 * (1 - 0.3).
  // Label 2: moved by half its width (IoU 1/3) under a 0.9 prediction ->
  // localisation 0.9 * (1 - (1/3) / 2). Label 3: nothing there -> spurious 1.
  // Prediction at (200..240): no label -> missing 0.7. A 0.1 prediction is
  // below conf and ignored.
  std::vector<std::vector<GroundTruth>> labels = {
      {Gt(0, 0, 10, 10, 0), Gt(20, 0, 30, 10, 1), Gt(45, 0, 55, 10, 0), Gt(100, 100, 120, 120, 1)}};
  std::vector<std::vector<Detection>> preds = {
      {Det(0, 0, 10, 10, 0.9F, 0), Det(20, 0, 30, 10, 0.8F, 2), Det(20, 0, 30, 10, 0.3F, 1),
       Det(40, 0, 50, 10, 0.9F, 0), Det(200, 200, 240, 240, 0.7F, 1), Det(300, 300, 310, 310, 0.1F, 0)}};
  const std::vector<AuditItem> items = AuditLabels(labels, preds);
  ASSERT_EQ(items.size(), 5u);
  const AuditItem* ok = Find(items, AuditKind::kOk, 0, 0);
  ASSERT_NE(ok, nullptr);
  EXPECT_NEAR(ok->score, 0.5 * 0.1 * 0.0, 1e-6);
  const AuditItem* wrong = Find(items, AuditKind::kWrongClass, 1, 1);
  ASSERT_NE(wrong, nullptr);
  EXPECT_NEAR(wrong->score, 0.8 * (1 - 0.3), 1e-6);
  EXPECT_EQ(wrong->label_class, 1);
  EXPECT_EQ(wrong->predicted_class, 2);
  const AuditItem* moved = Find(items, AuditKind::kLocalisation, 2, 3);
  ASSERT_NE(moved, nullptr);
  EXPECT_NEAR(moved->iou, 5.0 / 15.0, 1e-6);
  EXPECT_NEAR(moved->score, 0.9 * (1 - 5.0 / 15.0 / 2), 1e-6);
  const AuditItem* spurious = Find(items, AuditKind::kSpurious, 3, -1);
  ASSERT_NE(spurious, nullptr);
  EXPECT_DOUBLE_EQ(spurious->score, 1.0);
  const AuditItem* missing = Find(items, AuditKind::kMissing, -1, 4);
  ASSERT_NE(missing, nullptr);
  EXPECT_NEAR(missing->score, 0.7, 1e-6);
  // Review order: spurious 1, localisation 0.75, missing 0.7, wrong 0.56, ok 0.
  ASSERT_EQ(items[0].kind, AuditKind::kSpurious);
  EXPECT_EQ(items[1].kind, AuditKind::kLocalisation);
  EXPECT_EQ(items[2].kind, AuditKind::kMissing);
  EXPECT_EQ(items[3].kind, AuditKind::kWrongClass);
  EXPECT_EQ(items[4].kind, AuditKind::kOk);
  // The label-side class prediction (0.3) is explained by its object, not a missing box.
  EXPECT_EQ(Find(items, AuditKind::kMissing, -1, 2), nullptr);
  const nlohmann::json j = AuditItemJson(*wrong);
  EXPECT_EQ(j["kind"], "wrong_class");
  EXPECT_EQ(j["label"]["class"], 1);
  EXPECT_EQ(j["prediction"]["class"], 2);
}

TEST(LabelAudit, ASupportingPredictionLowersASpuriousLabelsScore) {
  std::vector<std::vector<GroundTruth>> labels = {{Gt(0, 0, 10, 10, 0)}};
  // IoU 1/19 (below loose_iou): support 0.8 / 19, score 1 - sqrt(support);
  // a prediction below conf supports it too.
  std::vector<std::vector<Detection>> preds = {{Det(9, 0, 19, 10, 0.8F, 0)}};
  const std::vector<AuditItem> items = AuditLabels(labels, preds);
  const AuditItem* s = Find(items, AuditKind::kSpurious, 0, -1);
  ASSERT_NE(s, nullptr);
  EXPECT_NEAR(s->score, 1 - std::sqrt(0.8 / 19.0), 1e-6);
  preds[0].push_back(Det(0, 0, 10, 10, 0.09F, 0));  // below conf, on the label
  // Find returns a pointer into the items: they must outlive it.
  const std::vector<AuditItem> again = AuditLabels(labels, preds);
  const AuditItem* weak = Find(again, AuditKind::kSpurious, 0, -1);
  ASSERT_NE(weak, nullptr);
  EXPECT_NEAR(weak->score, 1 - std::sqrt(0.09), 1e-6);
}

// Truth: `n` images of 100x100 with 1-4 boxes of 3 classes.
std::vector<std::vector<GroundTruth>> Truth(std::vector<std::pair<int, int>>* sizes, size_t n = 40) {
  std::mt19937_64 rng(7);
  std::vector<std::vector<GroundTruth>> truth(n);
  for (auto& img : truth) {
    sizes->emplace_back(100, 100);
    const int n = 1 + int(rng() % 4);
    for (int k = 0; k < n; ++k) {
      const float x = float(rng() % 70), y = float(rng() % 70), s = float(12 + rng() % 18);
      img.push_back(Gt(x, y, x + s, y + s, int(rng() % 3)));
    }
  }
  return truth;
}

TEST(LabelAudit, PlantingIsSeededAndMakesEachKind) {
  std::vector<std::pair<int, int>> sizes;
  const auto truth = Truth(&sizes);
  size_t total = 0;
  for (const auto& t : truth) total += t.size();
  const PlantedLabels a = PlantLabelErrors(truth, sizes, 3, 0.05, 1);
  const PlantedLabels b = PlantLabelErrors(truth, sizes, 3, 0.05, 1);
  const PlantedLabels c = PlantLabelErrors(truth, sizes, 3, 0.05, 2);
  const size_t n = size_t(std::lround(0.05 * double(total)));
  ASSERT_EQ(a.errors.size(), 4 * n);
  std::vector<size_t> per(5, 0);
  for (const PlantedError& e : a.errors) ++per[size_t(e.kind)];
  for (AuditKind k :
       {AuditKind::kMissing, AuditKind::kWrongClass, AuditKind::kLocalisation, AuditKind::kSpurious}) {
    EXPECT_EQ(per[size_t(k)], n) << AuditKindName(k);
  }
  size_t after = 0;
  for (const auto& t : a.labels) after += t.size();
  EXPECT_EQ(after, total);  // n removed, n added
  ASSERT_EQ(b.errors.size(), a.errors.size());
  bool differs = false;
  for (size_t i = 0; i < a.errors.size(); ++i) {
    EXPECT_EQ(a.errors[i].image, b.errors[i].image);
    EXPECT_EQ(a.errors[i].box.x1, b.errors[i].box.x1);
    differs = differs || a.errors[i].image != c.errors[i].image || a.errors[i].box.x1 != c.errors[i].box.x1;
  }
  EXPECT_TRUE(differs) << "another seed planted the same errors";
  // A shifted box overlaps its truth at IoU 0.33-0.49 (one axis, 35-50 %).
  for (const PlantedError& e : a.errors) {
    if (e.kind != AuditKind::kLocalisation) continue;
    EXPECT_GT(Iou(e.truth, e.box), 0.3);
    EXPECT_LT(Iou(e.truth, e.box), 0.5);
  }
}

TEST(LabelAudit, TheTopTenPercentFindMostPlantedErrorsOfASimulatedDetector) {
  // A detector that knows the truth: each true box found with score
  // 0.6-0.95 and ~1 px of jitter, 10 % of objects found only weakly
  // (0.02-0.15, below conf), a few weak false positives. The audit ranks the planted labels' errors
  // first. 1.25 % of each kind (5 % in all): with 5 % of each (20 % of the labels wrong) the top 10 % of the
  // list could hold at most half of them.
  std::vector<std::pair<int, int>> sizes;
  const auto truth = Truth(&sizes, 160);
  std::mt19937_64 rng(11);
  std::vector<std::vector<Detection>> preds(truth.size());
  for (size_t i = 0; i < truth.size(); ++i) {
    for (const GroundTruth& g : truth[i]) {
      const bool weak = rng() % 10 == 0;
      const float j = float(int(rng() % 3) - 1);
      const float u = float(rng() % 100) / 100;
      const float score = weak ? 0.02F + 0.13F * u : 0.6F + 0.35F * u;
      preds[i].push_back(Det(g.box.x1 + j, g.box.y1, g.box.x2 + j, g.box.y2, score, g.class_id));
    }
    if (rng() % 4 == 0) preds[i].push_back(Det(80, 80, 95, 95, 0.3F, 0));
  }
  const PlantedLabels planted = PlantLabelErrors(truth, sizes, 3, 0.0125, 3);
  ASSERT_GE(planted.errors.size(), 16u);
  const std::vector<AuditItem> items = AuditLabels(planted.labels, preds);
  const AuditRecall at10 = RecallAt(items, planted.errors, 0.10);
  const AuditRecall at5 = RecallAt(items, planted.errors, 0.05);
  const AuditRecall all = RecallAt(items, planted.errors, 1.0);
  EXPECT_GE(at10.recall, 0.7) << at10.found << " of " << at10.planted << " in the top " << at10.reviewed;
  EXPECT_LE(at5.found, at10.found);
  EXPECT_GE(all.recall, at10.recall);
  // A ranking in reverse finds far fewer: the order carries the signal.
  std::vector<AuditItem> reversed(items.rbegin(), items.rend());
  EXPECT_LT(RecallAt(reversed, planted.errors, 0.10).recall, 0.3);
}

}  // namespace
}  // namespace kestrel::eval
