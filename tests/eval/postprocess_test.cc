// Decode, NMS (against a naive class-offset NMS) and letterbox geometry.
#include "eval/postprocess.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

namespace kestrel::eval {
namespace {

// The textbook version: sort (stable), shift boxes by class * 7680 unless
// agnostic, full O(n^2) suppression, then truncate to max_det.
std::vector<Detection> NaiveNms(std::vector<Detection> c, const NmsOptions& o) {
  std::stable_sort(c.begin(), c.end(),
                   [](const Detection& a, const Detection& b) { return a.score > b.score; });
  if (c.size() > size_t(o.max_nms)) c.resize(size_t(o.max_nms));
  std::vector<Box> shifted(c.size());
  std::vector<float> area(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    const float off = o.agnostic ? 0.f : float(c[i].class_id) * 7680.f;
    shifted[i] = {c[i].box.x1 + off, c[i].box.y1 + off, c[i].box.x2 + off, c[i].box.y2 + off};
    area[i] = BoxAreaF(shifted[i]);
  }
  std::vector<bool> removed(c.size(), false);
  std::vector<Detection> out;
  for (size_t i = 0; i < c.size(); ++i) {
    if (removed[i]) continue;
    out.push_back(c[i]);
    for (size_t j = i + 1; j < c.size(); ++j) {
      if (IouF(shifted[i], area[i], shifted[j], area[j]) > o.iou) removed[j] = true;
    }
  }
  if (out.size() > size_t(o.max_det)) out.resize(size_t(o.max_det));
  return out;
}

bool Same(const std::vector<Detection>& a, const std::vector<Detection>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].score != b[i].score || a[i].class_id != b[i].class_id || a[i].box.x1 != b[i].box.x1 ||
        a[i].box.y1 != b[i].box.y1 || a[i].box.x2 != b[i].box.x2 || a[i].box.y2 != b[i].box.y2) {
      return false;
    }
  }
  return true;
}

TEST(Nms, MatchesNaiveOnRandomInputs) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0, 1);
  // Quarter-pixel coordinates keep every area/intersection exact in float, so
  // the class-offset baseline computes bit-identical IoUs.
  auto q = [&](float lo, float hi) { return std::round((lo + (hi - lo) * u(rng)) * 4) / 4; };
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = int(rng() % 300);
    std::vector<Detection> cand;
    for (int i = 0; i < n; ++i) {
      const float x = q(0, 560), y = q(0, 560);
      cand.push_back({{x, y, x + q(2, 80), y + q(2, 80)},
                      u(rng) < 0.2f ? std::round(u(rng) * 20) / 20 : u(rng),
                      int(rng() % 10)});
    }
    NmsOptions o;
    o.iou = 0.3f + 0.6f * u(rng);
    o.agnostic = trial % 3 == 0;
    o.max_det = trial % 5 == 0 ? 1 + int(rng() % 20) : 300;
    o.max_nms = trial % 7 == 0 ? 1 + int(rng() % 100) : 30000;
    const auto fast = Nms(cand, o);
    const auto slow = NaiveNms(cand, o);
    ASSERT_TRUE(Same(fast, slow)) << "trial " << trial << " fast " << fast.size() << " slow " << slow.size();
  }
}

TEST(Nms, ClassAwareKeepsOverlappingBoxesOfOtherClasses) {
  const std::vector<Detection> c = {
      {{0, 0, 10, 10}, 0.9f, 0}, {{0, 0, 10, 10}, 0.8f, 1}, {{0, 0, 10, 9}, 0.7f, 0}};
  NmsOptions o;
  EXPECT_EQ(Nms(c, o).size(), 2u);
  o.agnostic = true;
  EXPECT_EQ(Nms(c, o).size(), 1u);
  o.iou = 0.95f;  // IoU .9 is not > .95: kept
  EXPECT_EQ(Nms(c, o).size(), 2u);
}

// Raw [4 + nc, A] with 3 anchors, 2 classes.
TEST(Decode, BestClassAndMultiLabel) {
  const int nc = 2, a = 3;
  std::vector<float> raw = {
      50,   100,  200,   // cx
      50,   100,  200,   // cy
      20,   10,   40,    // w
      10,   10,   40,    // h
      0.9f, 0.1f, 0.3f,  // class 0
      0.6f, 0.2f, 0.3f,  // class 1
  };
  NmsOptions o;
  o.conf = 0.25f;
  auto d = DecodeYoloOutput(raw.data(), nc, a, o);
  ASSERT_EQ(d.size(), 2u);  // anchor 1 is below conf
  EXPECT_EQ(d[0].class_id, 0);
  EXPECT_FLOAT_EQ(d[0].score, 0.9f);
  EXPECT_FLOAT_EQ(d[0].box.x1, 40);
  EXPECT_FLOAT_EQ(d[0].box.y2, 55);
  EXPECT_EQ(d[1].class_id, 0);            // tie 0.3/0.3: first class
  EXPECT_FLOAT_EQ(d[0].runner_up, 0.6f);  // class 1 at the same anchor
  EXPECT_FLOAT_EQ(d[1].runner_up, 0.3f);
  o.multi_label = true;
  d = DecodeYoloOutput(raw.data(), nc, a, o);
  ASSERT_EQ(d.size(), 4u);  // (0,c0) (0,c1) (2,c0) (2,c1)
  EXPECT_EQ(d[1].class_id, 1);
  EXPECT_FLOAT_EQ(d[1].score, 0.6f);
  EXPECT_FLOAT_EQ(d[0].runner_up, 0.6f);  // the best other class, per hit
  EXPECT_FLOAT_EQ(d[1].runner_up, 0.9f);
  const auto kept = PostprocessYolo(raw.data(), nc, a, o);
  EXPECT_EQ(kept.size(), 4u);  // different classes or no overlap
  EXPECT_FLOAT_EQ(kept[0].score, 0.9f);
  EXPECT_FLOAT_EQ(kept[0].runner_up, 0.6f);  // NMS keeps it
  // One class: no other class, runner-up 0.
  d = DecodeYoloOutput(raw.data(), 1, a, o);
  ASSERT_FALSE(d.empty());
  for (const Detection& x : d) EXPECT_EQ(x.runner_up, 0.f);
}

TEST(Letterbox, GeometryAndMappingBack) {
  const Letterbox lb = ComputeLetterbox(640, 480, 640, 640);
  EXPECT_DOUBLE_EQ(lb.scale, 1.0);
  EXPECT_DOUBLE_EQ(lb.pad_x, 0.0);
  EXPECT_DOUBLE_EQ(lb.pad_y, 80.0);
  const Letterbox lb2 = ComputeLetterbox(1280, 720, 640, 640);
  EXPECT_DOUBLE_EQ(lb2.scale, 0.5);
  EXPECT_DOUBLE_EQ(lb2.pad_y, 140.0);
  const Box b = ScaleToOriginal(Box{10, 150, 100, 700}, lb2, 1280, 720);
  EXPECT_FLOAT_EQ(b.x1, 20);
  EXPECT_FLOAT_EQ(b.y1, 20);
  EXPECT_FLOAT_EQ(b.x2, 200);
  EXPECT_FLOAT_EQ(b.y2, 720);  // clipped
  NmsOptions bad;
  bad.max_det = 0;
  EXPECT_EQ(bad.Validate().Where().field, "max_det");
}

}  // namespace
}  // namespace kestrel::eval
