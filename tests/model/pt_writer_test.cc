// The .pt writer (model/pt_writer.h), torch-free: the reference's own state
// dicts of all three families (../shared/reference; skipped when absent) are
// written as checkpoints and read back by Kestrel's restricted reader
// bit-equal, with the facts the reference's loader reads (arch, scale, nc,
// names, train_args imgsz). A development-time check hands a written file to
// Debian's python3-torch (torch.load with stand-in classes) and compares its
// pickled module tree with the genuine Ultralytics checkpoint's
// (tests/model/pt_writer_check.py; skipped without python3-torch).
#include "model/pt_writer.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/safetensors.h"
#include "model/pt_checkpoint.h"
#include "model/spec.h"

namespace kestrel::model {
namespace {

const std::string kRef = std::string(KESTREL_SHARED_DIR) + "/reference";

struct FamilyCase {
  const char* weights;  // a reference state dict, nc=3
  const char* model;    // its spec
};

const FamilyCase kCases[] = {
    {"/yolov8n_nc3_weights.safetensors", "yolov8n"},
    {"/families/yolo11n_nc3_weights.safetensors", "yolo11n"},
    {"/families/yolov5nu_nc3_weights.safetensors", "yolov5nu"},
};

PtWriteOptions Options(const std::string& model) {
  PtWriteOptions o;
  auto spec = ParseModelSpec(model, 3);
  EXPECT_TRUE(spec.IsOk()) << spec.GetStatus().ToString();
  if (spec.IsOk()) o.spec = *spec;
  o.names = {"circle", "rectangle", "triangle"};
  o.train_args = {{"imgsz", 320}, {"epochs", 30}, {"model", model + ".yaml"}, {"data", "shapes"}};
  o.train_metrics = {{"metrics/mAP50-95(B)", 0.25}};
  o.epoch = 29;
  o.best_fitness = 0.3;
  o.date = PtDate(1764900000123);
  return o;
}

TEST(PtWriter, EveryFamilyReadsBackBitEqual) {
  for (const FamilyCase& c : kCases) {
    const std::string path = kRef + c.weights;
    if (!Env::Default().Stat(path).exists) GTEST_SKIP() << path << " not present";
    auto weights = ReadSafeTensorsFile(path);
    ASSERT_TRUE(weights.IsOk()) << weights.GetStatus().ToString();
    const PtWriteOptions o = Options(c.model);
    auto bytes = SerializePtCheckpoint(*weights, o);
    ASSERT_TRUE(bytes.IsOk()) << c.model << ": " << bytes.GetStatus().ToString();
    ASSERT_TRUE(LooksLikeZip(*bytes));
    auto back = ParsePtCheckpoint(*bytes, c.model);
    ASSERT_TRUE(back.IsOk()) << c.model << ": " << back.GetStatus().ToString();
    EXPECT_EQ(back->source, "model") << c.model;
    EXPECT_EQ(back->model_class, "ultralytics.nn.tasks.DetectionModel");
    EXPECT_EQ(back->arch, FamilyName(o.spec.family)) << c.model;
    EXPECT_EQ(back->scale, "n");
    EXPECT_EQ(back->nc, 3);
    EXPECT_EQ(back->names, o.names);
    EXPECT_EQ(back->imgsz, 320) << "train_args.imgsz, the size val/predict default to";
    EXPECT_EQ(back->ultralytics_version, kPtLayoutVersion);
    ASSERT_EQ(back->weights.tensors.size(), weights->tensors.size()) << c.model;
    for (const auto& [name, want] : weights->tensors) {
      auto it = back->weights.tensors.find(name);
      ASSERT_NE(it, back->weights.tensors.end()) << c.model << " " << name;
      EXPECT_EQ(it->second.dtype, want.dtype) << name;
      EXPECT_EQ(it->second.shape, want.shape) << name;
      EXPECT_TRUE(it->second.data == want.data) << c.model << " " << name << ": values differ";
    }
  }
}

TEST(PtWriter, WrittenFileIsReadAsWeightsWithItsSpec) {
  const std::string path = kRef + kCases[1].weights;
  if (!Env::Default().Stat(path).exists) GTEST_SKIP() << path << " not present";
  auto weights = ReadSafeTensorsFile(path);
  ASSERT_TRUE(weights.IsOk());
  const std::string dir = ::testing::TempDir() + "/pt_writer_spec";
  ASSERT_TRUE(Env::Default().CreateDirs(dir).IsOk());
  const std::string out = dir + "/best.pt";
  ASSERT_TRUE(WritePtCheckpoint(Env::Default(), out, *weights, Options("yolo11n")).IsOk());
  auto info = ReadWeightsInfo(out);
  ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  EXPECT_EQ(info->spec.Name(), "yolo11n");
  EXPECT_EQ(info->spec.nc, 3);
  auto imgsz = ReadRecordedImgsz(out);
  ASSERT_TRUE(imgsz.IsOk());
  EXPECT_EQ(*imgsz, 320);
}

TEST(PtWriter, RefusesWeightsThatAreNotTheSpecsModel) {
  const std::string path = kRef + kCases[0].weights;
  if (!Env::Default().Stat(path).exists) GTEST_SKIP() << path << " not present";
  auto weights = ReadSafeTensorsFile(path);
  ASSERT_TRUE(weights.IsOk());
  // Another family: its first differing tensor is named.
  auto wrong = SerializePtCheckpoint(*weights, Options("yolo11n"));
  ASSERT_FALSE(wrong.IsOk());
  EXPECT_NE(wrong.GetStatus().Message().find("yolo11n"), std::string::npos) << wrong.GetStatus().ToString();
  // Another class count: the shape is named.
  PtWriteOptions o = Options("yolov8n");
  o.spec.nc = 80;
  o.names.clear();
  auto nc = SerializePtCheckpoint(*weights, o);
  ASSERT_FALSE(nc.IsOk());
  EXPECT_NE(nc.GetStatus().Message().find("nc=80"), std::string::npos) << nc.GetStatus().ToString();
  // A tensor the model does not have.
  SafeTensorFile extra = *weights;
  extra.tensors["model.99.weight"] = extra.tensors.begin()->second;
  auto e = SerializePtCheckpoint(extra, Options("yolov8n"));
  ASSERT_FALSE(e.IsOk());
  EXPECT_NE(e.GetStatus().Message().find("model.99.weight"), std::string::npos);
  // Names must match nc; train_args must be an object.
  o = Options("yolov8n");
  o.names = {"a"};
  EXPECT_EQ(SerializePtCheckpoint(*weights, o).GetStatus().Where().field, "names");
  o = Options("yolov8n");
  o.train_args = nlohmann::json::array();
  EXPECT_EQ(SerializePtCheckpoint(*weights, o).GetStatus().Where().field, "train_args");
}

TEST(PtWriter, DateIsIso8601Utc) { EXPECT_EQ(PtDate(1764900000123), "2025-12-05T02:00:00.123000"); }

// Development-time check against python3-torch (Debian's /usr/bin/python3):
// torch.load with an Unpickler mapping the reference's classes to stand-ins
// gives the same state dict, and the pickled module tree (classes, attribute
// names and values, parameter/buffer names, shapes) equals the genuine
// yolo11n_shapes.pt's, apart from what a run records (dates, args, metrics,
// the anchors of its last inference). Skips without python3-torch. Loading
// with the reference framework itself (YOLO(path).val()) needs its source,
// which this machine does not have; the script says so.
TEST(PtWriter, TorchLoadsItLikeTheGenuineCheckpoint) {
  const std::string probe = kRef + kCases[0].weights;
  if (!Env::Default().Stat(probe).exists) GTEST_SKIP() << probe << " not present";
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "no python3-torch for /usr/bin/python3 (development-time check)";
  const std::string dir = ::testing::TempDir() + "/pt_writer_torch";
  ASSERT_TRUE(Env::Default().CreateDirs(dir).IsOk());
  // The genuine checkpoints of the same model (nc=3, scale n); YOLOv5u has none here.
  const std::string genuine[] = {kRef + "/val_parity/yolov8n_shapes_p.pt",
                                 kRef + "/families/yolo11n_shapes.pt", "-"};
  std::string cmd = "/usr/bin/python3 " + std::string(KESTREL_SOURCE_DIR) + "/tests/model/pt_writer_check.py";
  for (size_t k = 0; k < std::size(kCases); ++k) {
    const FamilyCase& c = kCases[k];
    auto w = ReadSafeTensorsFile(kRef + c.weights);
    ASSERT_TRUE(w.IsOk());
    const std::string out = dir + "/" + c.model + ".pt";
    ASSERT_TRUE(WritePtCheckpoint(Env::Default(), out, *w, Options(c.model)).IsOk());
    cmd += " " + out + " " + genuine[k] + " " + kRef + c.weights;
  }
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

}  // namespace
}  // namespace kestrel::model
