// `kestrel predict/val model=*.onnx` (backend_onnx/onnx_predict.h): the exported
// file run by OpenCV DNN through the same letterbox, NMS and scoring as the
// LibTorch model gives the same boxes (IoU >= 0.99, same classes, scores
// within 1e-3) and the same mAP (within 0.001) on the reference detector
// trained on shapes; the views have the same keys; a file that is not such a
// graph is refused naming `model`, with nothing written. The metadata
// reader's `names` parser on its own. Torch-free: the CLI does the work.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "../cli/cli_fixture.h"
#include "export/onnx_info.h"

namespace kestrel {
namespace {

namespace fs = std::filesystem;

const std::string kParity = std::string(KESTREL_SHARED_DIR) + "/reference/val_parity";

std::vector<std::string> Keys(const nlohmann::json& j) {
  std::vector<std::string> out;
  for (const auto& [k, v] : j.items()) out.push_back(k);
  return out;
}

double Iou(const nlohmann::json& a, const nlohmann::json& b) {
  const double ix = std::max(0.0, std::min(a[2].get<double>(), b[2].get<double>()) -
                                      std::max(a[0].get<double>(), b[0].get<double>()));
  const double iy = std::max(0.0, std::min(a[3].get<double>(), b[3].get<double>()) -
                                      std::max(a[1].get<double>(), b[1].get<double>()));
  const double area_a = (a[2].get<double>() - a[0].get<double>()) * (a[3].get<double>() - a[1].get<double>());
  const double area_b = (b[2].get<double>() - b[0].get<double>()) * (b[3].get<double>() - b[1].get<double>());
  const double inter = ix * iy;
  return inter / (area_a + area_b - inter);
}

class OnnxPredictTest : public testing::KestrelCliTest {
 protected:
  // The reference YOLOv8n trained on shapes (3 classes), exported at 320;
  // returns the .onnx path ("" when the export failed).
  std::string ExportReference(std::string* pt) {
    *pt = (dir_ / "shapes.pt").string();
    fs::copy_file(kParity + "/yolov8n_shapes_p.pt", *pt);
    testing::CliRun r = Kestrel("--json export model=" + *pt + " imgsz=320");
    EXPECT_EQ(r.code, 0) << r.out;
    return r.code == 0 ? (dir_ / "shapes.onnx").string() : "";
  }
};

TEST_F(OnnxPredictTest, PredictGivesLibTorchsBoxesOnNonSquareImages) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  std::string pt;
  const std::string onnx = ExportReference(&pt);
  ASSERT_FALSE(onnx.empty());
  // 480x320 images letterboxed into 320x320 (pads top and bottom); a low
  // conf so that many boxes, close scores included, are compared.
  const std::string source = kParity + "/nonsquare/images/val";
  const std::string common = " source=" + source + " conf=0.05 project=" + (dir_ / "runs").string();
  testing::CliRun a = Kestrel("--json predict model=" + pt + " imgsz=320 name=pt" + common);
  testing::CliRun b = Kestrel("--json predict model=" + onnx + " name=onnx" + common);
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  const nlohmann::json ja = Json(a), jb = Json(b);
  EXPECT_EQ(Keys(ja), Keys(jb));
  EXPECT_EQ(Keys(ja["speed"]), Keys(jb["speed"]));
  ASSERT_EQ(ja["images"].size(), jb["images"].size());
  size_t boxes = 0;
  double min_iou = 1, max_score_diff = 0;
  for (size_t i = 0; i < ja["images"].size(); ++i) {
    const nlohmann::json& ia = ja["images"][i];
    const nlohmann::json& ib = jb["images"][i];
    EXPECT_EQ(Keys(ia), Keys(ib));
    EXPECT_EQ(ia["width"], ib["width"]);
    EXPECT_EQ(ia["height"], ib["height"]);
    ASSERT_EQ(ia["detections"].size(), ib["detections"].size()) << ia["source"];
    for (size_t k = 0; k < ia["detections"].size(); ++k) {
      const nlohmann::json& da = ia["detections"][k];
      const nlohmann::json& db = ib["detections"][k];
      EXPECT_EQ(da["class_id"], db["class_id"]) << ia["source"] << " #" << k;
      EXPECT_EQ(da["name"], db["name"]);
      min_iou = std::min(min_iou, Iou(da["box_xyxy"], db["box_xyxy"]));
      max_score_diff =
          std::max(max_score_diff, std::abs(da["confidence"].get<double>() - db["confidence"].get<double>()));
      ++boxes;
    }
  }
  EXPECT_GT(boxes, 50u) << "too few boxes to compare";
  EXPECT_GE(min_iou, 0.99);
  EXPECT_LE(max_score_diff, 1e-3);
  std::cout << "onnx vs libtorch: " << boxes << " boxes, min IoU " << min_iou << ", max |score diff| "
            << max_score_diff << "\n";
  // The run folder holds what a .pt run writes.
  const fs::path run = dir_ / "runs/onnx";
  EXPECT_TRUE(fs::exists(run / "00000.jpg"));
  EXPECT_TRUE(fs::exists(run / "00000.json"));
  EXPECT_TRUE(fs::exists(run / "labels/00000.txt"));
}

TEST_F(OnnxPredictTest, ValMapMatchesLibTorch) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  std::string pt;
  const std::string onnx = ExportReference(&pt);
  ASSERT_FALSE(onnx.empty());
  const std::string data = " data=" + kParity + "/nonsquare/data.yaml project=" + (dir_ / "runs").string();
  // The file's graph has one input shape: the ONNX run letterboxes every
  // image into 320x320, which is the LibTorch run at rect=false imgsz=320.
  testing::CliRun a = Kestrel("--json val model=" + pt + " imgsz=320 rect=false name=pt" + data);
  testing::CliRun b = Kestrel("--json val model=" + onnx + " name=onnx" + data);
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  const nlohmann::json ra = Json(a)["result"], rb = Json(b)["result"];
  EXPECT_EQ(Keys(ra), Keys(rb));
  EXPECT_EQ(Keys(ra["metrics"]), Keys(rb["metrics"]));
  const double map_a = ra["metrics"]["map5095"].get<double>(), map_b = rb["metrics"]["map5095"].get<double>();
  ASSERT_GT(map_a, 0.05) << "the reference detector should find shapes";
  EXPECT_NEAR(map_a, map_b, 0.001);
  EXPECT_NEAR(ra["metrics"]["map50"].get<double>(), rb["metrics"]["map50"].get<double>(), 0.001);
  std::cout << "mAP50-95 libtorch " << map_a << ", onnx " << map_b << "\n";
  const nlohmann::json& extra = rb["provenance"]["extra"];
  EXPECT_EQ(extra["rect"], false);
  EXPECT_EQ(extra["imgsz"], 320);
  EXPECT_EQ(extra["model"], "yolov8n");
  EXPECT_EQ(extra["runtime"].get<std::string>().rfind("opencv-dnn ", 0), 0u) << extra;
}

