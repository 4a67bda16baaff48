// Issue 28 item 7, black box: `model=custom.yaml` whose graph is none of the
// built-in families (the reference's yolov8-p2.yaml; a C3/C3k2/C2PSA graph
// with Detect on a backbone layer) trains, and with the yaml file deleted
// its weights alone validate, predict, export to ONNX (verified against
// LibTorch) and register under the graph's name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_fixture.h"
#include "model/custom_graphs.h"

namespace {

using kestrel::testing::CliRun;

class CustomGraphCliTest : public kestrel::testing::KestrelCliTest {
 protected:
  // Trains `yaml_text` as `file` for one tiny epoch, deletes the yaml and
  // returns the run's weights folder.
  std::filesystem::path TrainAndForget(const std::string& file, const char* yaml_text,
                                       const std::string& name) {
    const std::filesystem::path yaml = std::filesystem::path(dir_) / file;
    std::ofstream(yaml) << yaml_text;
    CliRun train = Kestrel("--json train data=ds/data.yaml model=" + yaml.string() +
                           " imgsz=64 batch=4 workers=1 threads=1 epochs=1 warmup_epochs=0 plots=false "
                           "project=runs name=" +
                           name);
    EXPECT_EQ(train.code, 0) << train.out;
    std::filesystem::remove(yaml);  // from here on, only the weights know the graph
    std::filesystem::path weights;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_)) {
      if (e.path().filename() == "best.safetensors" && e.path().string().find(name) != std::string::npos)
        weights = e.path().parent_path();
    }
    return weights;
  }
};

#ifdef KESTREL_CLI_WITH_TORCH
TEST_F(CustomGraphCliTest, CustomGraphsTrainValidatePredictExportFromTheWeightsAlone) {
  ASSERT_EQ(Kestrel("dataset synth ds --images 12 --imgsz 64 --seed 5").code, 0);
  struct Variant {
    std::string file;
    const char* text;
    std::string name;
    std::string shown;  // models show's line
  };
  const Variant variants[] = {
      {"yolov8-p2.yaml", kestrel::testing::kP2Yaml, "p2",
       "model: yolov8-p2 (custom graph, 29 layers, strides 4/8/16/32)"},
      {"mixed.yaml", kestrel::testing::kMixedYaml, "mixed",
       "model: mixed (custom graph, 17 layers, strides 8/16/32)"},
  };
  for (const Variant& v : variants) {
    const std::filesystem::path weights = TrainAndForget(v.file, v.text, v.name);
    ASSERT_FALSE(weights.empty()) << v.name;
    const std::string best = (weights / "best.safetensors").string();
    EXPECT_TRUE(std::filesystem::exists(weights / "best.pt")) << "the .pt writer takes the custom tree";

    CliRun val = Kestrel("--json val model=" + best + " data=ds/data.yaml split=val imgsz=64");
    ASSERT_EQ(val.code, 0) << val.out;
    EXPECT_TRUE(Json(val)["result"]["metrics"].contains("map5095")) << val.out;

    CliRun predict = Kestrel("--json predict model=" + best + " source=ds/images/val imgsz=64 conf=0.001");
    ASSERT_EQ(predict.code, 0) << predict.out;

    CliRun onnx = Kestrel("--json export model=" + best + " format=onnx imgsz=64 output=" + v.name + ".onnx");
    ASSERT_EQ(onnx.code, 0) << onnx.out;
    EXPECT_EQ(Json(onnx)["verification"]["verified"], true) << onnx.out;
    EXPECT_EQ(Json(onnx)["arch"], v.file.substr(0, v.file.find('.'))) << "the graph's name";

    ASSERT_EQ(Kestrel("models register " + best + " --name " + v.name).code, 0);
    CliRun show = Kestrel("models show " + v.name);
    ASSERT_EQ(show.code, 0) << show.out;
    EXPECT_NE(show.out.find(v.shown), std::string::npos) << show.out;
  }
}
#endif

}  // namespace
