// Weights I/O: adapter dtypes, strict and fine-tune loading, save round trip,
// metadata, crash-safe writes.
#include "model/weights.h"

#include <fstream>

#include "core/fault_env.h"
#include "model/custom_graphs.h"
#include "model/model_yaml.h"
#include "model/pt_writer.h"
#include "test_util.h"

namespace kestrel::model {
namespace {

using testing::HaveReference;
using testing::Randomize;
using testing::RefWeights;

class WeightsTest : public testing::TorchTest {
 protected:
  std::string Tmp(const std::string& name) { return ::testing::TempDir() + "/kestrel_model_" + name; }
};

TEST_F(WeightsTest, AdapterRoundTripsDtypes) {
  for (auto type : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble, at::kLong, at::kInt, at::kByte}) {
    at::Tensor t = (at::rand({3, 4}) * 100).to(type);
    auto st = FromTorch(t.t());  // non-contiguous input
    ASSERT_TRUE(st.IsOk()) << st.GetStatus().ToString();
    EXPECT_EQ(st->shape, (std::vector<int64_t>{4, 3}));
    auto back = ToTorch(*st, "x");
    ASSERT_TRUE(back.IsOk());
    EXPECT_TRUE(at::equal(*back, t.t())) << c10::toString(type);
  }
  SafeTensor scalar{"I64", {}, std::string(8, '\0')};
  scalar.data[0] = 7;
  EXPECT_EQ(ToTorch(scalar, "n")->item<int64_t>(), 7);
  EXPECT_FALSE(ToTorch(SafeTensor{"F8_E4M3", {1}, "x"}, "f8").IsOk());
  EXPECT_FALSE(ToTorch(SafeTensor{"F32", {2}, "abc"}, "short").IsOk());
}

TEST_F(WeightsTest, StrictLoadOfReference) {
  if (!HaveReference()) GTEST_SKIP() << "no ../shared/reference";
  Yolo model = CreateModel("n", 3).Value();
  LoadReport report;
  Status s = LoadWeights(*model, RefWeights(), LoadMode::kStrict, &report);
  ASSERT_TRUE(s.IsOk()) << s.ToString();
  EXPECT_EQ(report.loaded, 355);
  EXPECT_EQ(report.skipped, 0);
  auto file = ReadSafeTensorsFile(RefWeights());
  auto params = model->named_parameters();
  EXPECT_TRUE(
      at::equal(params["model.9.cv2.conv.weight"], *ToTorch(file->tensors.at("model.9.cv2.conv.weight"))));
  EXPECT_EQ(model->named_buffers()["model.0.bn.num_batches_tracked"].item<int64_t>(),
            ToTorch(file->tensors.at("model.0.bn.num_batches_tracked"))->item<int64_t>());
}

TEST_F(WeightsTest, StrictLoadListsMissingUnexpectedAndMismatched) {
  Yolo model = CreateModel("t", 3).Value();
  auto file = WeightsToSafeTensors(*model);
  ASSERT_TRUE(file.IsOk());
  auto& tensors = file->tensors;
  auto node = tensors.extract("model.4.cv1.conv.weight");
  node.key() = "model.4.cv1.conv.weight_renamed";
  tensors.insert(std::move(node));
  tensors["model.9.cv2.bn.bias"].shape = {2, tensors["model.9.cv2.bn.bias"].shape[0] / 2};
  const auto before = model->named_parameters()["model.0.conv.weight"].clone();
  Randomize(*model, 5);  // the failed load must leave these values alone
  const auto randomized = model->named_parameters()["model.0.conv.weight"].clone();
  Status s = LoadWeights(*model, *file, "edited.safetensors", LoadMode::kStrict);
  ASSERT_FALSE(s.IsOk());
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument);
  const std::string msg = s.ToString();
  EXPECT_NE(msg.find("edited.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("1 missing, 1 unexpected, 1 shape-mismatched"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing: model.4.cv1.conv.weight ["), std::string::npos) << msg;
  EXPECT_NE(msg.find("unexpected: model.4.cv1.conv.weight_renamed"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shape mismatch: model.9.cv2.bn.bias: file [2, 64] vs model [128]"), std::string::npos)
      << msg;
  EXPECT_TRUE(at::equal(model->named_parameters()["model.0.conv.weight"], randomized));
  (void)before;
}

TEST_F(WeightsTest, LongMismatchListIsCapped) {
  Yolo small = CreateModel("t", 3).Value();
  Yolo other = CreateModel("n", 3).Value();
  auto file = WeightsToSafeTensors(*other);
  Status s = LoadWeights(*small, *file, "n.safetensors", LoadMode::kStrict);
  ASSERT_FALSE(s.IsOk());
  EXPECT_NE(s.Message().find("more"), std::string::npos) << s.Message();
  size_t lines = 0;
  for (char c : s.Message()) lines += c == '\n';
  EXPECT_EQ(lines, 21u);  // 20 names + "... and N more"
}

TEST_F(WeightsTest, StrictModeHintsAtFineTuneForClassCount) {
  Yolo three = CreateModel("t", 3).Value();
  Yolo five = CreateModel("t", 5).Value();
  Status s = LoadWeights(*five, *WeightsToSafeTensors(*three), "x", LoadMode::kStrict);
  ASSERT_FALSE(s.IsOk());
  EXPECT_NE(s.Message().find("the file has nc=3"), std::string::npos) << s.Message();
}

TEST_F(WeightsTest, FineTuneLoadsAllButTheClassConvs) {
  if (!HaveReference()) GTEST_SKIP() << "no ../shared/reference";
  Yolo model = CreateModel("n", 5).Value();
  LoadReport report;
  Status s = LoadWeights(*model, RefWeights(), LoadMode::kFineTune, &report);
  ASSERT_TRUE(s.IsOk()) << s.ToString();
  EXPECT_EQ(report.skipped, 6);
  EXPECT_EQ(report.loaded, 349);
  for (const auto& n : report.skipped_names) {
    EXPECT_TRUE(n.find("model.22.cv3.") == 0 && n.find(".2.") != std::string::npos) << n;
  }
  auto file = ReadSafeTensorsFile(RefWeights());
  auto params = model->named_parameters();
  EXPECT_TRUE(at::equal(params["model.22.cv3.0.1.conv.weight"],
                        *ToTorch(file->tensors.at("model.22.cv3.0.1.conv.weight"))));
  EXPECT_EQ(params["model.22.cv3.0.2.weight"].size(0), 5);
  EXPECT_NEAR(params["model.22.cv3.0.2.bias"][0].item<double>(), std::log(5.0 / 5 / std::pow(80.0, 2)), 1e-6);
  // Strict mode refuses the same file.
  Yolo strict = CreateModel("n", 5).Value();
  EXPECT_FALSE(LoadWeights(*strict, RefWeights(), LoadMode::kStrict).IsOk());
}

TEST_F(WeightsTest, FineTuneResetsWholeClassBranchWhenItsWidthChanges) {
  // Scale t: c3 = max(32, min(nc, 100)) is 32 for nc=3 and 80 for nc=80.
  Yolo coco = CreateModel("t", 80).Value();
  Randomize(*coco, 11);
  Yolo model = CreateModel("t", 3).Value();
  LoadReport report;
  Status s = LoadWeights(*model, *WeightsToSafeTensors(*coco), "coco", LoadMode::kFineTune, &report);
  ASSERT_TRUE(s.IsOk()) << s.ToString();
  EXPECT_EQ(report.skipped, 3 * (6 + 6 + 2));  // per level: two Conv+BN (6 each) + final conv
  auto bn = model->named_buffers();
  EXPECT_TRUE(at::all(bn["model.22.cv3.1.0.bn.running_var"] == 1).item<bool>());
  EXPECT_TRUE(at::equal(model->named_parameters()["model.22.cv2.1.0.conv.weight"],
                        coco->named_parameters()["model.22.cv2.1.0.conv.weight"]));
  // Anything outside the class branch must still match.
  Yolo s_model = CreateModel("s", 3).Value();
  EXPECT_FALSE(LoadWeights(*s_model, *WeightsToSafeTensors(*coco), "coco", LoadMode::kFineTune).IsOk());
}

TEST_F(WeightsTest, SaveLoadRoundTripIsBitwise) {
  Yolo model = CreateModel("t", 3).Value();
  Randomize(*model, 42);
  SaveOptions options;
  options.names = {"cat", "dog", "bird \"quoted\""};
  options.extra_metadata["epoch"] = "7";
  const std::string path = Tmp("roundtrip.safetensors");
  ASSERT_TRUE(SaveWeights(*model, path, options).IsOk());

  Yolo loaded = CreateModel("t", 3).Value();
  LoadReport report;
  ASSERT_TRUE(LoadWeights(*loaded, path, LoadMode::kStrict, &report).IsOk());
  EXPECT_EQ(report.metadata.at("epoch"), "7");
  auto a = model->named_parameters();
  for (const auto& item : loaded->named_parameters())
    EXPECT_TRUE(at::equal(item.value(), a[item.key()])) << item.key();
  auto b = model->named_buffers();
  for (const auto& item : loaded->named_buffers())
    EXPECT_TRUE(at::equal(item.value(), b[item.key()])) << item.key();
  // Saving the loaded model reproduces the file byte for byte.
  auto first = Env::Default().ReadFile(path);
  ASSERT_TRUE(SaveWeights(*loaded, path, options).IsOk());
  EXPECT_EQ(*Env::Default().ReadFile(path), *first);

  auto info = ReadWeightsInfo(path);
  ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  EXPECT_TRUE(info->from_metadata);
  EXPECT_EQ(info->format_version, kWeightsFormatVersion);
  EXPECT_EQ(info->spec.scale.name, "t");
  EXPECT_EQ(info->spec.nc, 3);
  EXPECT_EQ(info->names, options.names);
  auto file = ReadSafeTensorsFile(path);
  EXPECT_EQ(file->tensors.at("model.0.bn.num_batches_tracked").dtype, "I64");
  EXPECT_EQ(file->metadata.at("format"), "kestrel.yolo.weights");
}

// Issue 28 item 7: a custom graph (a P2 head; C3/C3k2/C2PSA with Detect on a
// backbone layer) builds, runs at its own strides, and its weights carry the
// graph: ReadWeightsInfo rebuilds it with the yaml file gone, the strict
// load gives the same outputs, and the .pt writer writes its module tree.
TEST_F(WeightsTest, CustomGraphWeightsCarryTheGraph) {
  for (const char* text : {kestrel::testing::kP2Yaml, kestrel::testing::kMixedYaml}) {
    const std::string yaml = Tmp("custom-graph.yaml");
    std::ofstream(yaml) << text;
    auto read = ReadModelYaml(yaml);
    ASSERT_TRUE(read.IsOk()) << read.GetStatus().ToString();
    ASSERT_TRUE(std::filesystem::remove(yaml));
    ModelSpec spec = read->spec;
    spec.nc = 2;
    Yolo model = CreateModel(spec).Value();
    Randomize(*model, 7);
    model->eval();
    const std::vector<int> strides = BuildLayerPlan(spec).back().detect_strides;
    const at::Tensor x = at::rand({1, 3, 64, 96});
    YoloOutput out = model->forward(x);
    ASSERT_EQ(out.maps.size(), strides.size());
    int64_t anchors = 0;
    for (size_t i = 0; i < strides.size(); ++i) {
      EXPECT_EQ(out.maps[i].size(2), 64 / strides[i]);
      EXPECT_EQ(out.maps[i].size(3), 96 / strides[i]);
      anchors += (64 / strides[i]) * (96 / strides[i]);
    }
    EXPECT_EQ(out.decoded.sizes(), (at::IntArrayRef{1, 4 + 2, anchors}));
    EXPECT_EQ(model->Strides().size(), strides.size());

    const std::string path = Tmp("custom.safetensors");
    ASSERT_TRUE(SaveWeights(*model, path, SaveOptions{.names = {"a", "b"}}).IsOk());
    auto info = ReadWeightsInfo(path);
    ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
    ASSERT_TRUE(info->spec.graph.has_value());
    EXPECT_EQ(info->spec.Name(), "kestrel_model_custom-graph");  // the yaml file's stem
    EXPECT_EQ(info->spec.nc, 2);
    EXPECT_EQ(ReadSafeTensorsFile(path)->metadata.at("arch"), "custom");
    Yolo loaded = CreateModel(info->spec).Value();
    ASSERT_TRUE(LoadWeights(*loaded, path, LoadMode::kStrict).IsOk());
    loaded->eval();
    EXPECT_TRUE(at::allclose(loaded->forward(x).decoded, out.decoded)) << spec.Name();

    // The reference's checkpoint layout, its yaml holding the custom rows.
    PtWriteOptions po;
    po.spec = info->spec;
    po.names = {"a", "b"};
    po.date = "2026-12-05T00:00:00.000000";
    auto pt = SerializePtCheckpoint(*ReadSafeTensorsFile(path), po);
    ASSERT_TRUE(pt.IsOk()) << pt.GetStatus().ToString();
    EXPECT_NE(pt->find("custom-graph.yaml"), std::string::npos);
  }
  // Metadata that says custom without a graph is corruption, naming the key.
  SafeTensorFile bad = *ReadSafeTensorsFile(Tmp("custom.safetensors"));
  bad.metadata.erase("graph");
  const std::string bad_path = Tmp("custom-nograph.safetensors");
  ASSERT_TRUE(Env::Default().WriteFileAtomic(bad_path, SerializeSafeTensors(bad)).IsOk());
  auto info = ReadWeightsInfo(bad_path);
  ASSERT_FALSE(info.IsOk());
  EXPECT_EQ(info.GetStatus().Where().field, "graph");
}

TEST_F(WeightsTest, LoadsHalfPrecisionFiles) {
  Yolo model = CreateModel("t", 3).Value();
  Randomize(*model, 9);
  auto file = WeightsToSafeTensors(*model);
  for (auto& [name, t] : file->tensors) {
    if (t.dtype == "F32") t = *FromTorch(ToTorch(t).Value().to(at::kHalf));
  }
  Yolo loaded = CreateModel("t", 3).Value();
  ASSERT_TRUE(LoadWeights(*loaded, *file, "half", LoadMode::kStrict).IsOk());
  auto a = model->named_parameters();
  for (const auto& item : loaded->named_parameters()) {
    EXPECT_EQ(item.value().scalar_type(), at::kFloat);
    EXPECT_TRUE(at::allclose(item.value(), a[item.key()], 1e-3, 1e-3)) << item.key();
  }
}

TEST_F(WeightsTest, SaveRejectsBadNamesAndReservedKeys) {
  Yolo model = CreateModel("t", 3).Value();
  SaveOptions bad_names;
  bad_names.names = {"a", "b"};
  EXPECT_EQ(SaveWeights(*model, Tmp("x.safetensors"), bad_names).Code(), StatusCode::kInvalidArgument);
  SaveOptions reserved;
  reserved.extra_metadata["nc"] = "9";
  EXPECT_EQ(SaveWeights(*model, Tmp("x.safetensors"), reserved).Code(), StatusCode::kInvalidArgument);
}

TEST_F(WeightsTest, FailedWriteKeepsThePreviousFile) {
  Yolo model = CreateModel("t", 3).Value();
  const std::string path = Tmp("atomic.safetensors");
  ASSERT_TRUE(SaveWeights(*model, path).IsOk());
  auto before = Env::Default().ReadFile(path);
  FaultInjectionEnv env(Env::Default());
  env.FailWritesAfter(0);
  Randomize(*model, 1);
  SaveOptions options;
  options.env = &env;
  Status s = SaveWeights(*model, path, options);
  EXPECT_EQ(s.Code(), StatusCode::kIoError);
  EXPECT_EQ(*Env::Default().ReadFile(path), *before);
}

TEST_F(WeightsTest, MissingFileIsAnError) {
  Yolo model = CreateModel("t", 3).Value();
  Status s = LoadWeights(*model, Tmp("does_not_exist.safetensors"), LoadMode::kStrict);
  EXPECT_FALSE(s.IsOk());
  EXPECT_NE(s.ToString().find("does_not_exist"), std::string::npos) << s.ToString();
}

TEST_F(WeightsTest, FusedModelRefusesLoad) {
  Yolo model = CreateModel("t", 3).Value();
  auto file = WeightsToSafeTensors(*model);
  model->Fuse();
  EXPECT_EQ(LoadWeights(*model, *file, "x", LoadMode::kStrict).Code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace kestrel::model