// A dynamic export (batch, height, width) runs val's rect batches (several
// input shapes, batches of 4) and predict at the command line's imgsz, as
// LibTorch does.
TEST_F(OnnxPredictTest, DynamicExportRunsRectBatchesLikeLibTorch) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  const std::string pt = (dir_ / "shapes.pt").string();
  fs::copy_file(kParity + "/yolov8n_shapes_p.pt", pt);
  testing::CliRun ex = Kestrel("--json export model=" + pt + " imgsz=320 dynamic=true output=dyn.onnx");
  if (ex.code == 2 && Json(ex)["error"]["field"] == "dynamic") GTEST_SKIP() << "export has no dynamic=true";
  ASSERT_EQ(ex.code, 0) << ex.out;
  const std::string onnx = (dir_ / "dyn.onnx").string();
  const std::string data =
      " data=" + kParity + "/nonsquare/data.yaml imgsz=320 batch=4 project=" + (dir_ / "runs").string();
  testing::CliRun a = Kestrel("--json val model=" + pt + " name=pt" + data);
  testing::CliRun b = Kestrel("--json val model=" + onnx + " name=onnx" + data);
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  const nlohmann::json ra = Json(a)["result"], rb = Json(b)["result"];
  EXPECT_EQ(rb["provenance"]["extra"]["rect"], true);
  const double map_a = ra["metrics"]["map5095"].get<double>(), map_b = rb["metrics"]["map5095"].get<double>();
  ASSERT_GT(map_a, 0.05);
  EXPECT_NEAR(map_a, map_b, 0.001);
  std::cout << "rect batches: mAP50-95 libtorch " << map_a << ", dynamic onnx " << map_b << "\n";
  const std::string source =
      " source=" + kParity + "/nonsquare/images/val imgsz=256 conf=0.05 project=" + (dir_ / "runs").string();
  testing::CliRun pa = Kestrel("--json predict model=" + pt + " name=ppt" + source);
  testing::CliRun pb = Kestrel("--json predict model=" + onnx + " name=ponnx" + source);
  ASSERT_EQ(pa.code, 0) << pa.out;
  ASSERT_EQ(pb.code, 0) << pb.out;
  const nlohmann::json ja = Json(pa), jb = Json(pb);
  ASSERT_EQ(ja["images"].size(), jb["images"].size());
  size_t boxes = 0;
  for (size_t i = 0; i < ja["images"].size(); ++i) {
    const nlohmann::json& da = ja["images"][i]["detections"];
    const nlohmann::json& db = jb["images"][i]["detections"];
    ASSERT_EQ(da.size(), db.size()) << ja["images"][i]["source"];
    for (size_t k = 0; k < da.size(); ++k, ++boxes) {
      EXPECT_EQ(da[k]["class_id"], db[k]["class_id"]);
      EXPECT_GE(Iou(da[k]["box_xyxy"], db[k]["box_xyxy"]), 0.99);
      EXPECT_NEAR(da[k]["confidence"].get<double>(), db[k]["confidence"].get<double>(), 1e-3);
    }
  }
  EXPECT_GT(boxes, 20u);
  EXPECT_EQ(jb["speed"]["images"], ja["speed"]["images"]);
}

