// Box statistics of a dataset version (app/dataset_box_stats.h, issue 33
// finding 8): each histogram and density bins a hand-placed box where it
// should, per class counts, boxes per image, the JSON the dataset page reads.
#include "app/dataset_box_stats.h"

#include <gtest/gtest.h>

#include <numeric>

namespace kestrel::app {
namespace {

data::ManifestEntry Entry(const std::string& path, int w, int h, std::vector<data::Box> boxes) {
  data::ManifestEntry e;
  e.path = path;
  e.width = w;
  e.height = h;
  e.boxes = std::move(boxes);
  return e;
}

int64_t Sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

int64_t Sum(const std::vector<std::vector<int64_t>>& m) {
  int64_t t = 0;
  for (const auto& row : m) t += Sum(row);
  return t;
}

TEST(DatasetBoxStats, BinsEachBoxWhereItIs) {
  data::Manifest m;
  m.names = {"cat", "dog", "bird"};
  // A 200x100 image: a box in the top-left corner, square in pixels
  // (w 0.1 of 200 = 20 px, h 0.2 of 100 = 20 px), and a wide one at the
  // bottom-right edge (exactly 1.0 lands in the last bin).
  m.entries.push_back(Entry("a.jpg", 200, 100, {{0, 0.02, 0.03, 0.1, 0.2}, {1, 1.0, 1.0, 0.8, 0.1}}));
  m.entries.push_back(Entry("b.jpg", 100, 100, {}));  // a background image
  m.entries.push_back(Entry("c.jpg", 100, 100, {{0, 0.5, 0.5, 0.5, 0.5}, {7, 0.5, 0.5, 0.0, 0.5}}));
  const BoxStats s = ComputeBoxStats(m);

  EXPECT_EQ(s.images, 3);
  EXPECT_EQ(s.boxes, 4);
  ASSERT_EQ(s.center.size(), static_cast<size_t>(kBoxStatsBins));
  EXPECT_EQ(s.center[0][0], 1);    // (cx 0.02, cy 0.03)
  EXPECT_EQ(s.center[19][19], 1);  // (1.0, 1.0)
  EXPECT_EQ(s.center[10][10], 2);  // both boxes of c.jpg
  EXPECT_EQ(Sum(s.center), 4);
  EXPECT_EQ(s.size[4][2], 1);  // h 0.2 -> row 4, w 0.1 -> column 2
  EXPECT_EQ(s.size[2][16], 1);
  EXPECT_EQ(s.width[2], 1);
  EXPECT_EQ(s.width[16], 1);
  EXPECT_EQ(s.width[0], 1);  // the zero-width box still has a width
  EXPECT_EQ(s.height[10], 2);

  // Aspect in pixels: 20x20 px and 50x50 px are 1:1 (log2 0 -> the bin that
  // starts at ratio 1), 160x10 px is 16:1 (past 8: the last bin); the
  // zero-width box has no ratio.
  const size_t one = static_cast<size_t>(kBoxAspectLog2Max * kBoxAspectStepsPerOctave);
  EXPECT_EQ(s.aspect[one], 2);
  EXPECT_EQ(s.aspect.back(), 1);
  EXPECT_EQ(Sum(s.aspect), 3);
  EXPECT_EQ(s.degenerate, 1);

  // Per class: cat twice over two images, dog once, bird never; class 7 has no name.
  ASSERT_EQ(s.classes.size(), 3u);
  EXPECT_EQ(s.classes[0].boxes, 2);
  EXPECT_EQ(s.classes[0].images, 2);
  EXPECT_DOUBLE_EQ(s.classes[0].mean_w, 0.3);
  EXPECT_DOUBLE_EQ(s.classes[0].mean_h, 0.35);
  EXPECT_EQ(s.classes[1].boxes, 1);
  EXPECT_EQ(s.classes[2].boxes, 0);
  EXPECT_EQ(s.classes[2].mean_w, 0.0);
  EXPECT_EQ(s.unnamed_class_boxes, 1);

  // One background, none with one box, two with two; trimmed after 2.
  EXPECT_EQ(s.boxes_per_image, (std::vector<int64_t>{1, 0, 2}));
  EXPECT_EQ(s.max_boxes_per_image, 2);
}

TEST(DatasetBoxStats, CrowdedImagesShareTheLastBin) {
  data::Manifest m;
  m.names = {"a"};
  std::vector<data::Box> many(static_cast<size_t>(kBoxesPerImageMaxBin) + 30,
                              data::Box{0, 0.5, 0.5, 0.1, 0.1});
  m.entries.push_back(Entry("crowd.jpg", 64, 64, many));
  m.entries.push_back(Entry("one.jpg", 64, 64, {{0, 0.5, 0.5, 0.1, 0.1}}));
  const BoxStats s = ComputeBoxStats(m);
  ASSERT_EQ(s.boxes_per_image.size(), static_cast<size_t>(kBoxesPerImageMaxBin) + 1);
  EXPECT_EQ(s.boxes_per_image.back(), 1);
  EXPECT_EQ(s.boxes_per_image[1], 1);
  const nlohmann::json j = BoxStatsJson(s, m.names);
  EXPECT_EQ(j["boxes_per_image"]["last_open"], true);
  EXPECT_EQ(j["boxes_per_image"]["max"], kBoxesPerImageMaxBin + 30);
}

TEST(DatasetBoxStats, JsonIsWhatTheDatasetPageReads) {
  data::Manifest m;
  m.names = {"cat"};
  m.entries.push_back(Entry("a.jpg", 100, 50, {{0, 0.25, 0.75, 0.5, 0.5}}));
  const nlohmann::json j = BoxStatsJson(ComputeBoxStats(m), m.names);
  EXPECT_EQ(j["bins"], kBoxStatsBins);
  EXPECT_EQ(j["center"].size(), static_cast<size_t>(kBoxStatsBins));
  EXPECT_EQ(j["center"][15][5], 1);  // row = y bin (0.75), column = x bin (0.25)
  const auto& edges = j["aspect"]["edges"];
  ASSERT_EQ(edges.size(), j["aspect"]["counts"].size() + 1);
  EXPECT_DOUBLE_EQ(edges.front().get<double>(), 1.0 / 8);
  EXPECT_DOUBLE_EQ(edges.back().get<double>(), 8.0);
  // 50x25 px: ratio 2, the bin [2, 2.83).
  const size_t two = static_cast<size_t>((kBoxAspectLog2Max + 1) * kBoxAspectStepsPerOctave);
  EXPECT_EQ(j["aspect"]["counts"][two], 1);
  EXPECT_EQ(j["classes"][0],
            nlohmann::json(
                {{"id", 0}, {"name", "cat"}, {"boxes", 1}, {"images", 1}, {"mean_w", 0.5}, {"mean_h", 0.5}}));
  EXPECT_EQ(j["boxes_per_image"]["counts"], nlohmann::json({0, 1}));
  EXPECT_EQ(j["boxes_per_image"]["last_open"], false);
  EXPECT_DOUBLE_EQ(j["boxes_per_image"]["mean"].get<double>(), 1.0);
}

TEST(DatasetBoxStats, EmptyVersion) {
  const BoxStats s = ComputeBoxStats(data::Manifest{});
  EXPECT_EQ(s.boxes, 0);
  EXPECT_EQ(s.boxes_per_image, (std::vector<int64_t>{0}));
  EXPECT_EQ(BoxStatsJson(s, {})["boxes_per_image"]["mean"], 0.0);
}

}  // namespace
}  // namespace kestrel::app
