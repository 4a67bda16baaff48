// The epoch samples file (train/samples.h, docs/formats.md "Epoch
// samples"): labels converted from normalized centre/size to xyxy pixels
// of the original (non-square) image, detections passed through as the
// validator scored them, one file per epoch replaced in place with no
// temp file left behind.
#include "train/samples.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace kestrel::train {
namespace {

namespace fs = std::filesystem;

TEST(EpochSamplesTest, LabelsAndDetectionsAreXyxyPixelsOfTheOriginalImage) {
  data::ManifestEntry e;
  e.path = "images/val/a.jpg";
  e.image_sha = std::string(64, 'a');
  e.width = 200;
  e.height = 100;
  e.boxes = {{1, 0.5, 0.25, 0.2, 0.1}};
  SampleImage s;
  s.entry = &e;
  s.detections = {{{10.5f, 20, 50, 80}, 0.75f, 1}};
  SampleSource src{"birds", 3, std::string(64, 'v'), {"a", "b"}};
  const auto doc = nlohmann::json::parse(EpochSamplesText(7, src, {s}));
  EXPECT_EQ(doc["format"], kSamplesFormat);
  EXPECT_EQ(doc["format_version"], kSamplesFormatVersion);
  EXPECT_EQ(doc["epoch"], 7);
  EXPECT_EQ(doc["dataset"], "birds");
  EXPECT_EQ(doc["version"], 3);
  EXPECT_EQ(doc["conf"], kSampleConf);
  const auto& img = doc["images"][0];
  EXPECT_EQ(img["sha"], e.image_sha);
  EXPECT_EQ(img["width"], 200);
  EXPECT_EQ(img["height"], 100);
  EXPECT_EQ(img["labels"][0]["class_id"], 1);
  const auto& b = img["labels"][0]["box"];
  EXPECT_DOUBLE_EQ(b[0].get<double>(), 80);  // (0.5 - 0.1) * 200
  EXPECT_DOUBLE_EQ(b[1].get<double>(), 20);  // (0.25 - 0.05) * 100
  EXPECT_DOUBLE_EQ(b[2].get<double>(), 120);
  EXPECT_DOUBLE_EQ(b[3].get<double>(), 30);
  const auto& d = img["detections"][0];
  EXPECT_EQ(d["class_id"], 1);
  EXPECT_FLOAT_EQ(d["score"].get<float>(), 0.75f);
  EXPECT_EQ(d["box"], nlohmann::json({10.5, 20.0, 50.0, 80.0}));

  // Written atomically, one file per epoch: writing an epoch again replaces it.
  const fs::path dir = fs::temp_directory_path() / ("kestrel_samples_test_" + std::to_string(getpid()));
  fs::remove_all(dir);
  ASSERT_TRUE(WriteEpochSamples(Env::Default(), dir.string(), 7, src, {s}).IsOk());
  ASSERT_TRUE(WriteEpochSamples(Env::Default(), dir.string(), 7, src, {}).IsOk());
  EXPECT_EQ(EpochSamplesPath(dir.string(), 7), (dir / "samples" / "epoch-7.json").string());
  size_t files = 0;
  for (const auto& f : fs::directory_iterator(dir / "samples")) files += f.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1u);
  auto text = Env::Default().ReadFile((dir / "samples" / "epoch-7.json").string());
  ASSERT_TRUE(text.IsOk());
  EXPECT_TRUE(nlohmann::json::parse(*text)["images"].empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kestrel::train
