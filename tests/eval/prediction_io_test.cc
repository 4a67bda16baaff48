#include "eval/prediction_io.h"

#include <gtest/gtest.h>

#include "core/env.h"

namespace kestrel::eval {
namespace {

TEST(PredictionIo, ParsesYoloTxtIntoPixels) {
  auto r = ParseYoloPredictions("3 0.5 0.5 0.2 0.4 0.75\n\n1 0.1 0.1 0.1 0.1 0.5\n", "a.txt", {200, 100}, 80);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].class_id, 3);
  EXPECT_FLOAT_EQ((*r)[0].score, 0.75f);
  EXPECT_FLOAT_EQ((*r)[0].box.x1, 80);
  EXPECT_FLOAT_EQ((*r)[0].box.y1, 30);
  EXPECT_FLOAT_EQ((*r)[0].box.x2, 120);
  EXPECT_FLOAT_EQ((*r)[0].box.y2, 70);
}

TEST(PredictionIo, BadYoloLinesNameFileLineAndField) {
  auto r = ParseYoloPredictions("0 .5 .5 .1 .1 .9\n0 .5 .5 .1 .1\n", "p.txt", {10, 10}, 80);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Where().file, "p.txt");
  EXPECT_EQ(r.GetStatus().Where().line, 2);
  r = ParseYoloPredictions("0 nan .5 .1 .1 .9\n", "p.txt", {10, 10}, 80);
  EXPECT_EQ(r.GetStatus().Where().field, "cx");
  r = ParseYoloPredictions("0 .5 .5 .1 .1 .9\n\n80 .5 .5 .1 .1 .9\n", "p.txt", {10, 10}, 80);
  EXPECT_EQ(r.GetStatus().Where().field, "class");
  EXPECT_EQ(r.GetStatus().Where().line, 3);
  r = ParseYoloPredictions("1.5 .5 .5 .1 .1 .9\n", "p.txt", {10, 10}, 80);
  EXPECT_EQ(r.GetStatus().Where().field, "class");
  r = ParseYoloPredictions("1 .5 .5 .1 .1 1.5\n", "p.txt", {10, 10}, 80);
  EXPECT_EQ(r.GetStatus().Where().field, "conf");
  r = ParseYoloPredictions("1 .5 .5 .1 .1 .5\n", "p.txt", {0, 10}, 80);
  EXPECT_FALSE(r.IsOk());
}

TEST(PredictionIo, DirectoryReadIsAllOrNothing) {
  Env& env = Env::Default();
  const std::string dir = std::string(KESTREL_BINARY_DIR) + "/eval_io_test";
  ASSERT_TRUE(env.RemoveAll(dir).IsOk());
  ASSERT_TRUE(env.CreateDirs(dir).IsOk());
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/a.txt", "0 .5 .5 .2 .2 .9\n").IsOk());
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/b.txt", "0 .5 .5 .2 .2 .9\n").IsOk());
  std::map<std::string, ImageSize> sizes = {{"a", {100, 100}}, {"c", {50, 50}}};
  auto r = ReadYoloPredictionDir(env, dir, sizes, 1);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(r.GetStatus().Where().file, dir + "/b.txt");
  sizes["b"] = {10, 10};
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/b.txt", "0 .5 .5 .2 .2\n").IsOk());
  r = ReadYoloPredictionDir(env, dir, sizes, 1);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Where().line, 1);
  ASSERT_TRUE(env.WriteFileAtomic(dir + "/b.txt", "0 .5 .5 .2 .2 .3\n").IsOk());
  r = ReadYoloPredictionDir(env, dir, sizes, 1);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->size(), 3u);
  EXPECT_TRUE(r->at("c").empty());  // no file: no predictions
  EXPECT_FLOAT_EQ(r->at("b")[0].box.x2, 6);
}

TEST(PredictionIo, CocoResultsRoundTripAndErrors) {
  const std::vector<int> cats = {1, 2, 3, 5};  // class 3 -> category 5
  const std::vector<std::pair<int64_t, std::vector<Detection>>> images = {
      {42, {{{10, 20, 40, 60}, 0.9f, 3}, {{0, 0, 5, 5}, 0.1f, 0}}}};
  Env& env = Env::Default();
  const std::string path = std::string(KESTREL_BINARY_DIR) + "/eval_coco_results.json";
  ASSERT_TRUE(WriteCocoResults(env, path, images, cats).IsOk());
  auto r = ReadCocoResults(env, path, cats, 4);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  const auto& d = r->at(42);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].class_id, 3);
  EXPECT_FLOAT_EQ(d[0].box.x2, 40);
  EXPECT_FLOAT_EQ(d[0].box.y2, 60);
  EXPECT_NE(CocoResultsJson(images, cats).find("\"category_id\":5"), std::string::npos);

  auto bad = ParseCocoResults(
      R"([{"image_id":1,"category_id":1,"bbox":[0,0,1,1],"score":0.5},
          {"image_id":1,"category_id":1,"bbox":[0,0,1],"score":0.5}])",
      "r.json", cats, 4);
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "[1].bbox");
  bad =
      ParseCocoResults(R"([{"image_id":1,"category_id":4,"bbox":[0,0,1,1],"score":0.5}])", "r.json", cats, 4);
  EXPECT_EQ(bad.GetStatus().Where().field, "[0].category_id");
  bad = ParseCocoResults("{oops", "r.json", cats, 4);
  EXPECT_FALSE(bad.IsOk());
}

}  // namespace
}  // namespace kestrel::eval
