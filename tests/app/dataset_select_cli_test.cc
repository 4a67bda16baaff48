// `kestrel dataset select` end to end (issue 34, "which images to label
// next"): `kestrel dataset synth` makes a tiny unlabelled pool, the
// reference weights at imgsz 64 predict it, and the command's picks, the
// kept per-image predictions and the written CVAT / Label Studio tasks
// agree: uncertainty picks the images whose best box is lowest, each task
// holds that image's boxes, a seeded random selection repeats, and a bad
// key is a usage error that writes nothing. A couple of seconds.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <pugixml.hpp>
#include <set>
#include <string>
#include <vector>

#include "../cli/cli_fixture.h"

namespace kestrel {
namespace {

namespace fs = std::filesystem;

class DatasetSelectCliTest : public testing::KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    weights_ = std::string(KESTREL_SHARED_DIR) + "/reference/yolov8n_nc3_weights.safetensors";
    if (!fs::exists(weights_)) GTEST_SKIP() << "no ../shared reference weights";
    testing::CliRun synth = Kestrel("dataset synth " + (dir_ / "synth").string() +
                                    " --images 12 --classes 3 --imgsz 64 --seed 5");
    ASSERT_EQ(synth.code, 0) << synth.out;
    pool_ = (dir_ / "synth/images/train").string();
  }
  std::string Args(const std::string& extra) {
    // A low conf so the weights give boxes on these images.
    return "--json dataset select pool=" + pool_ + " model=" + weights_ +
           " imgsz=64 conf=0.001 pre_conf=0.001 max_det=5 " + extra;
  }
  static nlohmann::json ReadJson(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
  }
  std::string weights_, pool_;
};

TEST_F(DatasetSelectCliTest, UncertaintyPicksTheLowestBestScoresAsCvatTasks) {
  const fs::path out = dir_ / "sel";
  testing::CliRun r = Kestrel(Args("strategy=uncertainty budget=3 format=cvat out=" + out.string()));
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = Json(r);
  ASSERT_EQ(j["selected"].size(), 3u);
  const size_t pool = j["pool_images"].get<size_t>();
  EXPECT_EQ(pool, 9u);  // 12 images, 3 of them in val

  // Every pool image's kept predictions: the best box score per image.
  std::map<std::string, nlohmann::json> predicted;  // image name -> its predictions JSON
  for (const auto& e : fs::directory_iterator(out / "predictions")) {
    const nlohmann::json p = ReadJson(e.path());
    predicted[fs::path(p["source"].get<std::string>()).filename().string()] = p;
  }
  ASSERT_EQ(predicted.size(), pool);
  std::vector<double> uncertainty;
  for (const auto& [name, p] : predicted) {
    double best = 0;
    for (const nlohmann::json& d : p["detections"]) best = std::max(best, d["confidence"].get<double>());
    uncertainty.push_back(p["detections"].empty() ? 1.0 : 1.0 - best);
  }
  std::sort(uncertainty.rbegin(), uncertainty.rend());
  for (size_t k = 0; k < 3; ++k) {
    const nlohmann::json& s = j["selected"][k];
    EXPECT_NEAR(s["score"].get<double>(), uncertainty[k], 1e-5) << s;
    const nlohmann::json& p = predicted.at(s["image"].get<std::string>());
    EXPECT_EQ(s["boxes"].get<size_t>(), p["detections"].size());
  }

  // The CVAT document: the three picks in pick order, each with its boxes.
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_file((out / "cvat_annotations.xml").c_str()));
  size_t i = 0;
  size_t boxes = 0;
  for (pugi::xml_node img : doc.child("annotations").children("image")) {
    ASSERT_LT(i, 3u);
    const nlohmann::json& s = j["selected"][i];
    EXPECT_EQ(std::string(img.attribute("name").value()), s["image"].get<std::string>());
    const size_t n = size_t(std::distance(img.children("box").begin(), img.children("box").end()));
    EXPECT_EQ(n, s["boxes"].get<size_t>());
    boxes += n;
    ++i;
  }
  EXPECT_EQ(i, 3u);
  EXPECT_GT(boxes, 0u) << "the test needs boxes to compare";
  EXPECT_EQ(j["files"][0], (out / "cvat_annotations.xml").string());
  EXPECT_EQ(ReadJson(out / "selection.json"), j);
  std::ifstream csv(out / "selection.csv");
  const size_t lines = size_t(std::count(std::istreambuf_iterator<char>(csv), {}, '\n'));
  EXPECT_EQ(lines, 4u);  // header + 3 picks
}

