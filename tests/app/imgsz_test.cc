// The default imgsz of predict / val model= / compare / export (app/imgsz.h,
// issue 28 item 1): the size the weights were trained at — a reference .pt's
// train_args (../shared/reference/val_parity/yolov8n_shapes_p.pt, trained at
// 320; skipped when absent), Kestrel's safetensors metadata "imgsz" — else
// 640; an explicit imgsz= wins; LoadDetector resolves "not given" (0) and
// logs which size and why. Small hand-written files and a fake backend: milliseconds.
#include "app/imgsz.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "app/backends.h"
#include "app/export_keys.h"
#include "app/job_kinds.h"
#include "app/val_keys.h"
#include "core/env.h"
#include "core/options.h"
#include "core/safetensors.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

const std::string kParityPt = std::string(KESTREL_SHARED_DIR) + "/reference/val_parity/yolov8n_shapes_p.pt";

class ImgszTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_imgsz_" + std::to_string(::getpid()) + "_" +
                                        testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    JobKindTable scratch = BuiltinJobKinds();
    (void)InstallBackends(Backends{}, scratch);  // the next test starts without backends
  }
  // A safetensors file with one tiny tensor and `metadata`.
  std::string Weights(const std::string& name, const std::map<std::string, std::string>& metadata) {
    SafeTensorFile f;
    f.tensors["model.0.conv.weight"] = SafeTensor{"F32", {1}, std::string(4, '\0')};
    f.metadata = metadata;
    const std::string path = (dir_ / name).string();
    const Status s = Env::Default().WriteFileAtomic(path, SerializeSafeTensors(f));
    EXPECT_TRUE(s.IsOk()) << s.ToString();
    return path;
  }
  fs::path dir_;
};

TEST_F(ImgszTest, AReferenceCheckpointGivesItsTrainingSizeAndImgszOverrides) {
  if (!Env::Default().Stat(kParityPt).exists) GTEST_SKIP() << kParityPt << " not present";
  auto recorded = ChooseImgsz(kParityPt, 0);
  ASSERT_TRUE(recorded.IsOk()) << recorded.GetStatus().ToString();
  EXPECT_EQ(recorded->imgsz, 320);
  EXPECT_TRUE(recorded->from_weights);
  EXPECT_EQ(recorded->Line(), "imgsz=320 (from the weights' training args; imgsz= overrides)");
  auto given = ChooseImgsz(kParityPt, 640);
  ASSERT_TRUE(given.IsOk()) << given.GetStatus().ToString();
  EXPECT_EQ(given->imgsz, 640);
  EXPECT_FALSE(given->from_weights);
  EXPECT_EQ(given->Line(), "imgsz=640 (given)");
}

TEST_F(ImgszTest, KestrelWeightsGiveTheirMetadataImgsz) {
  auto c =
      ChooseImgsz(Weights("best.safetensors", {{"format", "kestrel.yolo.weights"}, {"imgsz", "256"}}), 0);
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  EXPECT_EQ(c->imgsz, 256);
  EXPECT_EQ(c->Line(), "imgsz=256 (from the weights' metadata; imgsz= overrides)");
}

TEST_F(ImgszTest, WeightsWithoutARecordedSizeFallBackTo640AndSaySo) {
  auto c = ChooseImgsz(Weights("old.safetensors", {{"format", "kestrel.yolo.weights"}}), 0);
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  EXPECT_EQ(c->imgsz, 640);
  EXPECT_FALSE(c->from_weights);
  EXPECT_EQ(c->Line(), "imgsz=640 (the weights record no training size: the default 640; imgsz= overrides)");
}

TEST_F(ImgszTest, ASizeOffTheStrideIsRoundedUpAsTheReferenceDoes) {
  auto c = ChooseImgsz(Weights("odd.safetensors", {{"imgsz", "300"}}), 0);
  ASSERT_TRUE(c.IsOk()) << c.GetStatus().ToString();
  EXPECT_EQ(c->imgsz, 320);
  EXPECT_EQ(c->Line(),
            "imgsz=320 (from the weights' metadata, 300 rounded up to a multiple of 32; imgsz= overrides)");
}

