// Issue 28 item 7: a training checkpoint of a custom model graph carries the
// graph (metadata `graph`, inside the checksum), so a resume rebuilds it
// without the model yaml; a built-in family's checkpoint carries none.
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <fstream>

#include "model/custom_graphs.h"
#include "model/model_yaml.h"
#include "train/checkpoint.h"

namespace kestrel::train {
namespace {

std::string Checkpoint(model::YoloImpl& m) {
  ModelEma ema(m);
  torch::optim::SGD sgd(m.parameters(), torch::optim::SGDOptions(0.01));
  CheckpointState state;
  auto bytes = SerializeCheckpoint(state, m, ema, sgd);
  EXPECT_TRUE(bytes.IsOk()) << bytes.GetStatus().ToString();
  return bytes.IsOk() ? *bytes : std::string();
}

TEST(CheckpointGraphTest, CustomGraphTravelsInTheCheckpoint) {
  const std::string yaml = ::testing::TempDir() + "/ckpt-p2.yaml";
  std::ofstream(yaml) << kestrel::testing::kP2Yaml;
  auto read = model::ReadModelYaml(yaml);
  ASSERT_TRUE(read.IsOk()) << read.GetStatus().ToString();
  model::ModelSpec spec = read->spec;
  spec.nc = 2;
  model::Yolo m = model::CreateModel(spec).Value();
  const std::string bytes = Checkpoint(*m);

  auto parsed = ParseCheckpoint(bytes, "last.ckpt");
  ASSERT_TRUE(parsed.IsOk()) << parsed.GetStatus().ToString();
  auto graph = CheckpointGraph(*parsed, 2, "last.ckpt");
  ASSERT_TRUE(graph.IsOk()) << graph.GetStatus().ToString();
  ASSERT_TRUE(graph->has_value());
  EXPECT_EQ((*graph)->Name(), "ckpt-p2");
  EXPECT_EQ(model::BuildLayerPlan(**graph).back().detect_strides, (std::vector<int>{4, 8, 16, 32}));
  EXPECT_EQ(model::SummarizeModel(**graph).params, model::SummarizeModel(spec).params);

  // The graph is inside the checksum: an edited one is refused.
  SafeTensorFile edited = parsed->file;
  std::string& g = edited.metadata.at("graph");
  g.replace(g.find("[64,3,2]"), 8, "[96,3,2]");
  EXPECT_EQ(ParseCheckpoint(SerializeSafeTensors(edited), "last.ckpt").GetStatus().Code(),
            StatusCode::kCorruption);

  // A built-in family's checkpoint carries no graph (and hashes as before).
  model::Yolo t = model::CreateModel("t", 2).Value();
  auto plain = ParseCheckpoint(Checkpoint(*t), "t.ckpt");
  ASSERT_TRUE(plain.IsOk());
  EXPECT_EQ(plain->file.metadata.count("graph"), 0u);
  EXPECT_FALSE(CheckpointGraph(*plain, 2, "t.ckpt")->has_value());
}

}  // namespace
}  // namespace kestrel::train
