// `kestrel export nms=true` (exporter::OnnxExportOptions::nms, app/export.h
// VerifyOnnxNms): NonMaxSuppression appended to the graph; the file's
// detections, run in ONNX Runtime, are Kestrel's own post-processing
// (eval::PostprocessYolo, predict's options) of LibTorch's raw output: the
// same count per image, same classes, IoU >= 0.99, |score diff| <= 1e-4 — on
// the reference detector trained on shapes, fixed and dynamic, batch 2. The
// check fails when the file's thresholds are not the ones compared with; bad
// conf / iou / max_det values are errors naming the key; predict refuses an
// nms=true file naming nms=true; without ONNX Runtime nothing is written.
// Torch-free TU: the LibTorch backend runs LibTorch.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "../cli/cli_fixture.h"
#include "app/export.h"
#include "app/export_keys.h"
#include "app/onnx_runtime.h"
#include "core/env.h"
#include "export/onnx_info.h"

namespace kestrel {
namespace {

namespace fs = std::filesystem;

const std::string kParity = std::string(KESTREL_SHARED_DIR) + "/reference/val_parity";

class NmsExportTest : public testing::KestrelCliTest {
 protected:
  bool HaveOrt() const { return app::LocateOnnxRuntime().unavailable.empty(); }

  app::ExportRequest Request(const std::string& name) const {
    app::ExportRequest req;
    req.model = kParity + "/yolov8n_shapes_p.safetensors";
    req.imgsz_h = req.imgsz_w = 320;
    req.batch = 2;
    req.nms = true;
    // Low enough that the synthetic verification images give detections to match.
    req.conf = 0.01;
    req.verify_images = 4;
    req.output = (dir_ / name).string();
    return req;
  }

  // The NMS check passed with detections to compare; prints the figures.
  static void ExpectNmsMatched(const app::ExportResult& r, const std::string& what) {
    const app::NmsCheck& c = r.nms_check;
    EXPECT_TRUE(r.verified) << r.verification_error;
    EXPECT_TRUE(c.ran) << c.error;
    EXPECT_TRUE(c.passed) << c.error;
    EXPECT_EQ(c.reference, "libtorch");
    EXPECT_GT(c.reference_boxes, 0) << "no detections to compare: lower conf";
    EXPECT_EQ(c.file_boxes, c.reference_boxes);
    EXPECT_EQ(c.matched, c.reference_boxes);
    EXPECT_GE(c.min_iou, app::kExportNmsMinIou);
    EXPECT_LE(c.max_score_diff, app::kExportNmsScoreTolerance);
    // The raw graph (no NMS tail) passed in OpenCV DNN and ONNX Runtime.
    ASSERT_EQ(r.checks.size(), 2u);
    EXPECT_TRUE(r.checks[0].passed) << r.checks[0].error;
    EXPECT_TRUE(r.checks[1].passed) << r.checks[1].error;
    std::cout << what << ": " << c.matched << " of " << c.reference_boxes << " detections matched on "
              << c.images << " images, min IoU " << c.min_iou << " (deficit " << 1 - c.min_iou
              << "), max |score diff| " << c.max_score_diff << "; raw: OpenCV " << r.checks[0].max_abs_diff
              << ", ORT " << r.checks[1].max_abs_diff << "\n";
  }
};

TEST_F(NmsExportTest, FixedBatch2MatchesEvalNmsOfLibTorch) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  if (!HaveOrt()) GTEST_SKIP() << "no ONNX Runtime (scripts/install-node-deps.sh)";
  const app::ExportRequest req = Request("fixed.onnx");
  const auto start = std::chrono::steady_clock::now();
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(r->nms);
  EXPECT_EQ(r->output_shape, (std::vector<int64_t>{2, 300, 6}));
  EXPECT_EQ(r->nms_check.images, 4);
  ExpectNmsMatched(*r, "fixed 320 batch 2 conf 0.01");
  std::cout << "export time (build, raw checks, NMS check): " << seconds << " s\n";
  EXPECT_TRUE(fs::exists(req.output));
  EXPECT_FALSE(fs::exists(req.output + ".verifying.onnx"));
  EXPECT_FALSE(fs::exists(req.output + ".verifying.raw.onnx"));

  // The file's metadata carries the thresholds; the layout reader (predict,
  // val) reads its final-detections layout.
  const std::string bytes = Env::Default().ReadFile(req.output).Value();
  for (const char* key : {"nms", "conf", "iou", "max_det", "NonMaxSuppression"}) {
    EXPECT_NE(bytes.find(key), std::string::npos) << key;
  }
  Result<exporter::OnnxDetectorInfo> info = exporter::ReadOnnxDetectorInfo(bytes, req.output);
  ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  EXPECT_TRUE(info->nms);
  EXPECT_EQ(info->max_det, 300);
  EXPECT_EQ(info->batch, 2);
  EXPECT_EQ(info->nc, 3);
  EXPECT_EQ(info->names.size(), 3u);

