// `kestrel export` (app/export.h, src/export): the written ONNX file runs
// in OpenCV DNN and ONNX Runtime with the LibTorch model's raw output0 to
// within 1e-4, for two class counts and two input sizes, on weights whose
// BatchNorm statistics are far from their init (so a wrong fold shows); a
// dynamic export at two sizes x two batch sizes; a planted difference fails
// in both runtimes; the CLI's --json is the app view; an export of a
// registered model is recorded and listed by `models show`; bad keys and tensors
// are named in the error. The ONNX Runtime cases skip only when node or
// onnxruntime-node is absent (scripts/install-node-deps.sh).
#include "app/export.h"

#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cstring>
#include <filesystem>
#include <opencv2/dnn.hpp>
#include <opencv2/imgcodecs.hpp>
#include <random>
#include <string>
#include <utility>

#include "../cli/cli_fixture.h"
#include "app/backends.h"
#include "app/export_record.h"
#include "app/job_kinds.h"
#include "app/onnx_runtime.h"
#include "core/env.h"
#include "core/hash.h"
#include "core/safetensors.h"
#include "data/synth.h"
#include "export/onnx_export.h"
#include "export/onnx_info.h"
#include "model/pt_checkpoint.h"
#include "model/weights.h"
#include "model/yolo.h"
#include "store/artifact_store.h"
#include "store/local_artifact_store.h"
#include "store/metadata_store.h"

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

// ONNX Runtime's check: passed when it is installed; otherwise it says it
// did not run (and never passes).
void ExpectOrtCheck(const app::ExportResult& r) {
  ASSERT_EQ(r.checks.size(), 2u);
  const app::RuntimeCheck& ort = r.checks[1];
  const app::OnnxRuntimeLocation where = app::LocateOnnxRuntime();
  if (!where.unavailable.empty()) {
    EXPECT_FALSE(ort.ran);
    EXPECT_FALSE(ort.passed);
    EXPECT_NE(ort.error.find("did not run"), std::string::npos) << ort.error;
    EXPECT_NE(app::ExportResultText(r).find("ONNX Runtime check did not run"), std::string::npos);
    return;
  }
  EXPECT_TRUE(ort.ran) << ort.error;
  EXPECT_TRUE(ort.passed) << ort.error;
  EXPECT_EQ(ort.runtime, "onnxruntime " + where.version);
  EXPECT_LE(ort.max_abs_diff_scores, app::kExportTolerance);
  EXPECT_LE(ort.max_rel_diff_boxes, app::kExportTolerance);
  EXPECT_LT(ort.max_abs_diff, 1e-3);
}

TEST_F(ExportTest, OnnxMatchesLibTorchForTwoClassCountsAndTwoSizes) {
  for (int nc : {2, 5}) {
    const std::string weights = RandomWeights(nc, 7 + nc);
    for (int side : {64, 96}) {
      app::ExportRequest req;
      req.model = weights;
      req.imgsz_h = req.imgsz_w = side;
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
      ExpectOrtCheck(*r);
      std::cout << "nc " << nc << " imgsz " << side << ": max |diff| OpenCV " << r->max_abs_diff << ", ORT "
                << r->checks[1].max_abs_diff << "\n";
    }
  }
}

TEST_F(ExportTest, BatchedExportOfReferenceWeightsVerifies) {
  const std::string ref = std::string(KESTREL_SHARED_DIR) + "/reference/yolov8n_nc3_weights.safetensors";
  if (!fs::exists(ref)) GTEST_SKIP() << "no ../shared reference weights";
  app::ExportRequest req;
  req.model = ref;
  req.imgsz_h = req.imgsz_w = 128;
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
  ExpectOrtCheck(*r);
  std::cout << "yolov8n nc 3 imgsz 128 batch 2: max |diff| OpenCV " << r->max_abs_diff << " (scores "
            << r->max_abs_diff_scores << ", boxes " << r->max_abs_diff_boxes << "), ORT "
            << r->checks[1].max_abs_diff << " (scores " << r->checks[1].max_abs_diff_scores << ", boxes "
            << r->checks[1].max_abs_diff_boxes << ")\n";
}