TEST_F(ImgszTest, BadRecordedSizeIsAnErrorNamingImgsz) {
  for (const char* bad : {"0", "-32", "big", "1e3"}) {
    auto c = ChooseImgsz(Weights("bad.safetensors", {{"imgsz", bad}}), 0);
    ASSERT_FALSE(c.IsOk()) << bad;
    EXPECT_EQ(c.GetStatus().Code(), StatusCode::kCorruption) << bad;
    EXPECT_EQ(c.GetStatus().Where().field, "imgsz") << bad;
  }
  EXPECT_EQ(ChooseImgsz((dir_ / "missing.safetensors").string(), 0).GetStatus().Code(),
            StatusCode::kNotFound);
}

// The keys tell "not given" (0; export: 0,0) from "given 640".
TEST_F(ImgszTest, KeysTellNotGivenFromGiven640) {
  for (const bool give : {false, true}) {
    std::vector<std::string> args = {"model=best.pt", "data=shapes"};
    if (give) args.push_back("imgsz=640");
    ValKeys val;
    OptionSet vs;
    val.Bind(vs);
    ASSERT_TRUE(vs.ApplyArgs(args).IsOk());
    EXPECT_EQ(val.imgsz, give ? 640 : 0);
    ExportKeys exp;
    OptionSet es;
    exp.Bind(es);
    ASSERT_TRUE(es.ApplyArgs({args[0], give ? "imgsz=640" : "format=onnx"}).IsOk());
    auto req = exp.Request();
    ASSERT_TRUE(req.IsOk()) << req.GetStatus().ToString();
    EXPECT_EQ(req->imgsz_h, give ? 640 : 0);
    EXPECT_EQ(req->imgsz_w, give ? 640 : 0);
  }
  // A given size that is no network side is still refused by name.
  ExportKeys exp;
  OptionSet es;
  exp.Bind(es);
  ASSERT_TRUE(es.ApplyArgs({"model=best.pt", "imgsz=100"}).IsOk());
  EXPECT_EQ(exp.Request().GetStatus().Where().field, "imgsz");
}

// LoadDetector hands the backend the resolved size and logs why; a given
// size reaches it untouched and nothing is logged.
TEST_F(ImgszTest, LoadDetectorResolvesNotGivenAndLogsTheLine) {
  std::vector<int> seen;
  Backends b;
  b.program = "kestrel-torch";
  b.torch_detector = [&seen](const std::string&, const eval::InferenceOptions& o,
                             const DetectorPlacement&) -> Result<std::unique_ptr<Detector>> {
    seen.push_back(o.imgsz);
    return Status::Unavailable("fake backend: no detector");
  };
  JobKindTable table = BuiltinJobKinds();
  ASSERT_TRUE(InstallBackends(std::move(b), table).IsOk());

  std::ostringstream log;
  auto previous = spdlog::default_logger();
  auto logger =
      std::make_shared<spdlog::logger>("imgsz_test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  logger->set_pattern("%v");
  logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(logger);

  const std::string weights = Weights("best.safetensors", {{"imgsz", "320"}});
  eval::InferenceOptions not_given;
  not_given.imgsz = 0;
  (void)LoadDetector(weights, not_given, {});  // the fake backend's error: only what it saw matters
  eval::InferenceOptions given;
  given.imgsz = 640;
  (void)LoadDetector(weights, given, {});
  spdlog::set_default_logger(previous);

  EXPECT_EQ(seen, (std::vector<int>{320, 640}));
  EXPECT_EQ(log.str(), "imgsz=320 (from the weights' metadata; imgsz= overrides)\n");
}

}  // namespace
}  // namespace kestrel::app
