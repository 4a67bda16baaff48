// Model yaml files (model/model_yaml.h), torch-free: every built-in model
// written out as a yaml file reads back to the identical layer plan and
// parameter count (and those counts are the reference's, families.json);
// a local yolov8n.yaml is the file, not the built-in; any other graph is a
// custom one the spec carries (GraphYaml round trip); unknown modules, bad
// from indices, bad args and graphs that cannot be built are errors naming
// them.
#include "model/model_yaml.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/env.h"
#include "model/custom_graphs.h"
#include "model/spec.h"

namespace kestrel::model {
namespace {

class ModelYamlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/model_yaml_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_TRUE(Env::Default().CreateDirs(dir_).IsOk());
  }
  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

bool SamePlan(const std::vector<LayerPlan>& a, const std::vector<LayerPlan>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const LayerPlan &x = a[i], &y = b[i];
    if (x.from != y.from || x.repeats != y.repeats || x.kind != y.kind || x.c_in != y.c_in ||
        x.c_out != y.c_out || x.kernel != y.kernel || x.stride != y.stride || x.padding != y.padding ||
        x.shortcut != y.shortcut || x.hidden != y.hidden || x.c3k != y.c3k ||
        x.detect_channels != y.detect_channels || x.nc != y.nc || x.detect_dw_cls != y.detect_dw_cls ||
        x.detect_strides != y.detect_strides || x.out_stride != y.out_stride)
      return false;
  }
  return true;
}