// Issue 29: the YOLO11 graph (C3k2, C3k, C2PSA's attention as MatMul/Softmax,
// the depthwise class branch) and YOLOv5u's (C3, the k6 p2 stem) on their
// reference nc=3 weights, static and dynamic, against LibTorch in OpenCV DNN
// and ONNX Runtime. YOLO11's dynamic graph restores the attention's [N, C,
// H, W] with a Shape node that OpenCV DNN 4.6 cannot import: its OpenCV
// check does not run and says why, ONNX Runtime verifies it at the four
// shapes, and OpenCV really does refuse the file (predict names the operator).
TEST_F(ExportTest, FamiliesExportAndVerify) {
  const std::string dir = std::string(KESTREL_SHARED_DIR) + "/reference/families/";
  if (!fs::exists(dir + "yolo11n_nc3_weights.safetensors")) GTEST_SKIP() << "no " << dir;
  const bool ort_available = app::LocateOnnxRuntime().unavailable.empty();
  for (const std::string name : {"yolo11n", "yolov5nu"}) {
    for (const bool dynamic : {false, true}) {
      app::ExportRequest req;
      req.model = dir + name + "_nc3_weights.safetensors";
      req.imgsz_h = 64;
      req.imgsz_w = 96;
      req.dynamic = dynamic;
      req.verify_images = 2;
      req.output = (dir_ / (name + (dynamic ? "_dyn" : "") + ".onnx")).string();
      Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
      const bool ort_only = dynamic && name == "yolo11n";
      if (ort_only && !ort_available) {  // the one runtime that can verify it is missing
        EXPECT_EQ(r.GetStatus().Code(), StatusCode::kFailedPrecondition) << r.GetStatus().ToString();
        EXPECT_NE(r.GetStatus().Message().find("ONNX Runtime check did not run"), std::string::npos);
        continue;
      }
      ASSERT_TRUE(r.IsOk()) << name << " dynamic " << dynamic << ": " << r.GetStatus().ToString();
      EXPECT_EQ(r->arch, name);
      EXPECT_TRUE(r->verified) << name << " dynamic " << dynamic << ": " << r->verification_error;
      EXPECT_LE(r->max_abs_diff_scores, app::kExportTolerance) << name;
      EXPECT_LE(r->max_rel_diff_boxes, app::kExportTolerance) << name;
      ExpectOrtCheck(*r);
      ASSERT_EQ(r->checks.size(), 2u);
      EXPECT_EQ(r->checks[0].ran, !ort_only) << name << " dynamic " << dynamic;
      if (ort_only) {
        EXPECT_NE(r->checks[0].error.find("Shape node"), std::string::npos) << r->checks[0].error;
        EXPECT_NE(app::ExportResultText(*r).find("OpenCV DNN 4.6 cannot import"), std::string::npos)
            << app::ExportResultText(*r);
        EXPECT_EQ(r->verify_shapes.size(), 4u);
        EXPECT_EQ(r->input_shape, (std::vector<int64_t>{-1, 3, -1, -1}));
        // OpenCV DNN itself refuses the Shape of a dynamic input (so the
        // check above is not skipped for nothing) ...
        cv::dnn::Net net;
        EXPECT_ANY_THROW(net = cv::dnn::readNetFromONNX(req.output));
        // ... and predict with the OpenCV engine names the operator.
        const std::string image = (dir_ / "one.png").string();
        ASSERT_TRUE(cv::imwrite(image, cv::Mat(64, 96, CV_8UC3, cv::Scalar(90, 120, 150))));
        const testing::CliRun p = Kestrel("--json predict model=" + req.output + " source=" + image);
        EXPECT_EQ(p.code, 1) << p.out;
        EXPECT_NE(p.out.find("Shape node"), std::string::npos) << p.out;
        EXPECT_NE(p.out.find("runtime=onnxruntime"), std::string::npos) << p.out;
      }
      std::cout << name << (dynamic ? " dynamic" : " static") << " 64x96: max |diff| OpenCV "
                << (r->checks[0].ran ? std::to_string(r->checks[0].max_abs_diff) : "(not run)") << " (scores "
                << r->checks[0].max_abs_diff_scores << "), ORT " << r->checks[1].max_abs_diff << " (scores "
                << r->checks[1].max_abs_diff_scores << ")\n";
    }
  }
}

