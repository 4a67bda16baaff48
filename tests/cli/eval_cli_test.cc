// Black-box tests of `kestrel val` / `kestrel predict`: the coco128 reference
// numbers through the whole path (import -> manifest -> val predictions=),
// exit codes, JSON, files written, and "bad input writes nothing".
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

const std::string kShared = KESTREL_SHARED_DIR;

struct CliRun {
  int code = -1;
  std::string out;  // stdout only
};

class EvalCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_evalcli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  CliRun Kestrel(const std::string& args) {
    std::string cmd = "cd '" + dir_.string() + "' && KESTREL_HOME='" + (dir_ / "home").string() + "' " +
                      KESTREL_CLI + " " + args + " 2>/dev/null";
    CliRun r;
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return r;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    int st = pclose(p);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
  }
  nlohmann::json Json(const CliRun& r) {
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "stdout is not exactly one JSON document:\n" << r.out;
    return j;
  }
  void Write(const std::string& rel, const std::string& text) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel) << text;
  }
  fs::path dir_;
};

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
  EXPECT_EQ(j["dir"], "runs/val/val");
  for (const char* f : {"PR_curve.png", "F1_curve.png", "confusion_matrix_normalized.png", "result.json"}) {
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
  EXPECT_NE(t.out.find("runs/val/val2"), std::string::npos);
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
  EXPECT_EQ(pj["dir"], "runs/predict/predict");
  for (const char* k : {"preprocess_ms", "inference_ms", "postprocess_ms", "fps"}) {
    EXPECT_TRUE(pj["speed"].contains(k)) << k;
  }
  ASSERT_FALSE(pj["images"].empty());
  const std::string stem = fs::path(pj["images"][0]["source"].get<std::string>()).stem().string();
  EXPECT_TRUE(fs::exists(dir_ / "runs/predict/predict" / (stem + ".jpg")));
  EXPECT_TRUE(fs::exists(dir_ / "runs/predict/predict/labels" / (stem + ".txt")));
  EXPECT_TRUE(fs::exists(dir_ / "runs/predict/predict" / (stem + ".json")));
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
#endif

}  // namespace
