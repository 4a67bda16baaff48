// `kestrel export int8=true` (docs/export.md "INT8"): the QDQ pass
// (export/onnx_quantize.h) on a hand-built graph and its range arithmetic,
// and the whole command on the reference detector trained on shapes
// (../shared/reference/val_parity): calibrated on the dataset's images, the
// file passes the ONNX checker, holds int8 per-channel conv weights, runs in
// ONNX Runtime within the INT8 bound, is refused by OpenCV DNN 4.6 (reported
// as not run), and its mAP50-95 in ONNX Runtime is within a point of the
// FP32 model's. Bad int8 keys are usage errors naming the key. Torch-free:
// the CLI does the work.
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/cli_fixture.h"
#include "export/onnx_quantize.h"

namespace kestrel {
namespace {

namespace fs = std::filesystem;
using exporter::CalibMethod;

const std::string kParity = std::string(KESTREL_SHARED_DIR) + "/reference/val_parity";

// images [1, 3, 8, 8] -> Conv 3x3 (4 out, bias) -> SiLU -> Conv 1x1 (2 out,
// bias) -> output0: one block the pass quantizes, one plain conv it keeps.
std::string TinyGraph() {
  onnx::ModelProto m;
  m.set_ir_version(onnx::IR_VERSION);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("tiny");
  auto value = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g.add_input(), "images", {1, 3, 8, 8});
  value(g.add_output(), "output0", {1, 2, 8, 8});
  auto init = [&g](const std::string& name, std::vector<int64_t> dims, float step) {
    onnx::TensorProto* t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    for (int64_t i = 0; i < n; ++i) t->add_float_data(step * static_cast<float>((i * 7) % 11 - 5));
  };
  init("w1", {4, 3, 3, 3}, 0.05F);
  init("b1", {4}, 0.3F);
  init("w2", {2, 4, 1, 1}, 0.1F);
  init("b2", {2}, 0.2F);
  auto node = [&g](const std::string& op, std::vector<std::string> in, const std::string& out) {
    onnx::NodeProto* n = g.add_node();
    n->set_op_type(op);
    n->set_name(out);
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  auto pads = [](onnx::NodeProto* n, int64_t p) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name("pads");
    a->set_type(onnx::AttributeProto::INTS);
    for (int k = 0; k < 4; ++k) a->add_ints(p);
  };
  pads(node("Conv", {"images", "w1", "b1"}, "y1"), 1);
  node("Sigmoid", {"y1"}, "s1");
  node("Mul", {"y1", "s1"}, "a1");
  pads(node("Conv", {"a1", "w2", "b2"}, "output0"), 0);
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

const onnx::TensorProto* FindInit(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& t : g.initializer()) {
    if (t.name() == name) return &t;
  }
  return nullptr;
}

int64_t AxisOf(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) {
    if (a.name() == "axis") return a.i();
  }
  return 1;  // DequantizeLinear's default
}