// Issue 29: FP16, INT8 (calibrated on the YOLO11 validation split) and
// nms=true for both families on their reference nc=3 weights, fixed, and
// YOLO11's dynamic graph with all three (ONNX Runtime verifies each; OpenCV
// DNN cannot load FP16/INT8 and cannot import the dynamic attention's Shape).
TEST_F(ExportTest, FamiliesHalfInt8NmsVerify) {
  const std::string dir = std::string(KESTREL_SHARED_DIR) + "/reference/families/";
  if (!fs::exists(dir + "yolo11n_nc3_weights.safetensors")) GTEST_SKIP() << "no " << dir;
  if (!app::LocateOnnxRuntime().unavailable.empty())
    GTEST_SKIP() << "no ONNX Runtime (FP16/INT8/NMS verify there)";
  struct Case {
    std::string name, keys;
  };
  const std::vector<Case> cases = {
      {"yolo11n", "half=true"},
      {"yolo11n", "nms=true"},
      {"yolo11n", "int8=true calib=8 data=" + dir + "yolo11_val"},
      {"yolo11n", "dynamic=true half=true nms=true"},
      {"yolov5nu", "half=true"},
      {"yolov5nu", "nms=true"},
      {"yolov5nu", "int8=true calib=8 data=" + dir + "yolo11_val"},
  };
  int k = 0;
  for (const Case& c : cases) {
    const std::string out = (dir_ / ("f" + std::to_string(k++) + ".onnx")).string();
    const testing::CliRun r =
        Kestrel("--json export model=" + dir + c.name +
                "_nc3_weights.safetensors imgsz=64 verify_images=2 output=" + out + " " + c.keys);
    ASSERT_EQ(r.code, 0) << c.name << " " << c.keys << ": " << r.out;
    const nlohmann::json j = Json(r);
    EXPECT_EQ(j["arch"], c.name);
    EXPECT_EQ(j["verification"]["verified"], true) << c.name << " " << c.keys;
    const nlohmann::json& ort = j["verification"]["runtimes"][1];
    EXPECT_EQ(ort["ran"], true) << ort;
    EXPECT_EQ(ort["passed"], true) << ort;
    EXPECT_EQ(j["verification"]["runtimes"][0]["ran"], c.keys.find("nms=true") == 0) << c.keys;
    if (c.keys.find("nms=true") != std::string::npos) {
      EXPECT_EQ(j["verification"]["nms"]["passed"], true);
    }
    EXPECT_TRUE(fs::exists(out));
    std::cout << c.name << " " << c.keys.substr(0, c.keys.find(" data=")) << ": ORT max |diff| scores "
              << ort["max_abs_diff_scores"] << ", boxes rel " << ort["max_rel_diff_boxes"] << "\n";
  }
}

// Issue 29: on trained weights the attention's logits matter, and OpenCV DNN
// 4.6 lost the constant 1/sqrt(key_dim) Mul that followed the q.k MatMul
// (its softmax came out 7% off; the export missed the 1e-4 tolerance with
// 1.04e-4 on a score). With q scaled before the MatMul, OpenCV agrees with
// LibTorch as ONNX Runtime does (measured 3.9e-7 on scores, 3.2e-6 relative
// on boxes): the bound below is 25x under the old error.
TEST_F(ExportTest, Yolo11TrainedAttentionVerifiesInOpenCv) {
  const std::string pt = std::string(KESTREL_SHARED_DIR) + "/reference/families/yolo11n_shapes.pt";
  if (!fs::exists(pt)) GTEST_SKIP() << "no " << pt;
  app::ExportRequest req;
  req.model = pt;
  req.imgsz_h = req.imgsz_w = 320;  // its training size, where the old error showed
  req.verify_images = 4;
  req.output = (dir_ / "y11.onnx").string();
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(r->verified) << r->verification_error;
  EXPECT_EQ(r->input_shape, (std::vector<int64_t>{1, 3, 320, 320}));
  ASSERT_TRUE(r->checks[0].ran);
  EXPECT_LT(r->checks[0].max_abs_diff_scores, 4e-6);
  EXPECT_LT(r->checks[0].max_rel_diff_boxes, 1e-5);
  ExpectOrtCheck(*r);
  std::cout << "yolo11n_shapes.pt 320: OpenCV max |diff| scores " << r->checks[0].max_abs_diff_scores
            << ", boxes rel " << r->checks[0].max_rel_diff_boxes << "; ORT "
            << r->checks[1].max_abs_diff_scores << ", " << r->checks[1].max_rel_diff_boxes << "\n";
}

