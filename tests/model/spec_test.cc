// Torch-free tests: spec parsing, layer plan, analytic summary, weights info.
#include "model/spec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

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

TEST(ModelSpec, ParsesTheFamilies) {
  struct Case {
    const char* spec;
    const char* name;
    Family family;
  };
  for (const Case& c :
       {Case{"yolo11n", "yolo11n", Family::kYolo11}, Case{"YOLO11x.yaml", "yolo11x", Family::kYolo11},
        Case{"yolov5su", "yolov5su", Family::kYolov5u}, Case{"yolov5mu.yaml", "yolov5mu", Family::kYolov5u},
        Case{"yolov5l", "yolov5lu", Family::kYolov5u}, Case{"x", "yolov8x", Family::kYolov8}}) {
    auto spec = ParseModelSpec(c.spec, 3);
    ASSERT_TRUE(spec.IsOk()) << c.spec << ": " << spec.GetStatus().ToString();
    EXPECT_EQ(spec->Name(), c.name);
    EXPECT_EQ(spec->family, c.family);
  }
  auto m = ParseModelSpec("yolo11m", 80);
  EXPECT_DOUBLE_EQ(m->scale.depth, 0.50);
  EXPECT_DOUBLE_EQ(m->scale.width, 1.00);
  EXPECT_EQ(m->scale.max_channels, 512);
  for (const char* bad : {"yolo11t", "yolov5tu", "yolo11", "yolov5nuu", "yolov11n"}) {
    auto r = ParseModelSpec(bad, 3);
    ASSERT_FALSE(r.IsOk()) << bad;
    EXPECT_NE(r.GetStatus().Message().find("yolo11n"), std::string::npos) << r.GetStatus().ToString();
    EXPECT_NE(r.GetStatus().Message().find("yolov5xu"), std::string::npos) << r.GetStatus().ToString();
  }
  EXPECT_EQ(SpecFromArchAndScale("yolo11", "s", 3)->Name(), "yolo11s");
  EXPECT_EQ(SpecFromArchAndScale("", "s", 3)->Name(), "yolov8s");
  EXPECT_EQ(SpecFromArchAndScale("yolov5u", "x", 3)->Name(), "yolov5xu");
  EXPECT_FALSE(SpecFromArchAndScale("yolo11", "yolov8n", 3).IsOk());
  EXPECT_FALSE(SpecFromArchAndScale("yolov9", "n", 3).IsOk());
}

// Parameter counts of all ten models at nc=80 and nc=3 as the reference
// reports them (../shared/reference/families/families.json).
TEST(ModelSummary, FamilyParameterCountsEqualTheReference) {
  struct Ref {
    const char* name;
    int64_t nc80, nc3;
  };
  const Ref refs[] = {
      {"yolo11n", 2624080, 2590425},    {"yolo11s", 9458752, 9428953},    {"yolo11m", 20114688, 20055321},
      {"yolo11l", 25372160, 25312793},  {"yolo11x", 56966176, 56877241},  {"yolov5nu", 2654816, 2509049},
      {"yolov5su", 9153152, 9123353},   {"yolov5mu", 25111456, 25066873}, {"yolov5lu", 53225024, 53165657},
      {"yolov5xu", 97276448, 97202297},
  };
  for (const Ref& r : refs) {
    EXPECT_EQ(SummarizeModel(*ParseModelSpec(r.name, 80)).params, r.nc80) << r.name;
    EXPECT_EQ(SummarizeModel(*ParseModelSpec(r.name, 3)).params, r.nc3) << r.name;
  }
  EXPECT_EQ(BuildLayerPlan(*ParseModelSpec("yolo11n", 3)).size(), 24u);
  EXPECT_EQ(BuildLayerPlan(*ParseModelSpec("yolov5nu", 3)).size(), 25u);
  // C3k blocks: YOLO11n layers 6, 8, 22; every C3k2 of m/l/x.
  auto n = BuildLayerPlan(*ParseModelSpec("yolo11n", 3));
  for (int i : {2, 4, 13, 16, 19}) EXPECT_FALSE(n[i].c3k) << i;
  for (int i : {6, 8, 22}) EXPECT_TRUE(n[i].c3k) << i;
  auto l = BuildLayerPlan(*ParseModelSpec("yolo11l", 3));
  for (int i : {2, 4, 13, 16, 19}) EXPECT_TRUE(l[i].c3k) << i;
  EXPECT_TRUE(n[23].detect_dw_cls);
  EXPECT_FALSE(BuildLayerPlan(*ParseModelSpec("yolov5nu", 3))[24].detect_dw_cls);
}

// The module table of the n models, layer by layer, as the reference lists it.
TEST(ModelSummary, FamilyModuleTablesEqualTheReference) {
  const std::string path = std::string(KESTREL_SHARED_DIR) + "/reference/families/families.json";
  if (!Env::Default().Stat(path).exists) GTEST_SKIP() << "no " << path;
  std::ifstream in(path);
  const nlohmann::json ref = nlohmann::json::parse(in);
  for (const auto& [family, model] : {std::pair{"yolo11", "yolo11n"}, std::pair{"yolov5u", "yolov5nu"}}) {
    const auto& layers = ref.at("families").at(family).at("layers");
    ModelSummary s = SummarizeModel(*ParseModelSpec(model, 3));
    ASSERT_EQ(s.layers.size(), layers.size()) << model;
    for (size_t i = 0; i < layers.size(); ++i) {
      EXPECT_EQ(s.layers[i].type, layers[i].at("type").get<std::string>()) << model << " layer " << i;
      EXPECT_EQ(s.layers[i].params, layers[i].at("params").get<int64_t>()) << model << " layer " << i;
      const auto& from = layers[i].at("from");
      std::vector<int> want =
          from.is_array() ? from.get<std::vector<int>>() : std::vector<int>{from.get<int>()};
      EXPECT_EQ(s.layers[i].from, want) << model << " layer " << i;
    }
    std::printf("%s", FormatSummary(s).c_str());
  }
}

TEST(WeightsInfo, InfersTheFamilyFromReferenceShapes) {
  const std::string dir = std::string(KESTREL_SHARED_DIR) + "/reference/families/";
  for (const char* name : {"yolo11n", "yolov5nu"}) {
    const std::string path = dir + name + "_nc3_weights.safetensors";
    if (!Env::Default().Stat(path).exists) GTEST_SKIP() << "no " << path;
    auto info = ReadWeightsInfo(path);
    ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
    EXPECT_EQ(info->spec.Name(), name);
    EXPECT_EQ(info->spec.nc, 3);
    EXPECT_FALSE(info->from_metadata);
  }
}

}  // namespace
}  // namespace kestrel::model