TEST(OnnxQuantize, RangesFromMinMaxAndFromTheHistogramsTails) {
  exporter::TensorStats s;
  s.min = -1;
  s.max = 9;
  s.count = 10000;
  s.hist.assign(10, 1000);  // uniform over [-1, 9]: one bin per unit
  auto mm = exporter::RangeFromStats(s, CalibMethod::kMinMax, 99.99, "t");
  ASSERT_TRUE(mm.IsOk());
  EXPECT_EQ(mm->lo, -1);
  EXPECT_EQ(mm->hi, 9);
  // 1% in each tail of a uniform histogram: 0.1 units in from each end.
  auto p = exporter::RangeFromStats(s, CalibMethod::kPercentile, 99, "t");
  ASSERT_TRUE(p.IsOk());
  EXPECT_NEAR(p->lo, -0.9, 1e-9);
  EXPECT_NEAR(p->hi, 8.9, 1e-9);
  // A positive-only tensor is widened to hold 0 (the zero point is exact).
  exporter::TensorStats pos = s;
  pos.min = 2;
  pos.max = 12;
  auto w = exporter::RangeFromStats(pos, CalibMethod::kPercentile, 99, "t");
  ASSERT_TRUE(w.IsOk());
  EXPECT_EQ(w->lo, 0);
  EXPECT_NEAR(w->hi, 11.9, 1e-9);
  // An outlier bin far out is cut by the percentile, kept by min/max.
  exporter::TensorStats tail;
  tail.min = 0;
  tail.max = 100;
  tail.count = 100001;
  tail.hist.assign(100, 0);
  tail.hist[0] = 100000;
  tail.hist[99] = 1;
  EXPECT_LT(exporter::RangeFromStats(tail, CalibMethod::kPercentile, 99.99, "t")->hi, 1.0);
  EXPECT_EQ(exporter::RangeFromStats(tail, CalibMethod::kMinMax, 99.99, "t")->hi, 100);
  // Errors name the tensor.
  exporter::TensorStats empty;
  auto e = exporter::RangeFromStats(empty, CalibMethod::kMinMax, 99.99, "conv3_in");
  ASSERT_FALSE(e.IsOk());
  EXPECT_EQ(e.GetStatus().Where().field, "conv3_in");
  exporter::TensorStats nohist = s;
  nohist.hist.clear();
  EXPECT_FALSE(exporter::RangeFromStats(nohist, CalibMethod::kPercentile, 99.99, "t").IsOk());
  exporter::TensorStats nan = s;
  nan.max = NAN;
  EXPECT_FALSE(exporter::RangeFromStats(nan, CalibMethod::kMinMax, 99.99, "t").IsOk());
  EXPECT_EQ(exporter::ParseCalibMethod("minmax").Value(), CalibMethod::kMinMax);
  auto bad = exporter::ParseCalibMethod("entropy");
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "calib_method");
}

TEST(OnnxQuantize, QuantizesConvSiluBlocksPerChannelAndKeepsPlainConvsFloat) {
  const std::string fp32 = TinyGraph();
  auto tensors = exporter::CalibrationTensors(fp32);
  ASSERT_TRUE(tensors.IsOk()) << tensors.GetStatus().ToString();
  EXPECT_EQ(*tensors, (std::vector<std::string>{"images", "y1"}));
  auto calib = exporter::WithTensorOutputs(fp32, *tensors);
  ASSERT_TRUE(calib.IsOk());
  onnx::ModelProto cm;
  ASSERT_TRUE(cm.ParseFromString(*calib));
  ASSERT_EQ(cm.graph().output_size(), 3);
  EXPECT_EQ(cm.graph().output(1).name(), "images");
  EXPECT_EQ(cm.graph().output(2).name(), "y1");

  std::map<std::string, exporter::TensorRange> ranges{{"images", {0, 1}}, {"y1", {-2, 6}}};
  auto missing = exporter::QuantizeOnnxModel(fp32, {{"images", {0, 1}}}, {});
  ASSERT_FALSE(missing.IsOk());
  EXPECT_EQ(missing.GetStatus().Where().field, "y1");
  exporter::QuantizeOptions qo;
  qo.calib_images = 7;
  auto q = exporter::QuantizeOnnxModel(fp32, ranges, qo);
  ASSERT_TRUE(q.IsOk()) << q.GetStatus().ToString();
  EXPECT_EQ(q->quantized_convs, 1);
  EXPECT_EQ(q->float_convs, 1);
  EXPECT_EQ(q->metadata.at("int8"), "true");
  EXPECT_EQ(q->metadata.at("int8_calibration"), "minmax");
  EXPECT_EQ(q->metadata.at("int8_calib_images"), "7");
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(q->bytes));
  EXPECT_NO_THROW(onnx::checker::check_model(m));
  const onnx::GraphProto& g = m.graph();
  // w1: int8 [4, 3, 3, 3] with a per-channel DequantizeLinear on axis 0,
  // symmetric (zero points 0), its largest magnitude at +-127 per channel.
  const onnx::TensorProto* w = FindInit(g, "w1_int8");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->data_type(), onnx::TensorProto::INT8);
  EXPECT_EQ(w->dims_size(), 4);
  const onnx::TensorProto* ws = FindInit(g, "w1_scale");
  ASSERT_NE(ws, nullptr);
  ASSERT_EQ(ws->dims_size(), 1);
  EXPECT_EQ(ws->dims(0), 4);
  const std::string& raw = w->raw_data();
  for (int o = 0; o < 4; ++o) {
    int amax = 0;
    for (int j = 0; j < 27; ++j)
      amax = std::max(amax, std::abs(static_cast<int>(static_cast<int8_t>(raw[o * 27 + j]))));
    EXPECT_EQ(amax, 127) << "channel " << o;
  }
  const onnx::TensorProto* b = FindInit(g, "b1_int32");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->data_type(), onnx::TensorProto::INT32);
  EXPECT_EQ(FindInit(g, "w1"), nullptr) << "the float weights are dropped";
  EXPECT_NE(FindInit(g, "w2"), nullptr) << "the plain conv stays float";
  int q_nodes = 0, dq_axis0 = 0;
  for (const auto& n : g.node()) {
    if (n.op_type() == "QuantizeLinear") ++q_nodes;
    if (n.op_type() == "DequantizeLinear" && (n.input(0) == "w1_int8" || n.input(0) == "b1_int32")) {
      EXPECT_EQ(AxisOf(n), 0);
      ++dq_axis0;
    }
    if (n.op_type() == "Conv" && n.input(1) == "w1_dq") {
      EXPECT_EQ(n.input(0), "images_dq");
      EXPECT_EQ(n.input(2), "b1_dq");
      EXPECT_EQ(n.output(0), "y1_f");
    }
  }
  EXPECT_EQ(q_nodes, 2);  // images and the conv's output
  EXPECT_EQ(dq_axis0, 2);
  // The activation parameters: [-2, 6] -> scale 8/255, zero point 64.
  const onnx::TensorProto* ys = FindInit(g, "y1_qscale");
  const onnx::TensorProto* yz = FindInit(g, "y1_qzero");
  ASSERT_NE(ys, nullptr);
  ASSERT_NE(yz, nullptr);
  float scale = 0;
  std::memcpy(&scale, ys->raw_data().data(), 4);
  EXPECT_NEAR(scale, 8.0 / 255.0, 1e-7);
  EXPECT_EQ(yz->data_type(), onnx::TensorProto::UINT8);
  EXPECT_EQ(static_cast<uint8_t>(yz->raw_data()[0]), 64);
}