// half=true: FP16 weights and compute with float32 ends. OpenCV DNN 4.6
// cannot load FLOAT16 initializers, so ONNX Runtime alone verifies it (within
// kExportHalfTolerance); without ONNX Runtime nothing is written. predict
// through OpenCV DNN refuses the file naming the model.
TEST_F(OnnxPredictTest, HalfExportIsVerifiedInOnnxRuntimeOnly) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  const std::string pt = (dir_ / "shapes.pt").string();
  fs::copy_file(kParity + "/yolov8n_shapes_p.pt", pt);
  testing::CliRun ex = Kestrel("--json export model=" + pt + " imgsz=320 half=true output=half.onnx");
  const nlohmann::json j = Json(ex);
  if (ex.code != 0) {
    // Only a missing ONNX Runtime may stop it, and then nothing is written.
    EXPECT_EQ(ex.code, 1) << ex.out;
    EXPECT_NE(j["error"]["message"].get<std::string>().find("ONNX Runtime check did not run"),
              std::string::npos)
        << ex.out;
    EXPECT_FALSE(fs::exists(dir_ / "half.onnx"));
    GTEST_SKIP() << "no ONNX Runtime: the FP16 export was refused, as documented";
  }
  EXPECT_EQ(j["half"], true);
  const nlohmann::json& v = j["verification"];
  EXPECT_EQ(v["verified"], true);
  EXPECT_EQ(v["runtimes"][0]["ran"], false) << v;
  EXPECT_EQ(v["runtimes"][1]["passed"], true) << v;
  EXPECT_LE(v["max_abs_diff_scores"].get<double>(), 2e-2);
  EXPECT_LE(v["max_rel_diff_boxes"].get<double>(), 2e-2);
  EXPECT_GT(v["max_abs_diff"].get<double>(), 1e-5) << "FP16 should differ from FP32 LibTorch";
  std::cout << "FP16 in ONNX Runtime vs LibTorch: scores " << v["max_abs_diff_scores"] << ", boxes "
            << v["max_abs_diff_boxes"] << " px (" << v["max_rel_diff_boxes"] << " relative)\n";
  // With dynamic=true: verified in ONNX Runtime at batch 1 and 2, at 64x64
  // and at 32x96 (the dynamic head's CumSum anchors in FP16 are exact: whole
  // numbers up to 2048 and their halves up to 1024).
  testing::CliRun dyn =
      Kestrel("--json export model=" + pt + " imgsz=64 half=true dynamic=true output=half_dynamic.onnx");
  ASSERT_EQ(dyn.code, 0) << dyn.out;
  const nlohmann::json dj = Json(dyn);
  const nlohmann::json& dv = dj["verification"];
  EXPECT_EQ(dj["half"], true);
  EXPECT_EQ(dj["dynamic"], true);
  EXPECT_EQ(dv["verified"], true) << dv;
  EXPECT_EQ(dv["shapes"], nlohmann::json::parse("[[1,3,64,64],[1,3,32,96],[2,3,64,64],[2,3,32,96]]")) << dv;
  EXPECT_EQ(dv["runtimes"][0]["ran"], false) << dv;
  EXPECT_EQ(dv["runtimes"][1]["passed"], true) << dv;
  EXPECT_LE(dv["max_abs_diff_scores"].get<double>(), 2e-2);
  EXPECT_LE(dv["max_rel_diff_boxes"].get<double>(), 2e-2);
  std::cout << "FP16 dynamic in ONNX Runtime vs LibTorch: scores " << dv["max_abs_diff_scores"] << ", boxes "
            << dv["max_abs_diff_boxes"] << " px (" << dv["max_rel_diff_boxes"] << " relative)\n";
  // Smaller than the FP32 file: the weights are 2 bytes each.
  ASSERT_EQ(Kestrel("export model=" + pt + " imgsz=320 output=full.onnx").code, 0);
  EXPECT_LT(fs::file_size(dir_ / "half.onnx") * 10, fs::file_size(dir_ / "full.onnx") * 6);
  Write("images/a.jpg", "the model is loaded before any image is decoded");
  testing::CliRun p = Kestrel("--json predict model=half.onnx source=images project=runs");
  EXPECT_EQ(p.code, 1) << p.out;
  EXPECT_EQ(Json(p)["error"]["field"], "model") << p.out;
}