TEST_F(ExportTest, DynamicExportMatchesLibTorchAtTwoSizesAndTwoBatchSizes) {
  const std::string weights = RandomWeights(3, 17);
  app::ExportRequest req;
  req.model = weights;
  req.imgsz_h = 64;
  req.imgsz_w = 96;  // non-square
  req.dynamic = true;
  req.verify_images = 2;
  req.output = (dir_ / "dynamic.onnx").string();
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(r->verified) << r->verification_error;
  EXPECT_EQ(r->input_shape, (std::vector<int64_t>{-1, 3, -1, -1}));
  EXPECT_EQ(r->output_shape, (std::vector<int64_t>{-1, 7, -1}));
  // Two batch sizes x two input sizes, the second non-proportional.
  EXPECT_EQ(r->verify_shapes, (std::vector<std::vector<int64_t>>{
                                  {1, 3, 64, 96}, {1, 3, 32, 128}, {2, 3, 64, 96}, {2, 3, 32, 128}}));
  EXPECT_EQ(r->verify_images, 2 + 2 + 2 + 2);
  ASSERT_EQ(r->checks.size(), 2u);
  EXPECT_TRUE(r->checks[0].ran);
  EXPECT_TRUE(r->checks[0].passed) << r->checks[0].error;
  EXPECT_LE(r->max_abs_diff_scores, app::kExportTolerance);
  EXPECT_LE(r->max_rel_diff_boxes, app::kExportTolerance);
  const std::string bytes = Env::Default().ReadFile(req.output).Value();
  EXPECT_NE(bytes.find("height"), std::string::npos);            // the dim_params
  EXPECT_EQ(bytes.find("model.22.anchors"), std::string::npos);  // computed in the graph, not baked
  ExpectOrtCheck(*r);
  const nlohmann::json j = app::ExportResultJson(*r);
  EXPECT_EQ(j["dynamic"], true);
  EXPECT_EQ(j["imgsz"], nlohmann::json::array({64, 96}));
  EXPECT_EQ(j["verification"]["runtimes"].size(), 2u);
  std::cout << "dynamic 64x96: max |diff| OpenCV " << r->max_abs_diff << ", ORT " << r->checks[1].max_abs_diff
            << "\n";
}

TEST_F(ExportTest, PlantedDifferenceFailsInEveryRuntime) {
  const std::string weights = RandomWeights(2, 19);
  Result<SafeTensorFile> file = model::ReadWeightsFile(weights);
  ASSERT_TRUE(file.IsOk());
  // One class bias of one level moved by 0.1: that level's scores move by
  // sigmoid' * 0.1, ~3e-3 where the random model scores low.
  SafeTensor& bias = file->tensors.at("model.22.cv3.1.2.bias");
  ASSERT_EQ(bias.dtype, "F32");
  float v = 0;
  std::memcpy(&v, bias.data.data(), 4);
  v += 0.1F;
  std::memcpy(bias.data.data(), &v, 4);
  model::ModelSpec spec = model::ParseModelSpec("t", 2).Value();
  exporter::OnnxExportOptions o;
  o.imgsz_h = o.imgsz_w = 64;
  o.dynamic = true;
  Result<exporter::OnnxModel> planted = exporter::BuildOnnxModel(spec, *file, o);
  ASSERT_TRUE(planted.IsOk()) << planted.GetStatus().ToString();
  const std::string path = (dir_ / "planted.onnx").string();
  ASSERT_TRUE(exporter::WriteOnnxFile(Env::Default(), *planted, path).IsOk());

  Result<std::vector<app::RuntimeCheck>> checks =
      app::VerifyOnnxFile(path, weights, {{1, 3, 64, 64}, {2, 3, 96, 64}}, 2, app::kExportTolerance);
  ASSERT_TRUE(checks.IsOk()) << checks.GetStatus().ToString();
  ASSERT_EQ(checks->size(), 2u);
  for (const app::RuntimeCheck& c : *checks) {
    if (!c.ran) {
      EXPECT_EQ(c.runtime, "onnxruntime");
      EXPECT_FALSE(app::LocateOnnxRuntime().unavailable.empty());
      continue;
    }
    EXPECT_FALSE(c.passed) << c.runtime;
    EXPECT_GT(c.max_abs_diff_scores, 1e-3) << c.runtime;
    EXPECT_LE(c.max_rel_diff_boxes, app::kExportTolerance) << c.runtime;  // only the scores were planted
    EXPECT_NE(c.error.find("class scores"), std::string::npos) << c.error;
  }
  // The same file checked against the weights it was built from passes.
  const std::string planted_weights = (dir_ / "planted.safetensors").string();
  ASSERT_TRUE(Env::Default().WriteFileAtomic(planted_weights, SerializeSafeTensors(*file)).IsOk());
  checks = app::VerifyOnnxFile(path, planted_weights, {{1, 3, 64, 64}}, 1, app::kExportTolerance);
  ASSERT_TRUE(checks.IsOk()) << checks.GetStatus().ToString();
  EXPECT_TRUE((*checks)[0].passed) << (*checks)[0].error;
  if ((*checks)[1].ran) {
    EXPECT_TRUE((*checks)[1].passed) << (*checks)[1].error;
  }
}

