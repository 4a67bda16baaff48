// `kestrel predict format=label-studio|cvat` (issue 34, pre-annotations out):
// the documents the CLI writes hold exactly the boxes `predict --json`
// reports — one Label Studio task per image with one prediction of all its
// boxes in percent of the image, the labelling config beside the tasks, a
// CVAT 1.1 image per source image with the same pixel boxes — and a bad
// format= is refused before anything runs. The reference weights at imgsz
// 64 on three small images: about a second.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <pugixml.hpp>
#include <string>

#include "../cli/cli_fixture.h"

namespace kestrel {
namespace {

namespace fs = std::filesystem;

class PreannotationsCliTest : public testing::KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    weights_ = std::string(KESTREL_SHARED_DIR) + "/reference/yolov8n_nc3_weights.safetensors";
    if (!fs::exists(weights_)) GTEST_SKIP() << "no ../shared reference weights";
    cv::RNG rng(7);
    const int sizes[3][2] = {{80, 60}, {64, 96}, {50, 50}};
    for (int i = 0; i < 3; ++i) {
      cv::Mat img(sizes[i][1], sizes[i][0], CV_8UC3);
      rng.fill(img, cv::RNG::UNIFORM, 0, 255);
      fs::create_directories(dir_ / "in/sub");
      const fs::path p = dir_ / (i == 2 ? "in/sub/c.jpg" : "in/" + std::string(1, char('a' + i)) + ".jpg");
      ASSERT_TRUE(cv::imwrite(p.string(), img));
    }
  }
  std::string Args(const std::string& name) {
    // A low conf so the untrained-on-noise weights still give boxes.
    return "--json predict model=" + weights_ + " source=" + (dir_ / "in").string() +
           " project=" + (dir_ / "runs").string() + " name=" + name + " imgsz=64 conf=0.001 max_det=5";
  }
  std::string weights_;
};

TEST_F(PreannotationsCliTest, LabelStudioAndCvatFilesHoldThePredictedBoxes) {
  testing::CliRun ls = Kestrel(Args("ls") + " format=label-studio ls_image_root=http://h/img/");
  ASSERT_EQ(ls.code, 0) << ls.out;
  const nlohmann::json p = Json(ls);
  ASSERT_EQ(p["images"].size(), 3u);
  const std::string tasks_path = (dir_ / "runs/ls/label_studio.json").string();
  EXPECT_EQ(p["preannotations"]["files"],
            nlohmann::json::array({tasks_path, (dir_ / "runs/ls/label_studio.label_config.xml").string()}));
  std::ifstream in(tasks_path);
  const nlohmann::json tasks = nlohmann::json::parse(in);
  ASSERT_EQ(tasks.size(), 3u);
  size_t boxes = 0;
  for (size_t t = 0; t < 3; ++t) {
    const nlohmann::json& im = p["images"][t];
    const std::string rel = fs::relative(im["source"].get<std::string>(), dir_ / "in").generic_string();
    EXPECT_EQ(tasks[t]["data"]["image"], "http://h/img/" + rel);
    ASSERT_EQ(tasks[t]["predictions"].size(), 1u);
    const nlohmann::json& result = tasks[t]["predictions"][0]["result"];
    ASSERT_EQ(result.size(), im["detections"].size());
    const double w = im["width"], h = im["height"];
    for (size_t b = 0; b < result.size(); ++b) {
      const nlohmann::json& d = im["detections"][b];
      const nlohmann::json& v = result[b]["value"];
      EXPECT_EQ(v["rectanglelabels"][0], d["name"]);
      EXPECT_NEAR(v["x"].get<double>() / 100 * w, std::clamp(d["box_xyxy"][0].get<double>(), 0.0, w),
                  1e-4 * w);
      EXPECT_NEAR(v["y"].get<double>() / 100 * h, std::clamp(d["box_xyxy"][1].get<double>(), 0.0, h),
                  1e-4 * h);
      ++boxes;
    }
  }
  EXPECT_GT(boxes, 0u) << "the test needs boxes to compare";
  EXPECT_TRUE(fs::exists(dir_ / "runs/ls/label_studio.label_config.xml"));

  const std::string cvat_path = (dir_ / "out.xml").string();
  testing::CliRun cvat = Kestrel(Args("cvat") + " format=cvat out=" + cvat_path);
  ASSERT_EQ(cvat.code, 0) << cvat.out;
  const nlohmann::json pc = Json(cvat);
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_file(cvat_path.c_str()));
  size_t i = 0;
  for (pugi::xml_node img : doc.child("annotations").children("image")) {
    ASSERT_LT(i, pc["images"].size());
    EXPECT_EQ(size_t(std::distance(img.children("box").begin(), img.children("box").end())),
              pc["images"][i]["detections"].size());
    ++i;
  }
  EXPECT_EQ(i, 3u);
  EXPECT_STREQ(doc.child("annotations").find_child_by_attribute("image", "id", "2").attribute("name").value(),
               "sub/c.jpg");

  testing::CliRun bad = Kestrel(Args("bad") + " format=yolo");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_FALSE(fs::exists(dir_ / "runs/bad"));
}

}  // namespace
}  // namespace kestrel
