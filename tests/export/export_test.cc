// `kestrel export` (app_run/export.h, src/export): the written ONNX file runs
// in OpenCV DNN with the LibTorch model's raw output0 to within 1e-4, for two
// class counts and two input sizes, on weights whose BatchNorm statistics are
// far from their init (so a wrong fold shows); the CLI's --json is the app
// view; bad keys and tensors are named in the error.
#include "app_run/export.h"

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <filesystem>
#include <random>
#include <string>

#include "../cli/cli_fixture.h"
#include "core/env.h"
#include "core/safetensors.h"
#include "export/onnx_export.h"
#include "model/pt_checkpoint.h"
#include "model/weights.h"
#include "model/yolo.h"

namespace kestrel {
namespace {

namespace fs = std::filesystem;

class ExportTest : public testing::KestrelCliTest {
 protected:
  // A yolov8t model with `nc` classes, every parameter and BN statistic
  // drawn at random (seeded), saved as safetensors; returns the path.
  std::string RandomWeights(int nc, uint64_t seed) {
    auto m = model::CreateModel("t", nc);
    EXPECT_TRUE(m.IsOk());
    torch::manual_seed(seed);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : (*m)->named_parameters()) {
        if (p.key().find("dfl") != std::string::npos) continue;
        p.value().copy_(p.value() * 0.5 + torch::randn_like(p.value()) * 0.05);
      }
      for (auto& b : (*m)->named_buffers()) {
        if (b.key().find("running_mean") != std::string::npos)
          b.value().copy_(torch::randn_like(b.value()) * 0.1);
        if (b.key().find("running_var") != std::string::npos)
          b.value().copy_(torch::rand_like(b.value()) + 0.5);
      }
    }
    const std::string path = (dir_ / ("t_nc" + std::to_string(nc) + ".safetensors")).string();
    EXPECT_TRUE(model::SaveWeights(**m, path).IsOk());
    return path;
  }
};

int64_t Anchors(int side) {
  return (side / 8) * (side / 8) + (side / 16) * (side / 16) + (side / 32) * (side / 32);
}

TEST_F(ExportTest, OnnxMatchesLibTorchForTwoClassCountsAndTwoSizes) {
  for (int nc : {2, 5}) {
    const std::string weights = RandomWeights(nc, 7 + nc);
    for (int side : {64, 96}) {
      app::ExportRequest req;
      req.model = weights;
      req.imgsz = side;
      req.verify_images = 3;
      req.output = (dir_ / ("m" + std::to_string(nc) + "_" + std::to_string(side) + ".onnx")).string();
      Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
      ASSERT_TRUE(r.IsOk()) << "nc " << nc << " imgsz " << side << ": " << r.GetStatus().ToString();
      EXPECT_TRUE(r->verified);
      EXPECT_LT(r->max_abs_diff, 1e-3);  // a few float ulps of coordinates below 128 px
      EXPECT_LE(r->max_abs_diff_scores, app::kExportTolerance);
      EXPECT_LE(r->max_rel_diff_boxes, app::kExportTolerance);
      EXPECT_EQ(r->verify_images, 3);
      EXPECT_EQ(r->output_shape, (std::vector<int64_t>{1, 4 + nc, Anchors(side)}));
      EXPECT_EQ(r->names.size(), static_cast<size_t>(nc));
      EXPECT_TRUE(fs::exists(req.output));
      EXPECT_FALSE(fs::exists(req.output + ".verifying.onnx"));
      EXPECT_EQ(Env::Default().ReadFile(req.output).Value().find("kestrel_verification"), std::string::npos);
      std::cout << "nc " << nc << " imgsz " << side << ": max |diff| " << r->max_abs_diff << "\n";
    }
  }
}

TEST_F(ExportTest, BatchedExportOfReferenceWeightsVerifies) {
  const std::string ref = std::string(KESTREL_SHARED_DIR) + "/reference/yolov8n_nc3_weights.safetensors";
  if (!fs::exists(ref)) GTEST_SKIP() << "no ../shared reference weights";
  app::ExportRequest req;
  req.model = ref;
  req.imgsz = 128;
  req.batch = 2;
  req.verify_images = 4;
  req.output = (dir_ / "n.onnx").string();
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->arch, "yolov8n");
  EXPECT_EQ(r->output_shape, (std::vector<int64_t>{2, 7, Anchors(128)}));
  EXPECT_LE(r->max_abs_diff_scores, app::kExportTolerance);
  EXPECT_LE(r->max_rel_diff_boxes, app::kExportTolerance);
  EXPECT_LT(r->max_abs_diff_boxes, 1e-3);  // a few float ulps of coordinates up to 128 px
  std::cout << "yolov8n nc 3 imgsz 128 batch 2: max |diff| " << r->max_abs_diff << " (scores "
            << r->max_abs_diff_scores << ", boxes " << r->max_abs_diff_boxes << ")\n";
}

