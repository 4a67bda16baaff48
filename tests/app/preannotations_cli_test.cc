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

  testing::CliRun bad = Kestrel(Args("bad") + " format=voc");
  EXPECT_EQ(bad.code, 2) << bad.out;
  EXPECT_FALSE(fs::exists(dir_ / "runs/bad"));
}

TEST_F(PreannotationsCliTest, YoloFolderZipAndCocoHoldThePredictedBoxes) {
  testing::CliRun y = Kestrel(Args("y") + " format=yolo");
  ASSERT_EQ(y.code, 0) << y.out;
  const nlohmann::json p = Json(y);
  EXPECT_EQ(p["preannotations"]["files"],
            nlohmann::json::array({(dir_ / "runs/y/yolo").string(), (dir_ / "runs/y/yolo.zip").string()}));
  size_t boxes = 0;
  for (const nlohmann::json& im : p["images"]) {
    const std::string rel = fs::relative(im["source"].get<std::string>(), dir_ / "in").generic_string();
    const fs::path label = dir_ / "runs/y/yolo/labels/train" / fs::path(rel).replace_extension(".txt");
    std::ifstream in(label);
    ASSERT_TRUE(in.good()) << label;
    size_t lines = 0;
    int cls = -1;
    double cx = 0, cy = 0, w = 0, h = 0;
    while (in >> cls >> cx >> cy >> w >> h) {
      ASSERT_LT(lines, im["detections"].size());
      const nlohmann::json& d = im["detections"][lines];
      EXPECT_EQ(cls, d["class_id"].get<int>());
      const double iw = im["width"], ih = im["height"];
      EXPECT_NEAR((cx - w / 2) * iw, std::clamp(d["box_xyxy"][0].get<double>(), 0.0, iw), 1e-4 * iw);
      EXPECT_NEAR((cy + h / 2) * ih, std::clamp(d["box_xyxy"][3].get<double>(), 0.0, ih), 1e-4 * ih);
      ++lines;
    }
    EXPECT_EQ(lines, im["detections"].size());
    boxes += lines;
  }
  EXPECT_GT(boxes, 0u);
  EXPECT_TRUE(fs::exists(dir_ / "runs/y/yolo/data.yaml"));
  EXPECT_GT(fs::file_size(dir_ / "runs/y/yolo.zip"), 0u);

  const std::string coco_path = (dir_ / "c.json").string();
  testing::CliRun c = Kestrel(Args("c") + " format=coco out=" + coco_path);
  ASSERT_EQ(c.code, 0) << c.out;
  const nlohmann::json pc = Json(c);
  std::ifstream in(coco_path);
  const nlohmann::json coco = nlohmann::json::parse(in);
  size_t dets = 0;
  for (const nlohmann::json& im : pc["images"]) dets += im["detections"].size();
  ASSERT_EQ(coco["annotations"].size(), dets);
  ASSERT_EQ(coco["images"].size(), 3u);
  EXPECT_NEAR(coco["annotations"][0]["score"].get<double>(),
              pc["images"][0]["detections"].empty()
                  ? coco["annotations"][0]["score"].get<double>()
                  : pc["images"][0]["detections"][0]["confidence"].get<double>(),
              1e-6);
}

// `kestrel dataset predict NAME@vN`: the version's images are written into
// the run folder as images/<split>/<path> and every document names them so;
// `kestrel` hands the command to kestrel-torch.
TEST_F(PreannotationsCliTest, DatasetPredictWritesTheVersionsImagesAndDocuments) {
  ASSERT_EQ(Kestrel("dataset synth ds --images 4 --imgsz 64 --seed 3").code, 0);
  ASSERT_EQ(Kestrel("dataset import ds --name shapes").code, 0);
  const std::string common = "--json dataset predict shapes@v1 model=" + weights_ +
                             " project=" + (dir_ / "runs").string() + " imgsz=64 conf=0.001 max_det=3";
  testing::CliRun r = Kestrel(common + " name=ls format=label-studio ls_image_root=http://h/");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json p = Json(r);
  EXPECT_EQ(p["version"]["dataset"], "shapes");
  ASSERT_EQ(p["images"].size(), 4u);
  std::ifstream in((dir_ / "runs/ls/label_studio.json").string());
  const nlohmann::json tasks = nlohmann::json::parse(in);
  ASSERT_EQ(tasks.size(), 4u);
  for (size_t t = 0; t < 4; ++t) {
    const std::string src = p["images"][t]["source"];
    ASSERT_EQ(src.rfind((dir_ / "runs/ls/images/").string(), 0), 0u) << src;
    EXPECT_TRUE(fs::exists(src)) << "the image stays in the run folder";
    const std::string rel = fs::relative(src, dir_ / "runs/ls/images").generic_string();
    EXPECT_TRUE(rel.rfind("train/", 0) == 0 || rel.rfind("val/", 0) == 0) << rel;
    EXPECT_EQ(tasks[t]["data"]["image"], "http://h/" + rel);
  }
  testing::CliRun v = Kestrel(common + " name=cv format=cvat split=val");
  ASSERT_EQ(v.code, 0) << v.out;
  const nlohmann::json pv = Json(v);
  ASSERT_GT(pv["images"].size(), 0u);
  EXPECT_LT(pv["images"].size(), 4u) << "only the val split";
  EXPECT_TRUE(fs::exists(dir_ / "runs/cv/cvat_annotations.xml"));
  testing::CliRun none = Kestrel(common + " name=none");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_EQ(Json(none)["error"]["field"], "format");
  EXPECT_FALSE(fs::exists(dir_ / "runs/none"));
}

}  // namespace
}  // namespace kestrel