TEST_F(OnnxPredictTest, AFileThatIsNoDetectionGraphIsRefusedNamingTheModel) {
  Write("bad.onnx", "this is not a protobuf ModelProto");
  Write("images/a.jpg", "the model is loaded before any image is decoded");
  testing::CliRun r = Kestrel("--json predict model=bad.onnx source=images project=runs");
  EXPECT_EQ(r.code, 1) << r.out;
  const nlohmann::json j = Json(r);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["error"]["field"], "model") << r.out;
  EXPECT_EQ(j["error"]["file"], "bad.onnx") << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "runs")) << "nothing is written for a bad model";
  testing::CliRun missing = Kestrel("--json predict model=nope.onnx source=images project=runs");
  EXPECT_EQ(missing.code, 1) << missing.out;
  EXPECT_EQ(Json(missing)["error"]["code"], "not_found") << missing.out;
}

TEST(OnnxNames, ParsesTheExportersLiteralAndRejectsOthers) {
  auto names = exporter::ParseNamesMetadata("{0: 'cat', 1: \"dog's\", 2: 'a\\'b'}");
  ASSERT_TRUE(names.IsOk()) << names.GetStatus().ToString();
  EXPECT_EQ(*names, (std::vector<std::string>{"cat", "dog's", "a'b"}));
  auto empty = exporter::ParseNamesMetadata(" { } ");
  ASSERT_TRUE(empty.IsOk());
  EXPECT_TRUE(empty->empty());
  for (const char* bad : {"", "{1: 'a'}", "{0: 'a'", "{0: a}", "{0: 'a', 0: 'b'}", "{0: 'a'} x", "[0: 'a']",
                          "{0: 'a}", "{99999999999: 'a'}"}) {
    auto r = exporter::ParseNamesMetadata(bad);
    EXPECT_FALSE(r.IsOk()) << bad;
    if (!r.IsOk()) {
      EXPECT_EQ(r.GetStatus().Where().field, "names") << bad;
    }
  }
}

}  // namespace
}  // namespace kestrel