TEST_F(ExportTest, ImgszTakesASideOrAHeightWidthPair) {
  EXPECT_EQ(app::ParseExportImgsz("640").Value(), (std::pair<int, int>{640, 640}));
  EXPECT_EQ(app::ParseExportImgsz("320,256").Value(), (std::pair<int, int>{320, 256}));
  EXPECT_EQ(app::ParseExportImgsz("[320, 256]").Value(), (std::pair<int, int>{320, 256}));
  for (const char* bad : {"", "abc", "1,2,3", "320,", "-32", "[320", "99999999"}) {
    Result<std::pair<int, int>> r = app::ParseExportImgsz(bad);
    ASSERT_FALSE(r.IsOk()) << bad;
    EXPECT_EQ(r.GetStatus().Where().field, "imgsz") << bad;
  }
  const std::string weights = RandomWeights(2, 23);
  testing::CliRun cli = Kestrel("--json export model=" + weights + " imgsz=64,100");
  EXPECT_EQ(cli.code, 2) << cli.out;
  EXPECT_NE(cli.out.find("imgsz"), std::string::npos) << cli.out;
  const std::string out = (dir_ / "rect.onnx").string();
  cli = Kestrel("--json export model=" + weights + " imgsz=[64,96] output=" + out);
  ASSERT_EQ(cli.code, 0) << cli.out;
  EXPECT_EQ(Json(cli)["input"]["shape"], nlohmann::json::array({1, 3, 64, 96}));
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
  cases[2].req.imgsz_w = 100;
  cases[3].key = "verify_images";
  cases[3].req.verify_images = 0;
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
  req.imgsz_h = req.imgsz_w = 64;
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
  req.imgsz_h = req.imgsz_w = 64;
  req.output = out;
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  const nlohmann::json aj = app::ExportResultJson(*r);
  testing::CliRun cli = Kestrel("--json export model=" + weights + " format=onnx imgsz=64 output=" + out);
  ASSERT_EQ(cli.code, 0) << cli.out;
  nlohmann::json want = aj;
  want["registry"] = nullptr;  // a weights file that is not registered: no record
  EXPECT_EQ(Json(cli), want);
  EXPECT_NE(Kestrel("export model=" + weights + " imgsz=64 output=" + out).out.find("not recorded"),
            std::string::npos);
}

