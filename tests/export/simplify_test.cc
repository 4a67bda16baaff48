// simplify=true (exporter::SimplifyOnnxModel, docs/export.md "simplify"):
// the passes on a hand-built graph (constant folding with its values, no-op
// and dead-node removal, unused initializers, a graph output kept by name, a
// large ConstantOfShape left as a node, value_info from shape inference), and
// on real exports of the reference detector: simplify=true and false both
// verified, with the same OpenCV DNN and ONNX Runtime differences to
// LibTorch, and the counts of the written files. Torch-free TU: the
// LibTorch backend runs LibTorch.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/cli_fixture.h"
#include "app/export.h"
#include "app/export_keys.h"
#include "app/onnx_runtime.h"
#include "export/onnx_simplify.h"

namespace kestrel {
namespace {

namespace fs = std::filesystem;

const std::string kParity = std::string(KESTREL_SHARED_DIR) + "/reference/val_parity";

void SetShape(onnx::ValueInfoProto* v, const std::string& name, int32_t type,
              const std::vector<int64_t>& dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

onnx::NodeProto* Node(onnx::GraphProto& g, const std::string& op, const std::vector<std::string>& in,
                      const std::string& out) {
  onnx::NodeProto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(out);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
  return n;
}

void Int64Init(onnx::GraphProto& g, const std::string& name, const std::vector<int64_t>& v) {
  onnx::TensorProto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8));
}

std::vector<float> Floats(const onnx::TensorProto& t) {
  std::vector<float> v(t.raw_data().size() / 4);
  std::memcpy(v.data(), t.raw_data().data(), v.size() * 4);
  return v;
}
std::vector<int64_t> Ints(const onnx::TensorProto& t) {
  std::vector<int64_t> v(t.raw_data().size() / 8);
  std::memcpy(v.data(), t.raw_data().data(), v.size() * 8);
  return v;
}

// x [2, 3, 4] float -> y, shape2. What the pass folds: Shape of x, a small
// ConstantOfShape (its Mul with a Constant writes a graph output: kept);
// no-ops Identity, Cast to float, identity Transpose, same-shape Reshape,
// one-input Concat; a dead Relu; an unused initializer; the output written
// through an Identity; and a ConstantOfShape of 16 KiB that stays a node.
std::string HandBuiltModel() {
  onnx::ModelProto m;
  m.set_ir_version(onnx::IR_VERSION);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("t");
  SetShape(g.add_input(), "x", onnx::TensorProto::FLOAT, {2, 3, 4});
  Node(g, "Shape", {"x"}, "shape");  // [2, 3, 4]
  onnx::NodeProto* c = Node(g, "Constant", {}, "two");
  onnx::AttributeProto* a = c->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_int64_data(2);
  Node(g, "Mul", {"shape", "two"}, "shape2");      // [4, 6, 8]
  Node(g, "ConstantOfShape", {"shape"}, "zeros");  // float 0, [2, 3, 4]: 96 bytes, folded
  Node(g, "Add", {"x", "zeros"}, "a");
  Node(g, "Identity", {"a"}, "b");
  onnx::NodeProto* cast = Node(g, "Cast", {"b"}, "c");
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  onnx::NodeProto* tr = Node(g, "Transpose", {"c"}, "d");
  auto* perm = tr->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int k = 0; k < 3; ++k) perm->add_ints(k);
  Int64Init(g, "same_shape", {2, 3, 4});
  Node(g, "Reshape", {"d", "same_shape"}, "e");
  onnx::NodeProto* one = Node(g, "Concat", {"e"}, "f");
  auto* axis = one->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  Node(g, "Relu", {"f"}, "dead");
  Int64Init(g, "unused", {7});
  Int64Init(g, "flat", {6, 4});
  Node(g, "Reshape", {"f", "flat"}, "g");
  Int64Init(g, "big_shape", {64, 64});  // 16 KiB of zeros: over kMaxFoldBytes
  Node(g, "ConstantOfShape", {"big_shape"}, "big");
  Node(g, "ReduceSum", {"big"}, "big_sum");  // [1, 1]
  Node(g, "Add", {"g", "big_sum"}, "h");     // [6, 4]
  Node(g, "Identity", {"h"}, "y");
  SetShape(g.add_output(), "y", onnx::TensorProto::FLOAT, {6, 4});
  SetShape(g.add_output(), "shape2", onnx::TensorProto::INT64, {3});
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

TEST(OnnxSimplify, FoldsRemovesNoOpsAndDeadNodesAndInfersShapes) {
  const std::string bytes = HandBuiltModel();
  auto s = exporter::SimplifyOnnxModel(bytes);
  ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
  const exporter::SimplifyReport& r = s->report;
  EXPECT_EQ(r.nodes_before, 16);
  EXPECT_EQ(r.constants, 1);  // `two`
  // Shape, ConstantOfShape (96 bytes); Mul writes the graph output shape2,
  // which stays computed by a node (it reads folded initializers).
  EXPECT_EQ(r.folded, 2);
  EXPECT_EQ(r.kept_large, 1);
  // Identity b, Cast, Transpose, Reshape e, Concat f, and the output Identity y.
  EXPECT_EQ(r.removed_noops, 6);
  EXPECT_EQ(r.removed_dead, 1);  // Relu
  // Left: Mul (shape2), Add (a), Reshape (g), ConstantOfShape (big), ReduceSum, Add (h -> y).
  EXPECT_EQ(r.nodes_after, 6);
  EXPECT_EQ(r.nodes_after, r.nodes_before - r.constants - r.folded - r.removed_noops - r.removed_dead);
  EXPECT_GT(r.removed_initializers, 0);
  EXPECT_EQ(r.value_info_before, 0);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(s->bytes));
  const onnx::GraphProto& g = m.graph();
  EXPECT_EQ(r.value_info, g.value_info_size());
  EXPECT_EQ(r.value_info, 4);  // a, g, big, big_sum: every intermediate tensor
  std::map<std::string, const onnx::TensorProto*> inits;
  for (const auto& t : g.initializer()) inits[t.name()] = &t;
  EXPECT_EQ(inits.count("unused"), 0u);
  EXPECT_EQ(inits.count("same_shape"), 0u) << "its Reshape was a no-op";
  ASSERT_EQ(inits.count("shape"), 1u);
  EXPECT_EQ(Ints(*inits["shape"]), (std::vector<int64_t>{2, 3, 4}));
  ASSERT_EQ(inits.count("zeros"), 1u);
  EXPECT_EQ(Floats(*inits["zeros"]), std::vector<float>(24, 0.0F));
  // The output keeps its name: the Add that fed the removed Identity writes y.
  bool add_writes_y = false, big_node = false;
  for (const auto& n : g.node()) {
    add_writes_y = add_writes_y || (n.op_type() == "Add" && n.output(0) == "y");
    big_node = big_node || n.op_type() == "ConstantOfShape";
    EXPECT_NE(n.op_type(), "Identity");
    EXPECT_NE(n.op_type(), "Transpose");
    EXPECT_NE(n.op_type(), "Relu");
  }
  EXPECT_TRUE(add_writes_y);
  EXPECT_TRUE(big_node) << "a 16 KiB ConstantOfShape is not folded";
  // Counting without simplifying.
  auto c = exporter::CountOnnxModel(bytes);
  ASSERT_TRUE(c.IsOk());
  EXPECT_EQ(c->nodes_after, 16);
  EXPECT_EQ(c->value_info, 0);
  EXPECT_FALSE(exporter::SimplifyOnnxModel("not a model").IsOk());
}