TEST_F(ModelYamlTest, BuiltInTablesRoundTripForAllTenModels) {
  nlohmann::json families;
  const std::string ref = std::string(KESTREL_SHARED_DIR) + "/reference/families/families.json";
  if (Env::Default().Stat(ref).exists) families = nlohmann::json::parse(*Env::Default().ReadFile(ref));
  int checked = 0, reference_checked = 0;
  for (Family f : AllFamilies()) {
    for (const ModelScale& sc : KnownScales(f)) {
      if (sc.name == "t") continue;  // Kestrel's test scale is no reference model
      const ModelSpec want{sc, 80, f};
      // The reference's file names: yolov8s.yaml, yolo11m.yaml, yolov5lu.yaml.
      const std::string path = Write(want.Name() + ".yaml", ModelYamlText(f, 80));
      auto got = ReadModelYaml(path);
      ASSERT_TRUE(got.IsOk()) << want.Name() << ": " << got.GetStatus().ToString();
      EXPECT_EQ(got->spec.Name(), want.Name()) << got->why;
      EXPECT_EQ(got->spec.nc, 80);
      EXPECT_TRUE(SamePlan(BuildLayerPlan(got->spec), BuildLayerPlan(want))) << want.Name();
      const int64_t params = SummarizeModel(got->spec).params;
      EXPECT_EQ(params, SummarizeModel(want).params) << want.Name();
      // families.json: the reference's parameter counts (YOLO11 and YOLOv5u, nc=80).
      if (families.is_object()) {
        for (const auto& [fam, def] : families["families"].items()) {
          const auto& by = def["params_by_scale"];
          if (by.contains(want.Name() + ".yaml")) {
            EXPECT_EQ(params, by[want.Name() + ".yaml"]["80"].get<int64_t>()) << want.Name();
            ++reference_checked;
          }
        }
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 15);  // five scales of each family
  if (families.is_object()) {
    EXPECT_EQ(reference_checked, 10);  // the ten models families.json has
  }
}

TEST_F(ModelYamlTest, LocalFileIsUsedAndScaleComesFromItsName) {
  // yolov8s.yaml whose table lists n first: the name picks s.
  const std::string s = Write("yolov8s.yaml", ModelYamlText(Family::kYolov8, 5));
  auto a = ParseModelSpec(s, 3);
  ASSERT_TRUE(a.IsOk()) << a.GetStatus().ToString();
  EXPECT_EQ(a->Name(), "yolov8s");
  EXPECT_EQ(a->nc, 3) << "the dataset's nc replaces the file's";
  // A local yolov8n.yaml whose graph is YOLO11's is read as the file says,
  // not replaced by the built-in yolov8n.
  const std::string n = Write("yolov8n.yaml", ModelYamlText(Family::kYolo11, 80));
  auto b = ParseModelSpec(n, 3);
  ASSERT_TRUE(b.IsOk()) << b.GetStatus().ToString();
  EXPECT_EQ(b->family, Family::kYolo11);
  // No letter in the name: the table's first scale; old-style multipliers.
  auto c = ReadModelYaml(Write("custom.yaml", ModelYamlText(Family::kYolov5u, 7)));
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  EXPECT_EQ(c->spec.Name(), "yolov5nu");
  EXPECT_EQ(c->spec.nc, 7);
  std::string old = ModelYamlText(Family::kYolov8, 80);
  old = old.substr(0, old.find("scales:")) + "depth_multiple: 0.67\nwidth_multiple: 0.75\n" +
        old.substr(old.find("backbone:"));
  auto d = ReadModelYaml(Write("old.yaml", old));
  ASSERT_TRUE(d.IsOk()) << d.GetStatus().ToString();
  EXPECT_EQ(d->spec.Name(), "yolov8m");
}

TEST_F(ModelYamlTest, BadFilesAreClearErrors) {
  const std::string base = ModelYamlText(Family::kYolov8, 80);
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string t = base;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  struct Case {
    std::string text, field, want;
  };
  const std::vector<Case> cases = {
      {replace("SPPF, [1024, 5]", "SPPCSPC, [1024]"), "backbone[9].module", "module 'SPPCSPC' is not in"},
      {replace("[[-1, 6], 1, Concat", "[[-1, 16], 1, Concat"), "head[1].from",
       "from 16 is not an earlier layer"},
      {replace("Conv, [64, 3, 2]", "Conv, [wide, 3, 2]"), "backbone[0].args[0]", "output channels"},
      {replace("Conv, [64, 3, 2]", "Conv, [64, 3, 2, 1, 1, 1, 1]"), "backbone[0]", "takes args"},
      {replace("C2f, [128, True]", "C2f, [128, maybe]"), "backbone[2].args[1]", "shortcut"},
      // A custom graph CheckGraph refuses: named by layer.
      {replace("Conv, [64, 3, 2]", "Conv, [64, 2, 2]"), "backbone", "layer 0 (Conv): kernel 2, stride 2"},
      {replace("[-1, 1, Conv, [128, 3, 2]]", "[-1, 2, Conv, [128, 3, 2]]"), "backbone",
       "layer 1 (Conv): repeats 2 > 1"},
      {replace("[[-1, 6], 1, Concat", "[[-1, 4], 1, Concat"), "head",
       "layer 11 (Concat): joins maps at strides 16 and 8"},
      {replace("[-1, 1, SPPF, [1024, 5]]", "[-1, 1, Conv, [1024, 3, 2]]"), "backbone",
       "its stride 64 does not divide 32"},
      {"nc: 3\nbackbone: []\nhead: []\n", "backbone", "non-empty list"},
      {"nc: [3\n", "", "not valid YAML"},
  };
  for (const Case& c : cases) {
    const std::string path = Write("bad.yaml", c.text);
    auto r = ReadModelYaml(path);
    ASSERT_FALSE(r.IsOk()) << c.want;
    EXPECT_EQ(r.GetStatus().Where().file, path) << c.want;
    EXPECT_EQ(r.GetStatus().Where().field, c.field) << r.GetStatus().ToString();
    EXPECT_NE(r.GetStatus().Message().find(c.want), std::string::npos) << r.GetStatus().ToString();
    if (c.field != "backbone" && c.field != "head") {  // a graph's error names the layer
      EXPECT_GT(r.GetStatus().Where().line, 0) << r.GetStatus().ToString();
    }
  }
  // The scale the name asks for must be in the table.
  std::string no_s = base;
  no_s.erase(no_s.find("  s: "), no_s.find('\n', no_s.find("  s: ")) - no_s.find("  s: ") + 1);
  auto r = ReadModelYaml(Write("yolov8s.yaml", no_s));
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().Message().find("scale 's'"), std::string::npos) << r.GetStatus().ToString();
}

TEST_F(ModelYamlTest, CustomGraphsAreCarriedInTheSpecAndRoundTrip) {
  // yolov8t-p2: the reference's P2 graph; the name has no n/s/m/l/x letter,
  // so the table's first scale (t) is used.
  auto p2 = ReadModelYaml(Write("yolov8-p2.yaml", testing::kP2Yaml));
  ASSERT_TRUE(p2.IsOk()) << p2.GetStatus().ToString();
  ASSERT_TRUE(p2->spec.graph.has_value());
  EXPECT_EQ(p2->spec.Name(), "yolov8-p2");
  EXPECT_EQ(p2->spec.nc, 3);
  EXPECT_NE(p2->why.find("custom graph 'yolov8-p2' (29 layers"), std::string::npos) << p2->why;
  const std::vector<LayerPlan> plan = BuildLayerPlan(p2->spec);
  ASSERT_EQ(plan.size(), 29u);
  EXPECT_EQ(plan.back().kind, LayerKind::kDetect);
  EXPECT_EQ(plan.back().detect_strides, (std::vector<int>{4, 8, 16, 32}));
  EXPECT_EQ(plan.back().detect_channels, (std::vector<int>{16, 32, 64, 128}));
  EXPECT_FALSE(plan.back().detect_dw_cls);
  EXPECT_EQ(plan[2].repeats, 1);  // round(3 * 0.33)

  // "m" scale and C3k2: the reference's rule (C3k blocks at m/l/x, and the
  // depthwise class branch in Detect).
  auto mixed = ReadModelYaml(Write("mixedm.yaml", testing::kMixedYaml));
  ASSERT_TRUE(mixed.IsOk()) << mixed.GetStatus().ToString();
  ASSERT_TRUE(mixed->spec.graph.has_value());
  const std::vector<LayerPlan> mp = BuildLayerPlan(mixed->spec);
  EXPECT_EQ(mp.back().detect_strides, (std::vector<int>{8, 16, 32}));
  EXPECT_TRUE(mp.back().detect_dw_cls);
  EXPECT_TRUE(mp[2].c3k) << "scale m: every C3k2 uses C3k blocks";
  EXPECT_EQ(mp[4].kind, LayerKind::kC3);
  EXPECT_EQ(mp[9].kind, LayerKind::kC2psa);

  for (const ModelSpec& spec : {p2->spec, mixed->spec}) {
    // What weights and checkpoints carry reads back to the same plan, without the file.
    const std::string text = GraphYaml(spec).dump();
    auto back = SpecFromGraphYaml(text, 7, "w.safetensors");
    ASSERT_TRUE(back.IsOk()) << back.GetStatus().ToString() << "\n" << text;
    ASSERT_TRUE(back->graph.has_value());
    EXPECT_EQ(back->Name(), spec.Name());
    EXPECT_EQ(back->nc, 7);
    ModelSpec want = spec;
    want.nc = 7;
    EXPECT_TRUE(SamePlan(BuildLayerPlan(*back), BuildLayerPlan(want))) << text;
    EXPECT_EQ(SummarizeModel(*back).params, SummarizeModel(want).params);
    EXPECT_EQ(back->scale.depth, spec.scale.depth);
    EXPECT_EQ(back->scale.width, spec.scale.width);
    EXPECT_EQ(back->scale.max_channels, spec.scale.max_channels);
  }
  // Damaged graph metadata is an error naming the weights file.
  auto bad = SpecFromGraphYaml("{\"nc\": 3, \"backbone\": [[-1, 1, Conv, [8, 3, 2]]]", 3, "w.safetensors");
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().file, "w.safetensors");

  // A built-in graph at a scale its family lacks is a custom graph too
  // (it used to be refused: weights recorded only the scale's name).
  std::string odd = ModelYamlText(Family::kYolov8, 4);
  odd = odd.substr(0, odd.find("scales:")) + "scales:\n  q: [0.33, 0.2, 1024]\n" +
        odd.substr(odd.find("backbone:"));
  auto q = ReadModelYaml(Write("narrow.yaml", odd));
  ASSERT_TRUE(q.IsOk()) << q.GetStatus().ToString();
  ASSERT_TRUE(q->spec.graph.has_value());
  EXPECT_NE(q->why.find("yolov8's rows at a scale it lacks"), std::string::npos) << q->why;
  EXPECT_EQ(BuildLayerPlan(q->spec)[0].c_out, 16);  // 64 * 0.2 = 12.8 -> 16
}

}  // namespace
}  // namespace kestrel::model
