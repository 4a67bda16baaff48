// Black-box tests of `kestrel val` / `kestrel predict`: the coco128 reference
// numbers through the whole path (import -> manifest -> val predictions=),
// exit codes, JSON, files written, and "bad input writes nothing".
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_fixture.h"

namespace {

namespace fs = std::filesystem;

const std::string kShared = KESTREL_SHARED_DIR;

using kestrel::testing::CliRun;
class EvalCliTest : public kestrel::testing::KestrelCliTest {};

TEST_F(EvalCliTest, Coco128ReferencePredictionsMatchTheReferenceValidator) {
  const std::string data = kShared + "/datasets/coco128";
  const std::string preds = kShared + "/reference/metrics_coco128/predictions";
  if (!fs::exists(data + "/data.yaml") || !fs::is_directory(preds)) GTEST_SKIP() << "no ../shared";
  CliRun imp = Kestrel("--json dataset import " + data + " --name coco128");
  ASSERT_EQ(imp.code, 0) << imp.out;
  // The registry keeps data.yaml's splits: 102 train, 26 val.
  auto show = Json(Kestrel("--json dataset show coco128"));
  ASSERT_EQ(show["summary"]["splits"]["val"]["images"].get<int>(), 26) << show.dump();

  CliRun v = Kestrel("--json val predictions=" + preds + " data=coco128 split=val");
  ASSERT_EQ(v.code, 0) << v.out;
  auto j = Json(v);
  const auto& m = j["result"]["metrics"];
  EXPECT_NEAR(m["map50"].get<double>(), 0.85535, 1e-4);
  EXPECT_NEAR(m["map5095"].get<double>(), 0.67926, 1e-4);
  EXPECT_NEAR(m["precision"].get<double>(), 0.83034, 1e-4);
  EXPECT_NEAR(m["recall"].get<double>(), 0.81085, 1e-4);
  EXPECT_EQ(j["result"]["provenance"]["dataset"], "coco128");
  EXPECT_EQ(j["result"]["provenance"]["split"], "val");
  EXPECT_EQ(j["result"]["provenance"]["extra"]["format"], "yolo_txt");
  EXPECT_EQ(j["result"]["provenance"]["version_id"], show["version"]["version_id"]);
  EXPECT_DOUBLE_EQ(j["result"]["settings"]["conf"].get<double>(), 0.001);
  EXPECT_TRUE(fs::exists(j["record_path"].get<std::string>()));
  const fs::path run = dir_ / j["dir"].get<std::string>();
  EXPECT_EQ(j["dir"], "runs/detect/val");
  for (const char* f : {"PR_curve.png", "F1_curve.png", "confusion_matrix_normalized.png", "result.json",
                        "val_batch0_labels.jpg", "val_batch0_pred.jpg"}) {
    EXPECT_TRUE(fs::exists(run / f)) << f;
  }

  // Human output: the table and the same numbers at 3 decimals; second run -> val2.
  CliRun t = Kestrel("val predictions=" + preds + " data=coco128");
  ASSERT_EQ(t.code, 0);
  EXPECT_NE(t.out.find("mAP50-95"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("0.855"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("0.679"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("best F1"), std::string::npos);
  EXPECT_NE(t.out.find("duplicate"), std::string::npos);
  EXPECT_NE(t.out.find("runs/detect/val2"), std::string::npos);

  // save_json on real data: coco128's numeric stems are COCO's own image ids,
  // and the exported file re-scores to the reference numbers exactly.
  CliRun s =
      Kestrel("--json val predictions=" + preds + " data=coco128 save_json=true coco_metrics=true name=rt");
  ASSERT_EQ(s.code, 0) << s.out;
  auto sj = Json(s);
  EXPECT_EQ(sj["result"]["predictions_json"]["image_ids"], "stem");
  EXPECT_GT(sj["result"]["coco"]["AP50"].get<double>(), 0.5);
  CliRun back =
      Kestrel("--json val predictions=runs/detect/rt/predictions.json data=coco128 coco_metrics=true");
  ASSERT_EQ(back.code, 0) << back.out;
  auto bj = Json(back);
  for (const char* k : {"map50", "map5095", "precision", "recall"}) {
    EXPECT_EQ(bj["result"]["metrics"][k].get<double>(), m[k].get<double>()) << k;
  }
  EXPECT_EQ(bj["result"]["coco"], sj["result"]["coco"]);
}

TEST_F(EvalCliTest, BadInputIsAClearErrorAndWritesNothing) {
  ASSERT_EQ(Kestrel("dataset synth data --images 8 --imgsz 64 --seed 1").code, 0);
  ASSERT_EQ(Kestrel("dataset import data --name shapes").code, 0);
  // Usage errors: exit 2.
  EXPECT_EQ(Kestrel("val data=shapes").code, 2);
  EXPECT_EQ(Kestrel("val predictions=p").code, 2);
  EXPECT_EQ(Kestrel("val predictions=p data=shapes conf=2").code, 2);
  EXPECT_EQ(Kestrel("val predictions=p data=shapes bogus=1").code, 2);
  // Missing predictions: exit 1, error names the path.
  CliRun miss = Kestrel("--json val predictions=nope data=shapes");
  EXPECT_EQ(miss.code, 1);
  EXPECT_EQ(Json(miss)["error"]["file"], "nope");
  // NaN coordinate: file, line and field.
  auto stems = fs::directory_iterator(dir_ / "data/images/val");
  const std::string stem = fs::path(stems->path()).stem().string();
  Write("p/" + stem + ".txt", "0 0.5 0.5 0.1 0.1 0.9\n0 nan 0.5 0.1 0.1 0.9\n");
  CliRun nan = Kestrel("--json val predictions=p data=shapes");
  EXPECT_EQ(nan.code, 1);
  auto nj = Json(nan);
  EXPECT_EQ(nj["error"]["line"].get<int>(), 2);
  EXPECT_EQ(nj["error"]["field"], "cx");
  // Class out of range (synth has 3 classes).
  Write("q/" + stem + ".txt", "7 0.5 0.5 0.1 0.1 0.9\n");
  CliRun cls = Kestrel("--json val predictions=q data=shapes");
  EXPECT_EQ(cls.code, 1);
  EXPECT_EQ(Json(cls)["error"]["field"], "class");
  // Empty split, unknown dataset.
  EXPECT_EQ(Kestrel("val predictions=p data=shapes split=test").code, 1);
  EXPECT_EQ(Kestrel("val predictions=p data=nosuch").code, 1);
  EXPECT_FALSE(fs::exists(dir_ / "runs")) << "a failed val wrote a run folder";
}

#ifdef KESTREL_CLI_WITH_TORCH
const std::string kRefWeights = kShared + "/reference/yolov8n_nc3_weights.safetensors";

TEST_F(EvalCliTest, ValModelAndPredictWithReferenceWeights) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  ASSERT_EQ(Kestrel("dataset synth data --images 6 --imgsz 64 --classes 3 --seed 2").code, 0);
  ASSERT_EQ(Kestrel("dataset import data --name shapes").code, 0);
  CliRun v = Kestrel("--json val model=" + kRefWeights + " data=shapes imgsz=64 batch=2");
  ASSERT_EQ(v.code, 0) << v.out;
  auto j = Json(v);
  EXPECT_EQ(j["result"]["provenance"]["source_kind"], "model");
  EXPECT_EQ(j["result"]["provenance"]["extra"]["model"], "yolov8n");
  EXPECT_TRUE(j["result"]["speed"].contains("inference_ms"));
  EXPECT_GE(j["result"]["metrics"]["map50"].get<double>(), 0.0);

  CliRun p = Kestrel("--json predict model=" + kRefWeights + " source=data/images/val imgsz=64 conf=0.01");
  ASSERT_EQ(p.code, 0) << p.out;
  auto pj = Json(p);
  EXPECT_EQ(pj["dir"], "runs/detect/predict");
  for (const char* k : {"preprocess_ms", "inference_ms", "postprocess_ms", "fps"}) {
    EXPECT_TRUE(pj["speed"].contains(k)) << k;
  }
  ASSERT_FALSE(pj["images"].empty());
  const std::string stem = fs::path(pj["images"][0]["source"].get<std::string>()).stem().string();
  EXPECT_TRUE(fs::exists(dir_ / "runs/detect/predict" / (stem + ".jpg")));
  // A YOLO txt only for an image with detections (the reference's save_txt).
  EXPECT_EQ(fs::exists(dir_ / "runs/detect/predict/labels" / (stem + ".txt")),
            !pj["images"][0]["detections"].empty());
  EXPECT_TRUE(fs::exists(dir_ / "runs/detect/predict" / (stem + ".json")));
}

TEST_F(EvalCliTest, ModelErrorsWriteNothing) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  ASSERT_EQ(Kestrel("dataset synth data --images 4 --imgsz 64 --classes 2 --seed 3").code, 0);
  ASSERT_EQ(Kestrel("dataset import data --name two").code, 0);
  CliRun mm = Kestrel("--json val model=" + kRefWeights + " data=two imgsz=64");
  EXPECT_EQ(mm.code, 1);
  EXPECT_NE(Json(mm)["error"]["message"].get<std::string>().find("class count mismatch"), std::string::npos);
  CliRun missing = Kestrel("--json predict model=nope.safetensors source=data/images/val");
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(Json(missing)["error"]["file"], "nope.safetensors");
  EXPECT_EQ(Kestrel("predict model=" + kRefWeights + " source=data/images/val imgsz=50").code, 2);
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}
// A copy of the reference weights with the class-logit biases shifted: a
// different model of the same architecture, made without LibTorch.
void WriteShiftedWeights(const std::string& from, const fs::path& to) {
  std::ifstream in(from, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  int shifted = 0;
  for (const auto& [name, t] : header.items()) {
    if (name == "__metadata__" || t["dtype"] != "F32" || name.find("cv3") == std::string::npos ||
        name.find("bias") == std::string::npos) {
      continue;
    }
    const size_t begin = 8 + n + t["data_offsets"][0].get<size_t>();
    const size_t end = 8 + n + t["data_offsets"][1].get<size_t>();
    for (size_t off = begin; off + 4 <= end; off += 4) {
      float v;
      std::memcpy(&v, bytes.data() + off, 4);
      v += 2.5f;
      std::memcpy(bytes.data() + off, &v, 4);
    }
    ++shifted;
  }
  ASSERT_GT(shifted, 0);
  std::ofstream(to, std::ios::binary) << bytes;
}

TEST_F(EvalCliTest, CompareTwoModelsMatchesTheirValRuns) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  ASSERT_EQ(Kestrel("dataset synth data --images 8 --imgsz 64 --classes 3 --seed 4").code, 0);
  ASSERT_EQ(Kestrel("dataset import data --name shapes").code, 0);
  WriteShiftedWeights(kRefWeights, dir_ / "b.safetensors");
  const std::string opts = " data=shapes imgsz=64 batch=4";
  auto va = Json(Kestrel("--json val model=" + kRefWeights + opts));
  auto vb = Json(Kestrel("--json val model=b.safetensors" + opts));
  CliRun c = Kestrel("--json compare " + kRefWeights + " b.safetensors" + opts);
  ASSERT_EQ(c.code, 0) << c.out;
  auto cj = Json(c);
  EXPECT_EQ(cj["dir"], "runs/compare/compare");
  const fs::path run = dir_ / "runs/compare/compare";
  std::ifstream html_in(run / "compare.html");
  std::stringstream html;
  html << html_in.rdbuf();
  EXPECT_NE(html.str().find("data:image/png;base64,"), std::string::npos);
  EXPECT_EQ(html.str().find("src=\"http"), std::string::npos);
  size_t pos = 0;
  while ((pos = html.str().find("src=\"", pos)) != std::string::npos) {
    EXPECT_EQ(html.str().compare(pos, 27, "src=\"data:image/png;base64,"), 0) << "external src at " << pos;
    ++pos;
  }
  for (const char* f : {"PR_curve_compare.png", "confusion_matrix_A.png", "confusion_matrix_B.png"}) {
    EXPECT_TRUE(fs::exists(run / f)) << f;
  }
  std::ifstream json_in(run / "compare.json");
  const auto report = nlohmann::json::parse(json_in);
  EXPECT_EQ(report, cj["report"]);
  const auto& ca = va["result"]["metrics"]["classes"];
  const auto& cb = vb["result"]["metrics"]["classes"];
  const auto& deltas = report["delta"]["classes"];
  ASSERT_EQ(deltas.size(), ca.size());
  ASSERT_EQ(ca.size(), cb.size());
  for (size_t i = 0; i < ca.size(); ++i) {
    EXPECT_EQ(deltas[i]["class_id"], ca[i]["class_id"]);
    for (const char* k : {"precision", "recall", "map50", "map5095"}) {
      EXPECT_NEAR(deltas[i][k]["delta"].get<double>(), cb[i][k].get<double>() - ca[i][k].get<double>(), 1e-9)
          << k;
    }
  }
  EXPECT_NEAR(report["delta"]["overall"]["map50"]["delta"].get<double>(),
              vb["result"]["metrics"]["map50"].get<double>() - va["result"]["metrics"]["map50"].get<double>(),
              1e-9);

  // The same model twice: every delta 0, no differing images; numbered run folder.
  CliRun same = Kestrel("--json compare " + kRefWeights + " " + kRefWeights + opts);
  ASSERT_EQ(same.code, 0) << same.out;
  auto sj = Json(same);
  EXPECT_EQ(sj["dir"], "runs/compare/compare2");
  for (const auto& cls : sj["report"]["delta"]["classes"]) {
    for (const char* k : {"precision", "recall", "map50", "map5095", "f1"})
      EXPECT_EQ(cls[k]["delta"].get<double>(), 0.0);
  }
  EXPECT_TRUE(sj["report"]["differing_images"]["a_right_b_wrong"].empty());
  EXPECT_TRUE(sj["report"]["differing_images"]["b_right_a_wrong"].empty());
}

TEST_F(EvalCliTest, CompareClassCountMismatchWritesNothing) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  ASSERT_EQ(Kestrel("dataset synth data --images 4 --imgsz 64 --classes 2 --seed 5").code, 0);
  ASSERT_EQ(Kestrel("dataset import data --name two").code, 0);
  CliRun mm = Kestrel("--json compare " + kRefWeights + " " + kRefWeights + " data=two imgsz=64");
  EXPECT_EQ(mm.code, 1);
  auto j = Json(mm);
  EXPECT_EQ(j["error"]["field"], "nc");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("class count mismatch"), std::string::npos);
  EXPECT_EQ(Kestrel("compare " + kRefWeights + " data=two").code, 2);
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}
#endif

}  // namespace
