// Torch-free tests: spec parsing, layer plan, analytic summary, weights info.
#include "model/spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/env.h"

namespace kestrel::model {
namespace {

TEST(ModelSpec, ParsesNamesAndYamlForms) {
  for (const char* s : {"n", "yolov8n", "yolov8n.yaml", "YOLOv8N.YAML"}) {
    auto spec = ParseModelSpec(s, 3);
    ASSERT_TRUE(spec.IsOk()) << s << ": " << spec.GetStatus().ToString();
    EXPECT_EQ(spec->scale.name, "n");
    EXPECT_EQ(spec->nc, 3);
    EXPECT_EQ(spec->Name(), "yolov8n");
  }
  auto m = ParseModelSpec("yolov8m", 80);
  ASSERT_TRUE(m.IsOk());
  EXPECT_DOUBLE_EQ(m->scale.depth, 0.67);
  EXPECT_DOUBLE_EQ(m->scale.width, 0.75);
  EXPECT_EQ(m->scale.max_channels, 768);
}

TEST(ModelSpec, UnknownSpecErrorListsKnownOnes) {
  auto bad = ParseModelSpec("yolov9q", 3);
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.GetStatus().Message().find("yolov9q"), std::string::npos);
  EXPECT_NE(bad.GetStatus().Message().find("yolov8s"), std::string::npos);
  EXPECT_FALSE(ParseModelSpec("n", 0).IsOk());
  EXPECT_FALSE(ParseModelSpec("yolov8", 3).IsOk());
}

TEST(ModelSpec, MakeDivisible) {
  EXPECT_EQ(MakeDivisible(16.0, 8), 16);
  EXPECT_EQ(MakeDivisible(17.0, 8), 24);
  EXPECT_EQ(MakeDivisible(8.0, 8), 8);
}

TEST(LayerPlan, YoloV8nChannelsAndRepeats) {
  auto plan = BuildLayerPlan(*ParseModelSpec("n", 80));
  ASSERT_EQ(plan.size(), 23u);
  const int expect_out[] = {16,  32,  32,  64, 64, 128, 128, 256, 256, 256, 256, 384,
                            128, 128, 192, 64, 64, 192, 128, 128, 384, 256, 144};
  for (size_t i = 0; i < plan.size(); ++i) EXPECT_EQ(plan[i].c_out, expect_out[i]) << "layer " << i;
  EXPECT_EQ(plan[2].repeats, 1);
  EXPECT_EQ(plan[4].repeats, 2);
  EXPECT_EQ(plan[6].repeats, 2);
  EXPECT_TRUE(plan[2].shortcut);
  EXPECT_FALSE(plan[12].shortcut);
  EXPECT_EQ(plan[22].detect_channels, (std::vector<int>{64, 128, 256}));
  EXPECT_EQ(DetectBoxChannels(plan[22].detect_channels), 64);
  EXPECT_EQ(DetectClsChannels(plan[22].detect_channels, 80), 80);
  auto m = BuildLayerPlan(*ParseModelSpec("m", 80));
  EXPECT_EQ(m[7].c_out, 576);  // min(1024, 768) * 0.75
  EXPECT_EQ(m[4].repeats, 4);
}

TEST(ModelSummary, YoloV8nMatchesPublicNumbers) {
  ModelSummary s = SummarizeModel(*ParseModelSpec("yolov8n", 80), 640, 640);
  EXPECT_EQ(s.params, 3157200);
  EXPECT_EQ(s.gradients, 3157184);
  EXPECT_NEAR(s.gflops, 8.7, 8.7 * 0.02);
  EXPECT_EQ(s.layers.size(), 23u);
  EXPECT_EQ(s.layers[0].args, "[3, 16, 3, 2]");
  EXPECT_EQ(s.layers[22].args, "[80, [64, 128, 256]]");
  const std::string table = FormatSummary(s);
  std::printf("%s", table.c_str());
  EXPECT_NE(table.find("3157200 parameters"), std::string::npos) << table;
  EXPECT_NE(table.find("C2f"), std::string::npos);
}

TEST(ModelSummary, OtherScalesAndClassCounts) {
  EXPECT_EQ(SummarizeModel(*ParseModelSpec("n", 3)).params, 3011433);
  EXPECT_EQ(SummarizeModel(*ParseModelSpec("s", 80)).params, 11166560);
  EXPECT_EQ(SummarizeModel(*ParseModelSpec("m", 80)).params, 25902640);
  // Public GFLOPs of the fused models (conv MACs only): s 28.6, m 78.9.
  EXPECT_NEAR(SummarizeModel(*ParseModelSpec("s", 80)).gflops, 28.6, 28.6 * 0.02);
  EXPECT_NEAR(SummarizeModel(*ParseModelSpec("m", 80)).gflops, 78.9, 78.9 * 0.02);
  // GFLOPs scale with the pixel count.
  const double g640 = SummarizeModel(*ParseModelSpec("n", 80), 640, 640).gflops;
  const double g320 = SummarizeModel(*ParseModelSpec("n", 80), 320, 320).gflops;
  EXPECT_NEAR(g640 / g320, 4.0, 1e-6);
}

TEST(WeightsInfo, InfersSpecFromReferenceShapes) {
  const std::string path = std::string(KESTREL_SHARED_DIR) + "/reference/yolov8n_nc3_weights.safetensors";
  if (!Env::Default().Stat(path).exists) GTEST_SKIP() << "no " << path;
  auto info = ReadWeightsInfo(path);
  ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  EXPECT_EQ(info->spec.scale.name, "n");
  EXPECT_EQ(info->spec.nc, 3);
  EXPECT_FALSE(info->from_metadata);
}

}  // namespace
}  // namespace kestrel::model