// The counts of a written file.
exporter::SimplifyReport FileCounts(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto c = exporter::CountOnnxModel(ss.str());
  EXPECT_TRUE(c.IsOk()) << path;
  return c.IsOk() ? *c : exporter::SimplifyReport{};
}

// Node outputs that are not graph outputs, in a written file.
int64_t Intermediates(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(ss.str())) << path;
  std::set<std::string> outs, graph_outs;
  for (const auto& o : m.graph().output()) graph_outs.insert(o.name());
  for (const auto& n : m.graph().node()) {
    for (const auto& o : n.output()) {
      if (graph_outs.count(o) == 0) outs.insert(o);
    }
  }
  return static_cast<int64_t>(outs.size());
}

class SimplifyExportTest : public testing::KestrelCliTest {
 protected:
  app::ExportRequest Request(const std::string& name, bool simplify) const {
    app::ExportRequest req;
    req.model = kParity + "/yolov8n_shapes_p.pt";
    req.imgsz_h = req.imgsz_w = 320;
    req.simplify = simplify;
    req.verify_images = 2;
    req.output = (dir_ / name).string();
    return req;
  }
};

// FP32 at 320: the exporter emits no constant subgraph and no no-op, so the
// node count stays; shape inference adds value_info for every intermediate
// tensor; both files verify with identical differences to LibTorch (the same
// arithmetic).
TEST_F(SimplifyExportTest, Fp32SimplifyTrueAndFalseVerifyAlike) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  auto on = app::ExportModel(Env::Default(), Request("on.onnx", true));
  ASSERT_TRUE(on.IsOk()) << on.GetStatus().ToString();
  auto off = app::ExportModel(Env::Default(), Request("off.onnx", false));
  ASSERT_TRUE(off.IsOk()) << off.GetStatus().ToString();
  EXPECT_TRUE(on->verified) << on->verification_error;
  EXPECT_TRUE(off->verified) << off->verification_error;
  const exporter::SimplifyReport a = on->simplified, b = off->simplified;
  EXPECT_TRUE(on->simplify);
  EXPECT_FALSE(off->simplify);
  EXPECT_EQ(a.nodes_before, b.nodes_after);
  EXPECT_LE(a.nodes_after, a.nodes_before);
  EXPECT_EQ(b.value_info, 0);
  // Every node output but output0 is an intermediate with an inferred type.
  EXPECT_EQ(a.value_info, Intermediates(on->path));
  EXPECT_GT(a.value_info, a.nodes_after / 2);
  const exporter::SimplifyReport fa = FileCounts(on->path), fb = FileCounts(off->path);
  EXPECT_EQ(fa.nodes_after, a.nodes_after);
  EXPECT_EQ(fa.value_info, a.value_info);
  EXPECT_EQ(fa.initializers_after, a.initializers_after);
  EXPECT_EQ(fb.nodes_after, b.nodes_after);
  EXPECT_EQ(fb.value_info, 0);
  EXPECT_EQ(on->nodes, a.nodes_after);
  ASSERT_EQ(on->checks.size(), off->checks.size());
  for (size_t k = 0; k < on->checks.size(); ++k) {
    EXPECT_EQ(on->checks[k].ran, off->checks[k].ran);
    EXPECT_EQ(on->checks[k].max_abs_diff, off->checks[k].max_abs_diff) << on->checks[k].runtime;
  }
  const nlohmann::json j = app::ExportResultJson(*on)["simplify"];
  EXPECT_EQ(j["enabled"], true);
  EXPECT_EQ(j["value_info"], a.value_info);
  EXPECT_EQ(app::ExportResultJson(*off)["simplify"]["enabled"], false);
  EXPECT_NE(app::ExportResultText(*on).find("value_info from shape inference"), std::string::npos);
  std::cout << "FP32 320: simplify=true nodes " << a.nodes_before << " -> " << a.nodes_after
            << ", initializers " << a.initializers_before << " -> " << a.initializers_after << ", value_info "
            << a.value_info << "; simplify=false nodes " << b.nodes_after << ", value_info " << b.value_info
            << "; OpenCV " << on->checks[0].max_abs_diff << " both, ORT " << on->checks[1].max_abs_diff
            << "\n";
}