TEST_F(ExportTest, BuilderNamesAMissingTensorAndChecksTheGraph) {
  const std::string weights = RandomWeights(2, 3);
  Result<SafeTensorFile> file = model::ReadWeightsFile(weights);
  ASSERT_TRUE(file.IsOk());
  model::ModelSpec spec = model::ParseModelSpec("t", 2).Value();
  exporter::OnnxExportOptions o;
  o.imgsz_h = 64;
  o.imgsz_w = 128;  // non-square works in the builder
  Result<exporter::OnnxModel> ok = exporter::BuildOnnxModel(spec, *file, o);
  ASSERT_TRUE(ok.IsOk()) << ok.GetStatus().ToString();
  EXPECT_EQ(ok->anchors, 8 * 16 + 4 * 8 + 2 * 4);
  EXPECT_EQ(ok->output_channels, 6);
  EXPECT_EQ(ok->metadata.at("names"), "{0: 'class0', 1: 'class1'}");
  EXPECT_EQ(ok->metadata.at("imgsz"), "[64, 128]");
  EXPECT_EQ(ok->metadata.at("task"), "detect");
  const std::string path = (dir_ / "direct.onnx").string();
  EXPECT_TRUE(exporter::WriteOnnxFile(Env::Default(), *ok, path).IsOk());

  file->tensors.erase("model.4.m.0.cv2.bn.running_var");
  Result<exporter::OnnxModel> bad = exporter::BuildOnnxModel(spec, *file, o);
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "model.4.m.0.cv2.bn.running_var");
  // A truncated file fails the checker on the written bytes.
  exporter::OnnxModel cut = *ok;
  cut.bytes.resize(cut.bytes.size() / 2);
  EXPECT_FALSE(exporter::WriteOnnxFile(Env::Default(), cut, (dir_ / "cut.onnx").string()).IsOk());
}

TEST_F(ExportTest, BadKeysAreNamed) {
  const std::string weights = RandomWeights(2, 5);
  struct Case {
    std::string key;
    app::ExportRequest req;
  };
  std::vector<Case> cases(5);
  for (auto& c : cases) c.req.model = weights;
  cases[0].key = "format";
  cases[0].req.format = "tflite";
  cases[1].key = "opset";
  cases[1].req.opset = 11;
  cases[2].key = "imgsz";
  cases[2].req.imgsz = 100;
  cases[3].key = "dynamic";
  cases[3].req.dynamic = true;
  cases[4].key = "batch";
  cases[4].req.batch = 0;
  for (const auto& c : cases) {
    Result<app::ExportResult> r = app::ExportModel(Env::Default(), c.req);
    ASSERT_FALSE(r.IsOk()) << c.key;
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument) << c.key;
    EXPECT_EQ(r.GetStatus().Where().field, c.key) << r.GetStatus().ToString();
  }
  app::ExportRequest missing;
  missing.model = (dir_ / "nope.safetensors").string();
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), missing);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kNotFound) << r.GetStatus().ToString();
  // The CLI: a usage error (exit 2) naming the key.
  testing::CliRun cli = Kestrel("export model=" + weights + " format=tflite");
  EXPECT_EQ(cli.code, 2);
  cli = Kestrel("--json export model=" + weights + " opset=9");
  EXPECT_EQ(cli.code, 2);
  EXPECT_NE(cli.out.find("opset"), std::string::npos) << cli.out;
}

TEST_F(ExportTest, FailedVerificationWritesNothingUnlessForced) {
  const std::string weights = RandomWeights(2, 13);
  app::ExportRequest req;
  req.model = weights;
  req.imgsz = 64;
  req.tolerance = 1e-12;  // below the few-ulp difference every pair of conv implementations shows
  req.output = (dir_ / "strict.onnx").string();
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.GetStatus().Message().find("verification failed"), std::string::npos)
      << r.GetStatus().ToString();
  EXPECT_FALSE(fs::exists(req.output));
  EXPECT_FALSE(fs::exists(req.output + ".verifying.onnx"));

  req.force = true;
  r = app::ExportModel(Env::Default(), req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_FALSE(r->verified);
  EXPECT_NE(r->verification_error.find("verification failed"), std::string::npos);
  EXPECT_EQ(app::ExportResultJson(*r)["verification"]["verified"], false);
  const std::string bytes = Env::Default().ReadFile(req.output).Value();
  EXPECT_NE(bytes.find("kestrel_verification"), std::string::npos);
  EXPECT_FALSE(fs::exists(req.output + ".verifying.onnx"));
}

TEST_F(ExportTest, CliJsonIsTheAppView) {
  const std::string weights = RandomWeights(3, 11);
  const std::string out = (dir_ / "cli.onnx").string();
  app::ExportRequest req;
  req.model = weights;
  req.imgsz = 64;
  req.output = out;
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  const nlohmann::json aj = app::ExportResultJson(*r);
  testing::CliRun cli = Kestrel("--json export model=" + weights + " format=onnx imgsz=64 output=" + out);
  ASSERT_EQ(cli.code, 0) << cli.out;
  EXPECT_EQ(Json(cli), aj);
}

}  // namespace
}  // namespace kestrel