// The two strategies that need more than a box's score from the network:
// margin reads the runner-up class at each box's anchor (DecodeYoloOutput),
// diversity embedding=model the pooled features of LibTorch weights, here
// measured from a folder of already labelled images.
TEST_F(DatasetSelectCliTest, MarginAndModelEmbeddingDiversityFromRealWeights) {
  testing::CliRun m = Kestrel(Args("strategy=margin budget=3 format=coco out=" + (dir_ / "m").string()));
  ASSERT_EQ(m.code, 0) << m.out;
  const nlohmann::json jm = Json(m);
  ASSERT_EQ(jm["selected"].size(), 3u);
  double last = 2;
  for (const nlohmann::json& s : jm["selected"]) {
    EXPECT_NE(s["reason"].get<std::string>().find("for the next)"), std::string::npos) << s;
    EXPECT_LE(s["score"].get<double>(), last);  // best first
    last = s["score"].get<double>();
  }
  // The labelled folder: two of the synthetic set's val images.
  fs::create_directories(dir_ / "labelled");
  int copied = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "synth/images/val")) {
    if (copied++ < 2) fs::copy_file(e.path(), dir_ / "labelled" / e.path().filename());
  }
  ASSERT_GE(copied, 2) << "the synthetic set has val images";
  testing::CliRun d = Kestrel(Args("strategy=diversity embedding=model budget=4 format=yolo labelled=" +
                                   (dir_ / "labelled").string() + " out=" + (dir_ / "d").string()));
  ASSERT_EQ(d.code, 0) << d.out;
  const nlohmann::json jd = Json(d);
  ASSERT_EQ(jd["selected"].size(), 4u);
  EXPECT_EQ(jd["embedding"], "model");
  std::set<std::string> seen;
  for (const nlohmann::json& s : jd["selected"]) {
    seen.insert(s["image"].get<std::string>());
    EXPECT_NE(s["reason"].get<std::string>().find("embedding distance"), std::string::npos) << s;
    EXPECT_NE(s["reason"].get<std::string>().find("labelled or picked"), std::string::npos) << s;
    EXPECT_GT(s["score"].get<double>(), 0);
    EXPECT_LE(s["score"].get<double>(), 2.0);  // unit vectors
  }
  EXPECT_EQ(seen.size(), 4u);
}

TEST_F(DatasetSelectCliTest, SeededRandomRepeatsAndBadKeysWriteNothing) {
  const std::string common = "strategy=random seed=4 budget=4 format=label-studio ls_image_root=http://h/ ";
  testing::CliRun a = Kestrel(Args(common + "out=" + (dir_ / "r1").string()));
  testing::CliRun b = Kestrel(Args(common + "out=" + (dir_ / "r2").string()));
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  const nlohmann::json ja = Json(a), jb = Json(b);
  ASSERT_EQ(ja["selected"].size(), 4u);
  const nlohmann::json tasks = ReadJson(dir_ / "r1/label_studio.json");
  ASSERT_EQ(tasks.size(), 4u);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(ja["selected"][k]["image"], jb["selected"][k]["image"]);
    EXPECT_EQ(tasks[k]["data"]["image"], "http://h/" + ja["selected"][k]["image"].get<std::string>());
    EXPECT_EQ(tasks[k]["predictions"][0]["result"].size(), ja["selected"][k]["boxes"].get<size_t>());
  }

  // (Each start of kestrel-torch costs ~1 s: the other bad keys are the
  // hostile-argument cases and kestrel_app_dataset_select_tests.)
  for (const char* bad : {"budget=0", "strategy=coreset budget=2"}) {
    testing::CliRun r = Kestrel(Args(std::string(bad) + " out=" + (dir_ / "bad").string()));
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.out;
    EXPECT_FALSE(fs::exists(dir_ / "bad")) << bad;
  }
}

}  // namespace
}  // namespace kestrel