class Int8ExportTest : public testing::KestrelCliTest {};

TEST_F(Int8ExportTest, BadInt8KeysAreUsageErrorsNamingTheKey) {
  const std::string base = "--json export model=m.pt ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"int8=true", "data"},
      {"int8=true half=true data=d", "int8"},
      {"int8=true data=d calib=0", "calib"},
      {"int8=true data=d calib=5000", "calib"},
      {"int8=true data=d fraction=0", "fraction"},
      {"int8=true data=d fraction=1.5", "fraction"},
      {"int8=true data=d fraction=-0.1", "fraction"},
      {"int8=true data=d calib_method=entropy", "calib_method"},
  };
  for (const auto& [args, field] : cases) {
    testing::CliRun r = Kestrel(base + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_EQ(Json(r)["error"]["field"], field) << args << ": " << r.out;
  }
  EXPECT_FALSE(fs::exists(dir_ / "m.onnx"));
}

TEST_F(Int8ExportTest, ReferenceDetectorInt8RunsInOnnxRuntimeWithinAPointOfFp32) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  const std::string pt = (dir_ / "shapes.pt").string();
  fs::copy_file(kParity + "/yolov8n_shapes_p.pt", pt);
  const std::string data = kParity + "/square/data.yaml";
  testing::CliRun ex =
      Kestrel("--json export model=" + pt + " imgsz=320 int8=true calib=16 output=int8.onnx data=" + data);
  const nlohmann::json j = Json(ex);
  if (ex.code != 0) {
    // Only a missing ONNX Runtime may stop it, and then nothing is written.
    EXPECT_EQ(ex.code, 1) << ex.out;
    EXPECT_NE(j["error"]["message"].get<std::string>().find("needs ONNX Runtime"), std::string::npos)
        << ex.out;
    EXPECT_FALSE(fs::exists(dir_ / "int8.onnx"));
    GTEST_SKIP() << "no ONNX Runtime: the INT8 export was refused, as documented";
  }
  EXPECT_EQ(j["int8"], true);
  const nlohmann::json& c = j["calibration"];
  // The square split has no train images: calibration draws from val.
  EXPECT_EQ(c["split"], "val") << c;
  EXPECT_EQ(c["images"], 16) << c;
  EXPECT_EQ(c["split_images"], 24) << c;
  EXPECT_EQ(c["method"], "minmax") << c;
  EXPECT_EQ(c["quantized_convs"], 57) << c;  // every Conv+SiLU of yolov8n
  EXPECT_EQ(c["float_convs"], 7) << c;       // the head's six last 1x1s and the DFL
  const nlohmann::json& v = j["verification"];
  EXPECT_EQ(v["verified"], true) << v;
  EXPECT_EQ(v["runtimes"][0]["ran"], false) << v;  // OpenCV DNN 4.6 cannot load per-channel DQ
  EXPECT_NE(v["runtimes"][0]["error"].get<std::string>().find("INT8"), std::string::npos) << v;
  EXPECT_EQ(v["runtimes"][1]["passed"], true) << v;
  EXPECT_LE(v["max_abs_diff_scores"].get<double>(), v["tolerance"].get<double>());
  EXPECT_GT(v["max_abs_diff"].get<double>(), 1e-3) << "INT8 should differ from FP32 LibTorch";
  std::cout << "INT8 in ONNX Runtime vs LibTorch (synthetic images): scores " << v["max_abs_diff_scores"]
            << ", boxes " << v["max_abs_diff_boxes"] << " px (" << v["max_rel_diff_boxes"] << " relative)\n";

  // The file: checker, int8 per-channel weights, metadata.
  const fs::path file = dir_ / "int8.onnx";
  ASSERT_TRUE(fs::exists(file));
  EXPECT_NO_THROW(onnx::checker::check_model(file.string()));
  onnx::ModelProto m;
  {
    std::ifstream in(file, std::ios::binary);
    ASSERT_TRUE(m.ParseFromIstream(&in));
  }
  const onnx::GraphProto& g = m.graph();
  int int8_weights = 0, float_conv_weights = 0, per_channel = 0;
  for (const auto& t : g.initializer()) {
    if (t.dims_size() == 4 && t.data_type() == onnx::TensorProto::INT8) ++int8_weights;
    if (t.dims_size() == 4 && t.data_type() == onnx::TensorProto::FLOAT) ++float_conv_weights;
  }
  for (const auto& n : g.node()) {
    if (n.op_type() != "DequantizeLinear") continue;
    const onnx::TensorProto* w = FindInit(g, n.input(0));
    if (w == nullptr || w->data_type() != onnx::TensorProto::INT8 || w->dims_size() != 4) continue;
    const onnx::TensorProto* s = FindInit(g, n.input(1));
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(AxisOf(n), 0) << n.name();
    ASSERT_EQ(s->dims_size(), 1) << n.name();
    EXPECT_EQ(s->dims(0), w->dims(0)) << n.name();
    ++per_channel;
  }
  EXPECT_EQ(int8_weights, 57);
  EXPECT_EQ(per_channel, 57);
  EXPECT_EQ(float_conv_weights, 7);
  std::map<std::string, std::string> meta;
  for (const auto& e : m.metadata_props()) meta[e.key()] = e.value();
  EXPECT_EQ(meta["int8"], "true");
  EXPECT_EQ(meta["int8_calib_images"], "16");
  EXPECT_EQ(meta["names"], "{0: 'circle', 1: 'rectangle', 2: 'triangle'}");
  // A quarter of the FP32 file, give or take the float head and the scales.
  ASSERT_EQ(Kestrel("export model=" + pt + " imgsz=320 output=fp32.onnx").code, 0);
  EXPECT_LT(fs::file_size(file) * 3, fs::file_size(dir_ / "fp32.onnx"));

  // The mAP drop on the split (export data='s check, ONNX Runtime vs LibTorch FP32).
  const nlohmann::json& map = v["map"];
  ASSERT_TRUE(map.is_object()) << v;
  ASSERT_EQ(map["ran"], true) << map;
  EXPECT_EQ(map["report_only"], true) << map;
  const double fp32 = map["libtorch"]["map50_95"].get<double>();
  const nlohmann::json& ort = map["runtimes"][1];
  ASSERT_EQ(ort["ran"], true) << map;
  const double int8 = ort["map50_95"].get<double>();
  ASSERT_GT(fp32, 0.05) << "the reference detector should find shapes";
  std::cout << "mAP50-95 on " << map["dataset"] << " " << map["split"] << ": LibTorch FP32 " << fp32
            << ", ONNX Runtime INT8 " << int8 << " (drop " << (fp32 - int8) * 100 << " points); mAP50 "
            << map["libtorch"]["map50"] << " / " << ort["map50"] << "\n";
  EXPECT_LT(fp32 - int8, 0.01) << "the INT8 goal: under one point of mAP50-95";
}

}  // namespace
}  // namespace kestrel

