// Loading Ultralytics .pt checkpoints into the torch model: the same tensors
// as the safetensors export, strict and fine-tune modes, and the errors for
// files that are not YOLOv8 detection checkpoints.
#include "model/pt_checkpoint.h"
#include "model/weights.h"
#include "test_util.h"

namespace kestrel::model {
namespace {

const std::string kParity = std::string(KESTREL_SHARED_DIR) + "/reference/val_parity";
const std::string kFixtures = std::string(KESTREL_SOURCE_DIR) + "/tests/model/fixtures";

class PtLoadTest : public testing::TorchTest {
 protected:
  void SetUp() override {
    if (!Env::Default().Stat(kParity + "/yolov8n_shapes_p.pt").exists) {
      GTEST_SKIP() << "../shared/reference/val_parity not present";
    }
  }
};

TEST_F(PtLoadTest, PtLoadsExactlyLikeItsSafetensorsExport) {
  Yolo from_pt = CreateModel("n", 3).Value();
  Yolo from_st = CreateModel("n", 3).Value();
  LoadReport report;
  Status s = LoadWeights(*from_pt, kParity + "/yolov8n_shapes_p.pt", LoadMode::kStrict, &report);
  ASSERT_TRUE(s.IsOk()) << s.ToString();
  EXPECT_EQ(report.loaded, 355);
  EXPECT_EQ(report.metadata.at("format"), "ultralytics.pt");
  EXPECT_EQ(report.metadata.at("source"), "model");
  ASSERT_TRUE(LoadWeights(*from_st, kParity + "/yolov8n_shapes_p.safetensors", LoadMode::kStrict).IsOk());
  auto a = from_pt->named_parameters();
  auto b = from_st->named_parameters();
  for (const auto& item : a) EXPECT_TRUE(at::equal(item.value(), b[item.key()])) << item.key();
  auto ab = from_pt->named_buffers();
  auto bb = from_st->named_buffers();
  for (const auto& item : ab) EXPECT_TRUE(at::equal(item.value(), bb[item.key()])) << item.key();
}

TEST_F(PtLoadTest, ClassCountMismatchIsStrictErrorAndFineTuneReinitializes) {
  Yolo model = CreateModel("n", 5).Value();
  Status strict = LoadWeights(*model, kParity + "/yolov8n_shapes_p.pt", LoadMode::kStrict);
  EXPECT_EQ(strict.Code(), StatusCode::kInvalidArgument);
  EXPECT_NE(strict.Message().find("the file has nc=3"), std::string::npos) << strict.ToString();
  LoadReport report;
  Status tune = LoadWeights(*model, kParity + "/yolov8n_shapes_p.pt", LoadMode::kFineTune, &report);
  ASSERT_TRUE(tune.IsOk()) << tune.ToString();
  EXPECT_GT(report.skipped, 0);
  EXPECT_EQ(report.loaded + report.skipped, 355);
}

TEST_F(PtLoadTest, WrongScaleAndNonCheckpointsAreClearErrors) {
  Yolo small = CreateModel("s", 3).Value();
  Status s = LoadWeights(*small, kParity + "/yolov8n_shapes_p.pt", LoadMode::kStrict);
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.Message().find("shape-mismatched"), std::string::npos) << s.ToString();
  Status other = LoadWeights(*small, kFixtures + "/unrelated_state_dict.pt", LoadMode::kStrict);
  EXPECT_EQ(other.Code(), StatusCode::kInvalidArgument);
  EXPECT_NE(other.Message().find("fc.weight"), std::string::npos) << other.ToString();
}

}  // namespace
}  // namespace kestrel::model
