// app/backends.h: LoadDetector's dispatch by file type over the slots a
// program fills, the errors of a program without a backend (naming the
// program that has it and the field), CheckDevice, and InstallBackends
// setting the runners in the job-kind table. Fake loaders, no model: milliseconds.
#include "app/backends.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "app/job_kinds.h"

namespace kestrel::app {
namespace {

// A detector that only says which slot made it.
class NamedDetector final : public Detector {
 public:
  explicit NamedDetector(std::string arch) : arch_(std::move(arch)) {}
  int NumClasses() const override { return 0; }
  const std::vector<std::string>& Names() const override { return names_; }
  std::string Arch() const override { return arch_; }
  const eval::InferenceOptions& Options() const override { return options_; }
  Result<std::vector<eval::ImagePrediction>> Predict(const std::vector<eval::ImageView>&) override {
    return std::vector<eval::ImagePrediction>{};
  }
  Result<std::vector<eval::ImagePrediction>> PredictVal(
      const std::vector<eval::ImageSize>&, const eval::ValShapeOptions&,
      const std::function<Result<eval::ImageView>(size_t)>&) override {
    return std::vector<eval::ImagePrediction>{};
  }
  eval::StageTimes Timing() const override { return {}; }

 private:
  std::string arch_;
  std::vector<std::string> names_;
  eval::InferenceOptions options_;
};

DetectorLoader Named(const std::string& arch, std::vector<std::string>* calls) {
  return [arch, calls](const std::string& weights, const eval::InferenceOptions&,
                       const DetectorPlacement& where) -> Result<std::unique_ptr<Detector>> {
    calls->push_back(arch + " " + weights + " " + where.device + " " + where.runtime);
    return std::unique_ptr<Detector>(std::make_unique<NamedDetector>(arch));
  };
}

class BackendsTest : public testing::Test {
 protected:
  void Install(Backends b) {
    table_ = BuiltinJobKinds();
    const Status s = InstallBackends(std::move(b), table_);
    ASSERT_TRUE(s.IsOk()) << s.ToString();
  }
  void TearDown() override {
    JobKindTable scratch = BuiltinJobKinds();
    (void)InstallBackends(Backends{}, scratch);  // the next test starts without backends
  }
  JobKindTable table_;
  std::vector<std::string> calls_;
};

TEST_F(BackendsTest, LoadDetectorChoosesTheSlotByFileType) {
  Backends b;
  b.program = "kestrel-torch";
  b.torch_detector = Named("torch", &calls_);
  b.onnx_detector = Named("onnx", &calls_);
  Install(std::move(b));
  const eval::InferenceOptions options;
  auto onnx = LoadDetector("m/best.ONNX", options, {"cpu", "onnxruntime"});
  ASSERT_TRUE(onnx.IsOk()) << onnx.GetStatus().ToString();
  EXPECT_EQ((*onnx)->Arch(), "onnx");
  auto torch = LoadDetector("m/best.safetensors", options, {"cuda:1", "opencv"});
  ASSERT_TRUE(torch.IsOk()) << torch.GetStatus().ToString();
  EXPECT_EQ((*torch)->Arch(), "torch");
  EXPECT_EQ(calls_, (std::vector<std::string>{"onnx m/best.ONNX cpu onnxruntime",
                                              "torch m/best.safetensors cuda:1 opencv"}));
}

TEST_F(BackendsTest, RuntimeIsCheckedBeforeAnyBackendLoads) {
  Backends b;
  b.torch_detector = Named("torch", &calls_);
  b.onnx_detector = Named("onnx", &calls_);
  Install(std::move(b));
  auto bad = LoadDetector("best.onnx", {}, {"cpu", "tensorrt"});
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.GetStatus().Where().field, "runtime");
  // onnxruntime selects how an ONNX file runs; LibTorch weights refuse it.
  auto torch_ort = LoadDetector("best.pt", {}, {"cpu", "onnxruntime"});
  ASSERT_FALSE(torch_ort.IsOk());
  EXPECT_EQ(torch_ort.GetStatus().Where().field, "runtime");
  EXPECT_TRUE(calls_.empty());
}

TEST_F(BackendsTest, AProgramWithoutLibTorchNamesTheProgramThatRunsTheWeights) {
  Backends b;
  b.program = "kestrel-deploy";
  b.onnx_detector = Named("onnx", &calls_);
  Install(std::move(b));
  auto r = LoadDetector("runs/best.safetensors", {}, {});
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.GetStatus().Where().field, "model");
  const std::string msg = r.GetStatus().Message();
  EXPECT_NE(msg.find("kestrel-deploy"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kestrel-torch"), std::string::npos) << msg;
  EXPECT_NE(msg.find("kestrel export model=runs/best.safetensors"), std::string::npos) << msg;
  EXPECT_TRUE(calls_.empty());
}

TEST_F(BackendsTest, AProgramWithoutTheOnnxBackendSaysSo) {
  Backends b;
  b.program = "kestrel-test";
  Install(std::move(b));
  auto r = LoadDetector("best.onnx", {}, {});
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.GetStatus().Where().field, "model");
  EXPECT_NE(r.GetStatus().Message().find("kestrel-test has no ONNX backend"), std::string::npos);
  // The runtimes an export is checked in: ONNX Runtime unavailable, OpenCV
  // DNN a runtime that refuses to run, both saying why.
  EXPECT_NE(LocateOnnxRuntime().unavailable.find("kestrel-test has no ONNX backend"), std::string::npos);
  auto ran = MakeOpenCvDnnRuntime()->Run("x.onnx", {});
  ASSERT_FALSE(ran.IsOk());
  EXPECT_EQ(ran.GetStatus().Code(), StatusCode::kFailedPrecondition);
}

TEST_F(BackendsTest, InstallSetsTheRunnersInTheJobKindTable) {
  Backends b;
  b.runners.push_back({"val", [](AttemptContext&) -> Result<AttemptResult> { return AttemptResult{}; }});
  Install(std::move(b));
  ASSERT_NE(table_.Find("val"), nullptr);
  EXPECT_TRUE(static_cast<bool>(table_.Find("val")->run));
  EXPECT_FALSE(static_cast<bool>(table_.Find("train")->run));
  // A runner for a kind the table lacks is refused, naming it.
  Backends unknown;
  unknown.runners.push_back(
      {"tune-x", [](AttemptContext&) -> Result<AttemptResult> { return AttemptResult{}; }});
  JobKindTable table = BuiltinJobKinds();
  const Status s = InstallBackends(std::move(unknown), table);
  EXPECT_EQ(s.Code(), StatusCode::kNotFound);
}

TEST_F(BackendsTest, CheckDeviceIsTheBackendsOrTheCpuOnly) {
  Backends cpu;
  cpu.program = "kestrel-deploy";
  Install(std::move(cpu));
  EXPECT_TRUE(CheckDevice("cpu").IsOk());
  for (const char* gpu : {"0", "cuda", "cuda:1"}) {
    const Status s = CheckDevice(gpu);
    EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << gpu;
    EXPECT_EQ(s.Where().file, "command line") << gpu;
    EXPECT_EQ(s.Where().field, "device") << gpu;
    EXPECT_NE(s.Message().find("kestrel-deploy runs on the CPU"), std::string::npos) << s.Message();
  }
  EXPECT_EQ(CheckDevice("gpu").Where().field, "device");  // the form, before any backend
  // With a backend's check: its verdict, located at device=.
  Backends torch;
  std::vector<std::string> asked;
  torch.check_device = [&asked](const DeviceSpec& d) -> Status {
    asked.push_back(d.text);
    return d.IsCuda() ? Status::FailedPrecondition("device=" + d.text + ": no such CUDA device") : Status();
  };
  Install(std::move(torch));
  EXPECT_TRUE(CheckDevice("cpu").IsOk());
  const Status s = CheckDevice("cuda:3");
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Where().field, "device");
  EXPECT_EQ(s.Message(), "device=cuda:3: no such CUDA device");
  EXPECT_EQ(asked, (std::vector<std::string>{"cpu", "cuda:3"}));
}

}  // namespace
}  // namespace kestrel::app