namespace kestrel {
namespace {

// A dataset with a train split (Kestrel's synthetic shapes: 15 train, 5 val
// images) calibrates on train — the first `fraction` of it, `calib` of
// those — and the mAP check scores val, which calibration never saw.
TEST_F(Int8ExportTest, CalibratesOnTheTrainSplitsFirstFraction) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  const std::string pt = (dir_ / "shapes.pt").string();
  fs::copy_file(kParity + "/yolov8n_shapes_p.pt", pt);
  ASSERT_EQ(Kestrel("dataset synth syn images=20 classes=3 seed=7").code, 0);
  testing::CliRun ex = Kestrel("--json export model=" + pt +
                               " imgsz=160 int8=true calib=4 fraction=0.6 output=syn.onnx data=./syn");
  const nlohmann::json j = Json(ex);
  if (ex.code == 1 &&
      j["error"]["message"].get<std::string>().find("needs ONNX Runtime") != std::string::npos)
    GTEST_SKIP() << "no ONNX Runtime";
  ASSERT_EQ(ex.code, 0) << ex.out;
  const nlohmann::json& c = j["calibration"];
  EXPECT_EQ(c["split"], "train") << c;
  EXPECT_EQ(c["split_images"], 15) << c;
  EXPECT_EQ(c["candidates"], 9) << c;  // round(0.6 * 15)
  EXPECT_EQ(c["images"], 4) << c;
  EXPECT_EQ(j["verification"]["verified"], true) << j["verification"];
  const nlohmann::json& map = j["verification"]["map"];
  ASSERT_EQ(map["ran"], true) << map;
  EXPECT_EQ(map["split"], "val");
  const double fp32 = map["libtorch"]["map50_95"].get<double>();
  const double int8 = map["runtimes"][1]["map50_95"].get<double>();
  std::cout << "synthetic shapes val at 160: mAP50-95 LibTorch FP32 " << fp32 << ", ONNX Runtime INT8 "
            << int8 << "\n";
  EXPECT_LT(fp32 - int8, 0.01);
}

// int8=true on a registered model without data= calibrates on the model's
// own dataset version (as the mAP check defaults to it); a weights file
// without data= stays a usage error naming `data`. With dynamic=true the
// QDQ file is verified in ONNX Runtime at two input sizes and two batch
// sizes against LibTorch, as every dynamic export is, and its mAP (rect
// batches) is reported. The registered weights carry no class names: the
// file takes the dataset version's.
TEST_F(Int8ExportTest, RegisteredModelCalibratesOnItsOwnDatasetAndInt8DynamicVerifies) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  const std::string w = (dir_ / "shapes.safetensors").string();
  fs::copy_file(kParity + "/yolov8n_shapes_p.safetensors", w);
  testing::CliRun plain = Kestrel("--json export model=" + w + " imgsz=160 int8=true");
  EXPECT_EQ(plain.code, 2) << plain.out;
  EXPECT_EQ(Json(plain)["error"]["field"], "data") << plain.out;
  EXPECT_FALSE(fs::exists(dir_ / "shapes.onnx"));
  ASSERT_EQ(Kestrel("dataset import " + kParity + "/square --name square").code, 0);
  ASSERT_EQ(Kestrel("models register " + w + " data=square --name sq").code, 0);