  const nlohmann::json j = app::ExportResultJson(*r);
  EXPECT_EQ(j["nms"], true);
  EXPECT_EQ(j["output"]["shape"], nlohmann::json::array({2, 300, 6}));
  EXPECT_EQ(j["verification"]["nms"]["passed"], true);
  EXPECT_EQ(j["verification"]["nms"]["max_det"], 300);
  EXPECT_EQ(j["verification"]["nms"]["matched"], r->nms_check.reference_boxes);

  // The check can fail: the same file compared at other thresholds.
  const std::vector<std::vector<int64_t>> shapes{{2, 3, 320, 320}};
  Result<app::NmsCheck> other =
      app::VerifyOnnxNms(req.output, req.model, "", shapes, 4, 0.2, req.iou, req.max_det, false);
  ASSERT_TRUE(other.IsOk()) << other.GetStatus().ToString();
  EXPECT_TRUE(other->ran);
  EXPECT_FALSE(other->passed);
  EXPECT_NE(other->error.find("detections"), std::string::npos) << other->error;
  Result<app::NmsCheck> fewer =
      app::VerifyOnnxNms(req.output, req.model, "", shapes, 4, req.conf, req.iou, 5, false);
  ASSERT_TRUE(fewer.IsOk());
  EXPECT_FALSE(fewer->passed);
  EXPECT_NE(fewer->error.find("shape"), std::string::npos) << fewer->error;
}

TEST_F(NmsExportTest, DynamicExportMatchesAtTwoSizesAndTwoBatchSizes) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  if (!HaveOrt()) GTEST_SKIP() << "no ONNX Runtime (scripts/install-node-deps.sh)";
  app::ExportRequest req = Request("dynamic.onnx");
  req.dynamic = true;
  req.imgsz_h = 256;
  req.imgsz_w = 320;
  req.max_det = 50;
  req.iou = 0.5;
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->output_shape, (std::vector<int64_t>{-1, 50, 6}));
  EXPECT_EQ(r->verify_shapes.size(), 4u);  // batch 2 and 3 at 256x320 and 224x352
  EXPECT_EQ(r->nms_check.images, 4 + 4 + 6 + 6);
  ExpectNmsMatched(*r, "dynamic 256x320 batch 2/3 iou 0.5 max_det 50");
}

TEST_F(NmsExportTest, HalfExportMatchesEvalNmsOfItsOwnRawOutput) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  if (!HaveOrt()) GTEST_SKIP() << "no ONNX Runtime (scripts/install-node-deps.sh)";
  app::ExportRequest req = Request("half.onnx");
  req.half = true;
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  const app::NmsCheck& c = r->nms_check;
  EXPECT_TRUE(r->verified) << r->verification_error;
  EXPECT_TRUE(c.passed) << c.error;
  EXPECT_EQ(c.reference, "onnxruntime raw0 (FP16)");
  EXPECT_GT(c.reference_boxes, 0);
  EXPECT_EQ(c.matched, c.reference_boxes);
  EXPECT_FALSE(r->checks[0].ran);  // OpenCV DNN cannot load FLOAT16
  std::cout << "half 320 batch 2: " << c.matched << " of " << c.reference_boxes << " matched, min IoU "
            << c.min_iou << ", max |score diff| " << c.max_score_diff << "\n";
}

TEST_F(NmsExportTest, WithoutOnnxRuntimeNothingIsWritten) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  const app::ExportRequest req = Request("no_ort.onnx");
  const char* old = std::getenv("KESTREL_NODE");
  const std::string saved = old == nullptr ? "" : old;
  ::setenv("KESTREL_NODE", (dir_ / "no-such-node").c_str(), 1);
  Result<app::ExportResult> r = app::ExportModel(Env::Default(), req);
  if (old == nullptr) {
    ::unsetenv("KESTREL_NODE");
  } else {
    ::setenv("KESTREL_NODE", saved.c_str(), 1);
  }
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().Message().find("nms=true is verified in ONNX Runtime only"), std::string::npos)
      << r.GetStatus().ToString();
  EXPECT_FALSE(fs::exists(req.output));
  EXPECT_FALSE(fs::exists(req.output + ".verifying.onnx"));
  EXPECT_FALSE(fs::exists(req.output + ".verifying.raw.onnx"));
}