TEST_F(ExportTest, ExportOfARegisteredModelIsListedOnTheModel) {
  const std::string weights = RandomWeights(2, 21);
  ASSERT_EQ(Kestrel("--json models register " + weights + " --name birds").code, 0);
  const std::string out = (dir_ / "birds.onnx").string();
  testing::CliRun cli = Kestrel("--json export model=birds@v1 imgsz=64,96 opset=16 output=" + out);
  ASSERT_EQ(cli.code, 0) << cli.out;
  const nlohmann::json ej = Json(cli);
  ASSERT_TRUE(ej["registry"].is_object()) << ej.dump();
  EXPECT_EQ(ej["registry"]["model"], "birds@v1");

  const nlohmann::json show = Json(Kestrel("--json models show birds@v1"));
  const nlohmann::json& exports = show["model"]["exports"];
  ASSERT_EQ(exports.size(), 1u) << show.dump();
  const nlohmann::json& e = exports[0];
  EXPECT_EQ(e["id"], ej["registry"]["export_id"]);
  EXPECT_EQ(e["path"], out);
  EXPECT_EQ(e["format"], "onnx");
  EXPECT_EQ(e["sha256"], Sha256File(out).Value());
  EXPECT_EQ(e["bytes"].get<int64_t>(), static_cast<int64_t>(fs::file_size(out)));
  EXPECT_EQ(e["options"], nlohmann::json({{"imgsz", {64, 96}},
                                          {"batch", 1},
                                          {"opset", 16},
                                          {"dynamic", false},
                                          {"half", false},
                                          {"int8", false},
                                          {"nms", false},
                                          {"simplify", true}}));
  EXPECT_TRUE(e["verified"].get<bool>());
  EXPECT_EQ(e["verification"], ej["verification"]) << "the per-runtime figures as reported";
  EXPECT_EQ(e["verification"]["runtimes"].size(), 2u);
  EXPECT_NE(Kestrel("models show birds@v1").out.find("exports:\n  onnx " + out), std::string::npos);
  // The file names the registered model it came from (no dataset: registered by hand).
  {
    const std::string bytes = Env::Default().ReadFile(out).Value();
    Result<exporter::OnnxDetectorInfo> info = exporter::ReadOnnxDetectorInfo(bytes, out);
    ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
    EXPECT_EQ(info->metadata["model"], "birds@v1");
    EXPECT_EQ(info->metadata["model_id"], show["model"]["id"].get<std::string>());
    EXPECT_EQ(info->metadata.count("dataset_version_id"), 0u);
  }

  EXPECT_EQ(ej["registry"]["created"], true);

  // The same export again writes the same bytes to the same path — what an
  // export job retried after a crash between its record and its end does:
  // the record is updated, not duplicated.
  testing::CliRun again = Kestrel("--json export model=birds@v1 imgsz=64,96 opset=16 output=" + out);
  ASSERT_EQ(again.code, 0) << again.out;
  const nlohmann::json aj = Json(again);
  EXPECT_EQ(aj["registry"]["export_id"], ej["registry"]["export_id"]);
  EXPECT_EQ(aj["registry"]["created"], false);
  const nlohmann::json after = Json(Kestrel("--json models show birds@v1"))["model"]["exports"];
  ASSERT_EQ(after.size(), 1u) << after.dump();
  EXPECT_EQ(after[0]["id"], e["id"]);
  EXPECT_EQ(after[0]["created_ms"], e["created_ms"]);
  EXPECT_EQ(after[0]["sha256"], e["sha256"]);
  EXPECT_NE(
      Kestrel("export model=birds@v1 imgsz=64,96 opset=16 output=" + out).out.find("earlier record, updated"),
      std::string::npos);
  EXPECT_EQ(Json(Kestrel("--json models show birds@v1"))["model"]["exports"].size(), 1u);

  // Another file adds a record; the first stays.
  ASSERT_EQ(Kestrel("export model=birds@v1 imgsz=64 output=" + (dir_ / "b2.onnx").string()).code, 0);
  EXPECT_EQ(Json(Kestrel("--json models show birds@v1"))["model"]["exports"].size(), 2u);
}