  const auto t0 = std::chrono::steady_clock::now();
  testing::CliRun ex =
      Kestrel("--json export model=sq@v1 int8=true dynamic=true imgsz=160 calib=8 output=sqdyn.onnx");
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const nlohmann::json j = Json(ex);
  if (ex.code == 1 &&
      j["error"]["message"].get<std::string>().find("needs ONNX Runtime") != std::string::npos)
    GTEST_SKIP() << "no ONNX Runtime";
  ASSERT_EQ(ex.code, 0) << ex.out;
  EXPECT_EQ(j["int8"], true);
  EXPECT_EQ(j["dynamic"], true);
  const nlohmann::json& c = j["calibration"];
  EXPECT_EQ(c["dataset"], "square@v1") << c;  // no data= given: the model's own version
  EXPECT_EQ(c["split"], "val") << c;
  EXPECT_EQ(c["images"], 8) << c;
  EXPECT_EQ(c["quantized_convs"], 57) << c;
  EXPECT_EQ(j["names"], nlohmann::json::array({"circle", "rectangle", "triangle"}));
  EXPECT_EQ(j["names_source"], "model_dataset");
  EXPECT_EQ(j["names_dataset"], "square@v1");
  EXPECT_EQ(j["input"]["shape"], nlohmann::json::array({-1, 3, -1, -1}));
  const nlohmann::json& v = j["verification"];
  EXPECT_EQ(v["verified"], true) << v;
  EXPECT_EQ(v["shapes"], nlohmann::json::parse("[[1,3,160,160],[1,3,128,192],[2,3,160,160],[2,3,128,192]]"))
      << v["shapes"];
  EXPECT_EQ(v["images"], 4 + 4 + 4 + 4);
  EXPECT_EQ(v["runtimes"][0]["ran"], false) << v;  // OpenCV DNN 4.6 cannot load per-channel DQ
  EXPECT_EQ(v["runtimes"][1]["ran"], true) << v;
  EXPECT_EQ(v["runtimes"][1]["passed"], true) << v;
  EXPECT_LE(v["max_abs_diff_scores"].get<double>(), v["tolerance"].get<double>());
  EXPECT_LE(v["max_rel_diff_boxes"].get<double>(), v["tolerance"].get<double>());
  const nlohmann::json& map = v["map"];
  ASSERT_EQ(map["ran"], true) << map;
  EXPECT_EQ(map["dataset"], "square@v1");
  EXPECT_EQ(map["rect"], true);  // a dynamic file runs val's rect batches
  ASSERT_EQ(map["runtimes"][1]["ran"], true) << map;
  const double fp32 = map["libtorch"]["map50_95"].get<double>();
  const double int8 = map["runtimes"][1]["map50_95"].get<double>();
  ASSERT_GT(fp32, 0.05) << "the reference detector should find shapes at 160";
  EXPECT_LT(fp32 - int8, 0.01) << "the INT8 goal: under one point of mAP50-95";
  std::cout << "INT8 dynamic at 160 (ONNX Runtime vs LibTorch, 4 shapes): scores " << v["max_abs_diff_scores"]
            << ", boxes " << v["max_rel_diff_boxes"]
            << " relative; mAP50-95 on square@v1 val (rect) LibTorch FP32 " << fp32 << ", INT8 " << int8
            << " (drop " << (fp32 - int8) * 100 << " points); export " << wall_s << " s\n";
  // The file: the dataset's names in its metadata, recorded on the model.
  std::ifstream in(dir_ / "sqdyn.onnx", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("{0: 'circle', 1: 'rectangle', 2: 'triangle'}"), std::string::npos);
  EXPECT_EQ(j["registry"]["model"], "sq@v1");
  const nlohmann::json exports = Json(Kestrel("--json models show sq@v1"))["model"]["exports"];
  ASSERT_EQ(exports.size(), 1u);
  EXPECT_EQ(exports[0]["options"]["dynamic"], true);
  EXPECT_EQ(exports[0]["options"]["int8"], true);
}

}  // namespace
}  // namespace kestrel