// nms=true (fixed): the tail's Shape of the score map is folded, its
// ConstantOfShape ([1, 3, 525] floats, 6.3 KB) stays a node.
TEST_F(SimplifyExportTest, NmsTailShapeIsFolded) {
  if (!fs::exists(kParity)) GTEST_SKIP() << "no ../shared reference val_parity";
  if (!app::LocateOnnxRuntime().unavailable.empty()) GTEST_SKIP() << "no ONNX Runtime";
  app::ExportRequest req = Request("nms.onnx", true);
  req.imgsz_h = req.imgsz_w = 160;
  req.nms = true;
  req.conf = 0.01;
  auto r = app::ExportModel(Env::Default(), req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(r->verified) << r->verification_error;
  EXPECT_TRUE(r->nms_check.passed) << r->nms_check.error;
  const exporter::SimplifyReport& s = r->simplified;
  EXPECT_EQ(s.folded, 1);
  EXPECT_EQ(s.kept_large, 1);
  EXPECT_EQ(s.nodes_after, s.nodes_before - 1);
  EXPECT_EQ(s.initializers_after, s.initializers_before + 1);
  EXPECT_GT(s.value_info, 0);
  std::cout << "nms=true 160: nodes " << s.nodes_before << " -> " << s.nodes_after << ", value_info "
            << s.value_info << ", " << r->nms_check.matched << " of " << r->nms_check.reference_boxes
            << " detections matched\n";
}

}  // namespace
}  // namespace kestrel