TEST_F(NmsExportTest, BadThresholdsNameTheirKey) {
  struct Case {
    double conf, iou;
    int max_det;
    bool int8;
    const char* key;
  };
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const Case& c : {Case{1.0, 0.7, 300, false, "conf"}, Case{-0.01, 0.7, 300, false, "conf"},
                        Case{nan, 0.7, 300, false, "conf"}, Case{0.25, 1.01, 300, false, "iou"},
                        Case{0.25, nan, 300, false, "iou"}, Case{0.25, -1, 300, false, "iou"},
                        Case{0.25, 0.7, 0, false, "max_det"}, Case{0.25, 0.7, 10001, false, "max_det"},
                        Case{0.25, 0.7, 300, true, "nms"}}) {
    app::ExportRequest req;
    req.model = "m.safetensors";
    req.nms = true;
    req.conf = c.conf;
    req.iou = c.iou;
    req.max_det = c.max_det;
    req.int8 = c.int8;
    req.data = "d";
    const Status s = app::ValidateExportRequest(req);
    EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << c.key;
    EXPECT_EQ(s.Where().field, c.key) << s.ToString();
  }
  // The CLI: exit 2, the key in the JSON error, nothing written.
  if (!fs::exists(kParity)) return;
  for (const auto& bad : {std::pair<std::string, std::string>{"conf=1.5", "conf"},
                          {"iou=2", "iou"},
                          {"max_det=0", "max_det"}}) {
    testing::CliRun cli = Kestrel("--json export model=" + kParity +
                                  "/yolov8n_shapes_p.safetensors nms=true " + bad.first + " output=bad.onnx");
    EXPECT_EQ(cli.code, 2) << cli.out;
    EXPECT_EQ(Json(cli)["error"]["field"], bad.second) << cli.out;
    EXPECT_FALSE(fs::exists(dir_ / "bad.onnx"));
  }
}

// predict/val of an nms=true file: OpenCV DNN 4.6 cannot import
// NonMaxSuppression, so it is refused naming the model and runtime=; with
// runtime=onnxruntime the file's own detections (its conf 0.25, iou 0.7,
// best class per anchor, per-class NMS) are mapped back through the
// letterbox: the raw file's predict at the same thresholds gives the same
// boxes.
TEST_F(NmsExportTest, PredictRunsAnNmsFileInOnnxRuntimeLikeTheRawFile) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  if (!HaveOrt()) GTEST_SKIP() << "no ONNX Runtime (scripts/install-node-deps.sh)";
  const std::string pt = (dir_ / "shapes.pt").string();
  fs::copy_file(kParity + "/yolov8n_shapes_p.pt", pt);
  testing::CliRun ex = Kestrel("--json export model=" + pt + " imgsz=320 nms=true output=nms.onnx");
  ASSERT_EQ(ex.code, 0) << ex.out;
  const nlohmann::json j = Json(ex);
  EXPECT_EQ(j["nms"], true);
  EXPECT_EQ(j["verification"]["verified"], true);
  EXPECT_EQ(j["verification"]["nms"]["conf"], 0.25);
  EXPECT_EQ(j["verification"]["nms"]["iou"], 0.7);
  ASSERT_EQ(Kestrel("export model=" + pt + " imgsz=320 output=raw.onnx").code, 0);
  const std::string source = " source=" + kParity + "/nonsquare/images/val project=runs";
  testing::CliRun p = Kestrel("--json predict model=nms.onnx name=cv" + source);
  EXPECT_EQ(p.code, 1) << p.out;
  const nlohmann::json e = Json(p)["error"];
  EXPECT_EQ(e["field"], "model") << p.out;
  EXPECT_NE(e.dump().find("runtime=onnxruntime"), std::string::npos) << p.out;
  EXPECT_FALSE(fs::exists(dir_ / "runs"));

  testing::CliRun a = Kestrel("--json predict model=raw.onnx conf=0.25 iou=0.7 name=raw" + source);
  testing::CliRun b =
      Kestrel("--json predict model=nms.onnx runtime=onnxruntime conf=0.25 name=nms" + source);
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  const nlohmann::json ia = Json(a)["images"], ib = Json(b)["images"];
  ASSERT_EQ(ia.size(), ib.size());
  size_t boxes = 0;
  for (size_t i = 0; i < ia.size(); ++i) {
    EXPECT_EQ(ia[i]["width"], ib[i]["width"]);
    ASSERT_EQ(ia[i]["detections"].size(), ib[i]["detections"].size()) << ia[i]["source"];
    for (size_t k = 0; k < ia[i]["detections"].size(); ++k, ++boxes) {
      const auto& da = ia[i]["detections"][k];
      const auto& db = ib[i]["detections"][k];
      EXPECT_EQ(da["class_id"], db["class_id"]) << ia[i]["source"] << " #" << k;
      EXPECT_EQ(da["name"], db["name"]);
      for (int c = 0; c < 4; ++c) {
        EXPECT_NEAR(da["box_xyxy"][c].get<double>(), db["box_xyxy"][c].get<double>(), 0.05);
      }
      EXPECT_NEAR(da["confidence"].get<double>(), db["confidence"].get<double>(), 1e-4);
    }
  }
  EXPECT_GT(boxes, 10u);
  std::cout << "nms=true file in ONNX Runtime: " << boxes << " boxes, as the raw file's predict\n";
  // A higher conf= filters the file's detections further.
  testing::CliRun c =
      Kestrel("--json predict model=nms.onnx runtime=onnxruntime conf=0.6 name=nms6" + source);
  ASSERT_EQ(c.code, 0) << c.out;
  size_t high = 0;
  for (const auto& im : Json(c)["images"]) {
    for (const auto& d : im["detections"]) {
      EXPECT_GE(d["confidence"].get<double>(), 0.6);
      ++high;
    }
  }
  EXPECT_LT(high, boxes);
}

}  // namespace
}  // namespace kestrel