// The file's `names` metadata (docs/export.md "Class names"): weights that
// record none take the registered model's dataset version's names, else
// data='s, else class0, class1, ... — and the result says which. A class
// count other than the model's is refused naming the key, nothing written.
TEST_F(ExportTest, ClassNamesComeFromTheRegisteredDatasetOrDataElseTheDefault) {
  const std::string w = RandomWeights(2, 29);  // SaveWeights without names: none recorded
  auto file_names = [](const std::string& path) {
    const std::string bytes = Env::Default().ReadFile(path).Value();
    Result<exporter::OnnxDetectorInfo> info = exporter::ReadOnnxDetectorInfo(bytes, path);
    EXPECT_TRUE(info.IsOk()) << info.GetStatus().ToString();
    return info.IsOk() ? info->names : std::vector<std::string>{};
  };
  const std::string plain = (dir_ / "plain.onnx").string();
  testing::CliRun cli = Kestrel("export model=" + w + " imgsz=64 output=" + plain);
  ASSERT_EQ(cli.code, 0) << cli.out;
  EXPECT_NE(cli.out.find("class names: class0, class1 (default: the weights record no class names"),
            std::string::npos)
      << cli.out;
  EXPECT_EQ(file_names(plain), (std::vector<std::string>{"class0", "class1"}));

  const std::vector<std::string> synth = data::SynthClassNames(2);
  ASSERT_NE(synth[0], "class0");
  ASSERT_EQ(Kestrel("dataset synth two --images 6 --imgsz 64 --classes 2 --seed 1").code, 0);
  ASSERT_EQ(Kestrel("dataset import two --name two").code, 0);
  // data=: its names (and its val split runs the mAP check).
  const std::string with_data = (dir_ / "data.onnx").string();
  cli = Kestrel("--json export model=" + w + " imgsz=64 data=two output=" + with_data);
  ASSERT_EQ(cli.code, 0) << cli.out;
  nlohmann::json j = Json(cli);
  EXPECT_EQ(j["names"], nlohmann::json(synth));
  EXPECT_EQ(j["names_source"], "data");
  EXPECT_EQ(j["names_dataset"], "two@v1");
  EXPECT_EQ(file_names(with_data), synth);
  // A registered model: its dataset version's, also where no mAP check runs
  // (a non-square fixed imgsz).
  ASSERT_EQ(Kestrel("models register " + w + " data=two --name tw").code, 0);
  const std::string reg = (dir_ / "reg.onnx").string();
  cli = Kestrel("--json export model=tw@v1 imgsz=64,96 output=" + reg);
  ASSERT_EQ(cli.code, 0) << cli.out;
  j = Json(cli);
  EXPECT_EQ(j["names"], nlohmann::json(synth));
  EXPECT_EQ(j["names_source"], "model_dataset");
  EXPECT_EQ(j["names_dataset"], "two@v1");
  EXPECT_TRUE(j["verification"]["map"].is_null());
  EXPECT_EQ(file_names(reg), synth);
  // ... and its metadata names the model and the dataset version it was trained on.
  {
    const nlohmann::json model = Json(Kestrel("--json models show tw@v1"))["model"];
    Result<exporter::OnnxDetectorInfo> info =
        exporter::ReadOnnxDetectorInfo(Env::Default().ReadFile(reg).Value(), reg);
    ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
    EXPECT_EQ(info->metadata["model"], "tw@v1");
    EXPECT_EQ(info->metadata["model_id"], model["id"].get<std::string>());
    EXPECT_EQ(info->metadata["dataset"], "two");
    EXPECT_EQ(info->metadata["dataset_version_id"], model["dataset_version"].get<std::string>());
    EXPECT_EQ(info->metadata["dataset_version_id"].size(), 64u) << model.dump();
  }

  // Three classes against the model's two: data= names `data`, a registered
  // dataset version `model`; nothing is written.
  ASSERT_EQ(Kestrel("dataset synth three --images 6 --imgsz 64 --classes 3 --seed 2").code, 0);
  ASSERT_EQ(Kestrel("dataset import three --name three").code, 0);
  const std::string bad = (dir_ / "bad.onnx").string();
  cli = Kestrel("--json export model=" + w + " imgsz=64 data=three output=" + bad);
  EXPECT_EQ(cli.code, 2) << cli.out;
  EXPECT_EQ(Json(cli)["error"]["field"], "data");
  EXPECT_NE(Json(cli)["error"]["message"].get<std::string>().find("class count mismatch"), std::string::npos);
  ASSERT_EQ(Kestrel("models register " + w + " data=three --name tr").code, 0);
  cli = Kestrel("--json export model=tr@v1 imgsz=64,96 output=" + bad);
  EXPECT_EQ(cli.code, 2) << cli.out;
  EXPECT_EQ(Json(cli)["error"]["field"], "model");
  EXPECT_NE(Json(cli)["error"]["message"].get<std::string>().find("three@v1) has 3"), std::string::npos)
      << cli.out;
  EXPECT_FALSE(fs::exists(bad));
}

