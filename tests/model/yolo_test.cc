// The YOLOv8 module: names, parameter counts, forward shapes, the reference
// forward pass, anchors, fusion.
#include "model/yolo.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <set>

#include "core/safetensors.h"
#include "model/anchors.h"
#include "model/weights.h"
#include "test_util.h"

namespace kestrel::model {
namespace {

using testing::Compare;
using testing::ErrorStats;
using testing::HaveReference;
using testing::Randomize;
using testing::RefForward;
using testing::RefWeights;

class YoloTest : public testing::TorchTest {};

int64_t CountParams(torch::nn::Module& m, const std::string& prefix = "") {
  int64_t n = 0;
  for (const auto& item : m.named_parameters()) {
    if (item.key().rfind(prefix, 0) == 0) n += item.value().numel();
  }
  return n;
}

TEST_F(YoloTest, NamesAndCountsMatchTheCommonLayout) {
  Yolo model = CreateModel("yolov8n", 3).Value();
  const auto params = model->named_parameters();
  const auto buffers = model->named_buffers();
  EXPECT_EQ(params.size() + buffers.size(), 355u);
  EXPECT_EQ(CountParams(*model), 3011433);
  for (const char* name :
       {"model.0.conv.weight", "model.2.m.0.cv1.conv.weight", "model.22.cv2.0.0.conv.weight",
        "model.22.cv3.2.2.bias", "model.22.dfl.conv.weight"}) {
    EXPECT_TRUE(params.contains(name)) << name;
  }
  EXPECT_TRUE(buffers.contains("model.0.bn.num_batches_tracked"));
  EXPECT_FALSE(params["model.22.dfl.conv.weight"].requires_grad());
  // Per-layer counts agree with the analytic summary.
  ModelSummary s = SummarizeModel(model->Spec());
  for (const auto& layer : s.layers) {
    EXPECT_EQ(CountParams(*model, "model." + std::to_string(layer.index) + "."), layer.params)
        << "layer " << layer.index;
  }
  if (!HaveReference()) return;
  auto ref = ReadSafeTensorsFile(RefWeights());
  ASSERT_TRUE(ref.IsOk());
  std::set<std::string> ours;
  for (const auto& p : params) ours.insert(p.key());
  for (const auto& b : buffers) ours.insert(b.key());
  std::set<std::string> theirs;
  for (const auto& [name, t] : ref->tensors) theirs.insert(name);
  EXPECT_EQ(ours, theirs);
}

TEST_F(YoloTest, EightyClassParamsMatchPublicCount) {
  Yolo model = CreateModel("n", 80).Value();
  EXPECT_EQ(CountParams(*model), 3157200);
}

TEST_F(YoloTest, ReferenceForwardEvalAndTrain) {
  if (!HaveReference()) GTEST_SKIP() << "no ../shared/reference";
  auto fixture = ReadSafeTensorsFile(RefForward());
  ASSERT_TRUE(fixture.IsOk()) << fixture.GetStatus().ToString();
  auto tensor = [&](const char* name) { return ToTorch(fixture->tensors.at(name), name).Value(); };
  const at::Tensor input = tensor("input");

  Yolo model = CreateModel("n", 3).Value();
  ASSERT_TRUE(LoadWeights(*model, RefWeights(), LoadMode::kStrict).IsOk());
  model->eval();
  {
    torch::NoGradGuard no_grad;
    YoloOutput out = model->forward(input);
    const at::Tensor want = tensor("eval_output");
    ASSERT_EQ(out.decoded.sizes(), want.sizes());
    ErrorStats e = Compare(out.decoded, want);
    std::printf("eval_output: max abs %.3g, max rel %.3g (per element), %.3g (of max |ref|)\n", e.max_abs,
                e.max_rel, e.rel_to_max);
    EXPECT_TRUE(at::allclose(out.decoded, want, 1e-4, 1e-4 * want.abs().max().item<double>()))
        << "max abs " << e.max_abs << " max rel " << e.max_rel;
    EXPECT_LT(e.max_rel, 1e-4);
  }
  // Fresh load: a train-mode forward updates BN running statistics.
  Yolo train_model = CreateModel("n", 3).Value();
  ASSERT_TRUE(LoadWeights(*train_model, RefWeights(), LoadMode::kStrict).IsOk());
  train_model->train();
  YoloOutput out = train_model->forward(input);
  EXPECT_FALSE(out.decoded.defined());
  ASSERT_EQ(out.maps.size(), 3u);
  const char* names[] = {"train_p3", "train_p4", "train_p5"};
  for (size_t i = 0; i < 3; ++i) {
    const at::Tensor want = tensor(names[i]);
    ASSERT_EQ(out.maps[i].sizes(), want.sizes()) << names[i];
    ErrorStats e = Compare(out.maps[i].detach(), want);
    std::printf("%s: max abs %.3g, max rel %.3g (per element, floor 1e-3), %.3g (of max |ref|)\n", names[i],
                e.max_abs, e.max_rel, e.rel_to_max);
    EXPECT_TRUE(at::allclose(out.maps[i].detach(), want, 1e-4, 1e-4 * want.abs().max().item<double>()))
        << names[i] << " max abs " << e.max_abs;
  }
}

TEST_F(YoloTest, NonSquareShapesAndAnchorOrder) {
  Yolo model = CreateModel("t", 4).Value();
  model->eval();
  torch::NoGradGuard no_grad;
  YoloOutput out = model->forward(at::rand({2, 3, 64, 160}));
  ASSERT_EQ(out.maps.size(), 3u);
  EXPECT_EQ(out.maps[0].sizes(), (at::IntArrayRef{2, 68, 8, 20}));
  EXPECT_EQ(out.maps[1].sizes(), (at::IntArrayRef{2, 68, 4, 10}));
  EXPECT_EQ(out.maps[2].sizes(), (at::IntArrayRef{2, 68, 2, 5}));
  EXPECT_EQ(out.decoded.sizes(), (at::IntArrayRef{2, 8, 160 + 40 + 10}));
  // Decode() of the maps gives the same as the eval output.
  EXPECT_TRUE(at::equal(model->Decode(out.maps), out.decoded));
  // Scores are probabilities; boxes are centered near their anchors.
  at::Tensor scores = out.decoded.slice(1, 4);
  EXPECT_GE(scores.min().item<float>(), 0.f);
  EXPECT_LE(scores.max().item<float>(), 1.f);
  EXPECT_THROW(model->forward(at::rand({1, 3, 64, 70})), c10::Error);
  EXPECT_THROW(model->forward(at::rand({1, 1, 64, 64})), c10::Error);
}

TEST_F(YoloTest, MakeAnchorsRowMajorCellCenters) {
  at::Tensor like = at::zeros({1}, at::kFloat);
  AnchorGrid g = MakeAnchors({{2, 3}, {1, 2}}, {8, 16}, like);
  ASSERT_EQ(g.points.sizes(), (at::IntArrayRef{8, 2}));
  ASSERT_EQ(g.strides.sizes(), (at::IntArrayRef{8, 1}));
  const float want[8][2] = {{0.5, 0.5}, {1.5, 0.5}, {2.5, 0.5}, {0.5, 1.5},
                            {1.5, 1.5}, {2.5, 1.5}, {0.5, 0.5}, {1.5, 0.5}};
  for (int i = 0; i < 8; ++i) {
    EXPECT_FLOAT_EQ(g.points[i][0].item<float>(), want[i][0]) << i;
    EXPECT_FLOAT_EQ(g.points[i][1].item<float>(), want[i][1]) << i;
    EXPECT_FLOAT_EQ(g.strides[i][0].item<float>(), i < 6 ? 8.f : 16.f);
  }
  // Dist2Bbox and Bbox2Dist are inverse inside the clamp range.
  at::Tensor pts = at::tensor({1.5f, 2.5f}).view({1, 2});
  at::Tensor dist = at::tensor({1.f, 2.f, 3.f, 4.f}).view({1, 4});
  at::Tensor xyxy = Dist2Bbox(dist, pts, false);
  EXPECT_TRUE(at::allclose(xyxy, at::tensor({0.5f, 0.5f, 4.5f, 6.5f}).view({1, 4})));
  EXPECT_TRUE(at::allclose(Bbox2Dist(pts, xyxy, 15), dist));
  at::Tensor xywh = Dist2Bbox(dist, pts, true);
  EXPECT_TRUE(at::allclose(xywh, at::tensor({2.5f, 3.5f, 4.f, 6.f}).view({1, 4})));
}

TEST_F(YoloTest, FusedOutputsEqualUnfused) {
  Yolo model = CreateModel("t", 3).Value();
  Randomize(*model, 7);
  model->eval();
  torch::NoGradGuard no_grad;
  at::manual_seed(1);
  at::Tensor x = at::rand({2, 3, 64, 96});
  YoloOutput before = model->forward(x);
  Yolo fused = CloneModel(*model);
  fused->Fuse();
  EXPECT_TRUE(fused->IsFused());
  for (const auto& item : fused->named_parameters()) {
    EXPECT_EQ(item.key().find(".bn."), std::string::npos) << item.key();
  }
  YoloOutput after = fused->forward(x);
  ErrorStats e = Compare(after.decoded, before.decoded);
  std::printf("fused vs unfused decoded: max abs %.3g, max rel %.3g\n", e.max_abs, e.max_rel);
  EXPECT_LT(e.max_rel, 1e-4);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(at::allclose(after.maps[i], before.maps[i], 1e-4, 1e-4)) << i;
  }
  EXPECT_FALSE(SaveWeights(*fused, ::testing::TempDir() + "/fused.safetensors").IsOk());
}

TEST_F(YoloTest, CloneCopiesStateAndMode) {
  Yolo model = CreateModel("t", 2).Value();
  Randomize(*model, 3);
  model->eval();
  Yolo copy = CloneModel(*model);
  EXPECT_FALSE(copy->is_training());
  auto a = model->named_buffers();
  for (const auto& item : copy->named_buffers())
    EXPECT_TRUE(at::equal(item.value(), a[item.key()])) << item.key();
  auto p = model->named_parameters();
  for (const auto& item : copy->named_parameters()) {
    EXPECT_TRUE(at::equal(item.value(), p[item.key()])) << item.key();
    EXPECT_NE(item.value().data_ptr(), p[item.key()].data_ptr());
  }
}

TEST_F(YoloTest, DetectBiasInit) {
  Yolo model = CreateModel("t", 5).Value();
  auto p = model->named_parameters();
  EXPECT_TRUE(at::all(p["model.22.cv2.1.2.bias"] == 1.0).item<bool>());
  const double want = std::log(5.0 / 5 / std::pow(640.0 / 32, 2));
  EXPECT_NEAR(p["model.22.cv3.2.2.bias"][4].item<double>(), want, 1e-6);
}

TEST_F(YoloTest, CreateModelRejectsUnknownSpec) {
  auto r = CreateModel("yolov8z", 3);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kestrel::model
