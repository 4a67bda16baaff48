// YOLO11 and YOLOv5u built from the module registry: state-dict names and
// parameter counts of the reference, its nc=3 forward pass (eval and train
// mode) within the YOLOv8 fixture's tolerances, fusion, and a genuine YOLO11
// .pt checkpoint read like its safetensors export. Reference numbers:
// ../shared/reference/families (tests skip without it).
#include <cstdio>
#include <filesystem>
#include <set>
#include <string>

#include "core/safetensors.h"
#include "model/pt_checkpoint.h"
#include "model/weights.h"
#include "model/yolo.h"
#include "test_util.h"

namespace kestrel::model {
namespace {

using testing::Compare;
using testing::ErrorStats;
using testing::Randomize;

const std::string kFamilies = testing::RefDir() + "/families";

bool HaveFamilies() { return Env::Default().Stat(kFamilies + "/families.json").exists; }

int64_t CountParams(torch::nn::Module& m, const std::string& prefix = "") {
  int64_t n = 0;
  for (const auto& item : m.named_parameters()) {
    if (item.key().rfind(prefix, 0) == 0) n += item.value().numel();
  }
  return n;
}

class FamiliesTest : public testing::TorchTest, public ::testing::WithParamInterface<const char*> {};

// Module tree = analytic plan, per layer, for the n models and YOLO11m (whose
// C3k2 layers all use C3k blocks).
TEST_F(FamiliesTest, ModuleTreeMatchesThePlanPerLayer) {
  for (const char* name : {"yolo11n", "yolov5nu", "yolo11m"}) {
    Yolo model = CreateModel(name, 3).Value();
    ModelSummary s = SummarizeModel(model->Spec());
    EXPECT_EQ(CountParams(*model), s.params) << name;
    for (const auto& layer : s.layers) {
      EXPECT_EQ(CountParams(*model, "model." + std::to_string(layer.index) + "."), layer.params)
          << name << " layer " << layer.index << " " << layer.type;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reference, FamiliesTest, ::testing::Values("yolo11n", "yolov5nu"));

TEST_P(FamiliesTest, NamesAndCountsMatchTheReferenceWeights) {
  if (!HaveFamilies()) GTEST_SKIP() << "no " << kFamilies;
  const std::string name = GetParam();
  Yolo model = CreateModel(name, 3).Value();
  auto ref = ReadSafeTensorsFile(kFamilies + "/" + name + "_nc3_weights.safetensors");
  ASSERT_TRUE(ref.IsOk()) << ref.GetStatus().ToString();
  std::set<std::string> ours, theirs;
  for (const auto& p : model->named_parameters()) ours.insert(p.key());
  for (const auto& b : model->named_buffers()) ours.insert(b.key());
  for (const auto& [n, t] : ref->tensors) theirs.insert(n);
  EXPECT_EQ(ours, theirs);
  EXPECT_EQ(ours.size(), name == "yolo11n" ? 499u : 427u);
  EXPECT_EQ(CountParams(*model), name == "yolo11n" ? 2590425 : 2509049);
  LoadReport report;
  Status s = LoadWeights(*model, *ref, name, LoadMode::kStrict, &report);
  ASSERT_TRUE(s.IsOk()) << s.ToString();
  EXPECT_EQ(report.loaded, static_cast<int>(theirs.size()));
  // Without metadata the family and scale are read off the tensors.
  auto info = ReadWeightsInfo(kFamilies + "/" + name + "_nc3_weights.safetensors");
  ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  EXPECT_EQ(info->spec.Name(), name);
  EXPECT_EQ(info->spec.nc, 3);
}

TEST_P(FamiliesTest, ReferenceForwardEvalAndTrain) {
  if (!HaveFamilies()) GTEST_SKIP() << "no " << kFamilies;
  const std::string name = GetParam();
  const std::string weights = kFamilies + "/" + name + "_nc3_weights.safetensors";
  auto fixture = ReadSafeTensorsFile(kFamilies + "/" + name + "_nc3_forward_loss.safetensors");
  ASSERT_TRUE(fixture.IsOk()) << fixture.GetStatus().ToString();
  auto tensor = [&](const char* n) { return ToTorch(fixture->tensors.at(n), n).Value(); };
  const at::Tensor input = tensor("input");

  Yolo model = CreateModel(name, 3).Value();
  ASSERT_TRUE(LoadWeights(*model, weights, LoadMode::kStrict).IsOk());
  model->eval();
  {
    torch::NoGradGuard no_grad;
    YoloOutput out = model->forward(input);
    const at::Tensor want = tensor("eval_output");
    ASSERT_EQ(out.decoded.sizes(), want.sizes());
    ErrorStats e = Compare(out.decoded, want);
    std::printf("%s eval_output: max abs %.3g, max rel %.3g (per element), %.3g (of max |ref|)\n",
                name.c_str(), e.max_abs, e.max_rel, e.rel_to_max);
    EXPECT_TRUE(at::allclose(out.decoded, want, 1e-4, 1e-4 * want.abs().max().item<double>()))
        << "max abs " << e.max_abs << " max rel " << e.max_rel;
    EXPECT_LT(e.max_rel, 1e-4);
  }
  Yolo train_model = CreateModel(name, 3).Value();
  ASSERT_TRUE(LoadWeights(*train_model, weights, LoadMode::kStrict).IsOk());
  train_model->train();
  YoloOutput out = train_model->forward(input);
  ASSERT_EQ(out.maps.size(), 3u);
  const char* names[] = {"train_p3", "train_p4", "train_p5"};
  for (size_t i = 0; i < 3; ++i) {
    const at::Tensor want = tensor(names[i]);
    ASSERT_EQ(out.maps[i].sizes(), want.sizes()) << names[i];
    ErrorStats e = Compare(out.maps[i].detach(), want);
    std::printf("%s %s: max abs %.3g, max rel %.3g (per element, floor 1e-3), %.3g (of max |ref|)\n",
                name.c_str(), names[i], e.max_abs, e.max_rel, e.rel_to_max);
    EXPECT_TRUE(at::allclose(out.maps[i].detach(), want, 1e-4, 1e-4 * want.abs().max().item<double>()))
        << names[i] << " max abs " << e.max_abs;
  }
}

TEST_P(FamiliesTest, FusedOutputsEqualUnfusedAndCloneCopies) {
  Yolo model = CreateModel(GetParam(), 3).Value();
  Randomize(*model, 11);
  model->eval();
  torch::NoGradGuard no_grad;
  at::manual_seed(2);
  const at::Tensor x = at::rand({1, 3, 64, 96});
  YoloOutput before = model->forward(x);
  Yolo fused = CloneModel(*model);
  fused->Fuse();
  for (const auto& item : fused->named_parameters()) {
    EXPECT_EQ(item.key().find(".bn."), std::string::npos) << item.key();
  }
  YoloOutput after = fused->forward(x);
  ErrorStats e = Compare(after.decoded, before.decoded);
  std::printf("%s fused vs unfused decoded: max abs %.3g, max rel %.3g\n", GetParam(), e.max_abs, e.max_rel);
  EXPECT_LT(e.max_rel, 1e-4);
  Yolo copy = CloneModel(*model);
  EXPECT_TRUE(at::equal(copy->forward(x).decoded, before.decoded));
}

TEST_F(FamiliesTest, FineTuneOfTheDepthwiseClassBranchReinitializesIt) {
  if (!HaveFamilies()) GTEST_SKIP() << "no " << kFamilies;
  Yolo model = CreateModel("yolo11n", 5).Value();
  const std::string path = kFamilies + "/yolo11n_nc3_weights.safetensors";
  Status strict = LoadWeights(*model, path, LoadMode::kStrict);
  EXPECT_NE(strict.Message().find("the file has nc=3"), std::string::npos) << strict.ToString();
  LoadReport report;
  ASSERT_TRUE(LoadWeights(*model, path, LoadMode::kFineTune, &report).IsOk());
  EXPECT_EQ(report.loaded + report.skipped, 499);
  for (const auto& n : report.skipped_names) EXPECT_EQ(n.rfind("model.23.cv3.", 0), 0u) << n;
}

TEST_F(FamiliesTest, Yolo11PtCheckpointLoadsLikeItsSafetensors) {
  const std::string pt = kFamilies + "/yolo11n_shapes.pt";
  if (!Env::Default().Stat(pt).exists) GTEST_SKIP() << "no " << pt;
  auto info = ReadWeightsInfo(pt);
  ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  EXPECT_EQ(info->spec.Name(), "yolo11n");
  EXPECT_EQ(info->spec.nc, 3);
  EXPECT_TRUE(info->from_metadata);
  Yolo from_pt = CreateModel(info->spec).Value();
  Yolo from_st = CreateModel(info->spec).Value();
  LoadReport report;
  Status s = LoadWeights(*from_pt, pt, LoadMode::kStrict, &report);
  ASSERT_TRUE(s.IsOk()) << s.ToString();
  EXPECT_EQ(report.loaded, 499);
  EXPECT_EQ(report.metadata.at("arch"), "yolo11");
  ASSERT_TRUE(LoadWeights(*from_st, kFamilies + "/yolo11n_shapes.safetensors", LoadMode::kStrict).IsOk());
  auto b = from_st->named_parameters();
  for (const auto& item : from_pt->named_parameters()) {
    EXPECT_TRUE(at::equal(item.value(), b[item.key()])) << item.key();
  }
  auto bb = from_st->named_buffers();
  for (const auto& item : from_pt->named_buffers()) {
    EXPECT_TRUE(at::equal(item.value(), bb[item.key()])) << item.key();
  }
  // The YOLOv8 scale of the same letter is refused with the family named.
  Yolo v8 = CreateModel("n", 3).Value();
  Status wrong = LoadWeights(*v8, pt, LoadMode::kStrict);
  EXPECT_EQ(wrong.Code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.Message().find("yolov8n"), std::string::npos) << wrong.ToString();
}

TEST_F(FamiliesTest, SavedWeightsRecordTheFamily) {
  Yolo model = CreateModel("yolov5su", 2).Value();
  const std::string path = ::testing::TempDir() + "/v5su.safetensors";
  ASSERT_TRUE(SaveWeights(*model, path).IsOk());
  auto info = ReadWeightsInfo(path);
  ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  EXPECT_TRUE(info->from_metadata);
  EXPECT_EQ(info->spec.Name(), "yolov5su");
  EXPECT_EQ(info->spec.nc, 2);
}

}  // namespace
}  // namespace kestrel::model

namespace kestrel::model {
namespace {

// Issue 29: model=yolo11n.pt (any reference weights name of the new
// families) that is not on disk — what val, predict, export (through
// ReadWeightsInfo / ReadWeightsFile) and train say: nothing is downloaded,
// the absolute path looked for, how to bring the file, and the model yaml
// that trains the same architecture from scratch.
TEST(FamiliesWeightsTest, MissingReferenceWeightsSayNothingIsDownloadedAndHowToBringThem) {
  for (const std::string stem : {"yolo11n", "yolo11s", "yolo11x", "yolov5nu", "yolov5su"}) {
    const std::string path = stem + ".pt";
    ASSERT_FALSE(Env::Default().Stat(path).exists) << path;
    for (const Status& s : {ReadWeightsInfo(path).GetStatus(), ReadWeightsFile(path).GetStatus()}) {
      EXPECT_EQ(s.Code(), StatusCode::kNotFound) << s.ToString();
      EXPECT_EQ(s.Where().field, "model") << s.ToString();
      const std::string& m = s.Message();
      EXPECT_NE(m.find("Nothing is downloaded"), std::string::npos) << m;
      EXPECT_NE(m.find("looked for '" + std::filesystem::absolute(path).lexically_normal().string() + "'"),
                std::string::npos)
          << m;
      EXPECT_NE(m.find("kestrel models register"), std::string::npos) << m;
      EXPECT_NE(m.find("model=" + stem + ".yaml"), std::string::npos) << m;
    }
  }
}

}  // namespace
}  // namespace kestrel::model