// The registry record of `kestrel export` and an export job
// (app::ExportAndRecord) is built from the typed ExportResult — never read
// back from its JSON view — and the views are of the same record.
TEST_F(ExportTest, RegistryRecordIsTheTypedResult) {
  const std::string weights = RandomWeights(2, 31);
  ASSERT_EQ(Kestrel("--json models register " + weights + " --name fish").code, 0);
  const std::string home = (dir_ / "home").string();
  auto meta = store::MetadataStore::Open(store::MetadataUrl(home));
  ASSERT_TRUE(meta.IsOk()) << meta.GetStatus().ToString();
  store::LocalArtifactStore blobs(home);
  app::ExportRequest req;
  req.model = "fish@v1";
  req.imgsz_h = 64;
  req.imgsz_w = 96;
  req.output = (dir_ / "fish.onnx").string();
  std::string resolved;
  Result<app::RegisteredExport> e = app::ExportAndRecord(
      Env::Default(), **meta, blobs, req,
      [&](const store::ModelRecord& m, const std::string& w) { resolved = app::ResolvedModelText(m, w); });
  ASSERT_TRUE(e.IsOk()) << e.GetStatus().ToString();
  ASSERT_TRUE(e->registered.has_value());
  ASSERT_TRUE(e->record.has_value());
  EXPECT_TRUE(e->record_created);
  EXPECT_EQ(resolved, "model fish@v1 (" + e->registered->id.substr(0, 12) + "): " + e->result.weights);
  const app::ExportResult& r = e->result;
  EXPECT_EQ(e->record->path, r.path);
  EXPECT_EQ(e->record->format, "onnx");
  EXPECT_EQ(e->record->verified, r.verified);
  EXPECT_EQ(nlohmann::json::parse(e->record->options_json), app::ExportOptionsJson(r));
  EXPECT_EQ(app::ExportOptionsJson(r)["imgsz"], nlohmann::json({64, 96}));
  EXPECT_EQ(nlohmann::json::parse(e->record->verification_json), app::ExportVerificationJson(r));
  EXPECT_EQ(e->doc["verification"], app::ExportVerificationJson(r));
  EXPECT_EQ(e->doc["registry"], app::ExportRegistryJson(*e));
  EXPECT_EQ(e->doc["registry"]["export_id"], e->record->id);

  // A plain weights file: no record, "registry" null.
  req.model = weights;
  req.output = (dir_ / "plain.onnx").string();
  Result<app::RegisteredExport> plain = app::ExportAndRecord(Env::Default(), **meta, blobs, req);
  ASSERT_TRUE(plain.IsOk()) << plain.GetStatus().ToString();
  EXPECT_FALSE(plain->record.has_value());
  EXPECT_TRUE(plain->doc["registry"].is_null());
}

// src/app is torch-free: the LibTorch reference an export is verified
// against is a backend slot. A program without it (the `kestrel` front)
// refuses the export, naming model= and the program that has it, and
// writes nothing.
TEST_F(ExportTest, ExportWithoutTheLibTorchBackendNamesTheProgramThatHasIt) {
  const std::string weights = RandomWeights(2, 41);
  const app::Backends installed = app::ProgramBackends();
  app::JobKindTable scratch = app::BuiltinJobKinds();
  app::Backends none;  // program "kestrel": no slot filled
  ASSERT_TRUE(app::InstallBackends(none, scratch).IsOk());
  app::ExportRequest req;
  req.model = weights;
  req.imgsz_h = req.imgsz_w = 64;
  req.output = (dir_ / "none.onnx").string();
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  ASSERT_TRUE(app::InstallBackends(installed, scratch).IsOk());  // the next tests have them again
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kFailedPrecondition) << r.GetStatus().ToString();
  EXPECT_EQ(r.GetStatus().Where().field, "model");
  EXPECT_NE(r.GetStatus().Message().find("kestrel-torch"), std::string::npos) << r.GetStatus().Message();
  EXPECT_FALSE(fs::exists(dir_ / "none.onnx"));
  for (const auto& f : fs::directory_iterator(dir_)) {
    EXPECT_EQ(f.path().string().find("none.onnx"), std::string::npos) << "left behind: " << f.path();
  }
}

}  // namespace
}  // namespace kestrel
