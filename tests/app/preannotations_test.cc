// Pre-annotations out (issue 34, app/preannotations.h): Label Studio tasks
// and CVAT 1.1 XML checked field by field — one prediction per task holding
// every box, percent -> pixel round trip within 0.01 % of the image size,
// result ids unique across tasks, the uncertainty score, the labelling
// config's names, CVAT's meta labels and pixel boxes (parsed with pugixml),
// and the refusals naming their field. In memory: milliseconds.
#include "app/preannotations.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <pugixml.hpp>
#include <set>
#include <string>
#include <vector>

namespace kestrel::app {
namespace {

eval::Detection Det(float x1, float y1, float x2, float y2, float score, int cls) {
  eval::Detection d;
  d.box = {x1, y1, x2, y2};
  d.score = score;
  d.class_id = cls;
  return d;
}

PredictedImage Image(const std::string& source, int w, int h, std::vector<eval::Detection> dets) {
  PredictedImage im;
  im.source = source;
  im.width = w;
  im.height = h;
  im.detections = std::move(dets);
  return im;
}

class PreannotationsTest : public ::testing::Test {
 protected:
  std::vector<std::string> names_{"person", "car & bus", "dog"};
  // Odd sizes so percentages are not round numbers; a box past the border.
  std::vector<PredictedImage> images_{
      Image("in/a.jpg", 641, 479,
            {Det(10.25f, 20.5f, 300.75f, 400.125f, 0.91f, 0), Det(5, 6, 7, 8, 0.4f, 2)}),
      Image("in/sub/b c.png", 333, 217, {Det(-3, 1.5f, 340, 100.3f, 0.62f, 1)}),
      Image("in/empty.jpg", 64, 48, {}),
  };
  PreannotationOptions Options(const std::string& format) {
    PreannotationOptions o;
    o.format = format;
    o.source_root = "in";
    o.model_version = "yolov8n.pt";
    return o;
  }
};

TEST_F(PreannotationsTest, LabelStudioTasksHoldEveryBoxInOnePredictionInPercentOfTheOriginalImage) {
  PreannotationOptions o = Options("label-studio");
  o.ls_image_root = "https://data.example/imgs/";
  const nlohmann::json tasks = LabelStudioTasksJson(images_, names_, o);
  ASSERT_TRUE(tasks.is_array());
  ASSERT_EQ(tasks.size(), images_.size());  // one task per image
  std::set<std::string> ids;
  size_t boxes = 0;
  for (size_t t = 0; t < images_.size(); ++t) {
    const PredictedImage& im = images_[t];
    const nlohmann::json& task = tasks[t];
    ASSERT_EQ(task["predictions"].size(), 1u) << "one prediction per task (Label Studio shows one)";
    const nlohmann::json& pred = task["predictions"][0];
    EXPECT_EQ(pred["model_version"], "yolov8n.pt");
    ASSERT_EQ(pred["result"].size(), im.detections.size()) << "all boxes in the one prediction";
    float max_score = 0;
    for (size_t b = 0; b < im.detections.size(); ++b) {
      const eval::Detection& d = im.detections[b];
      const nlohmann::json& r = pred["result"][b];
      max_score = std::max(max_score, d.score);
      EXPECT_EQ(r["type"], "rectanglelabels");
      EXPECT_EQ(r["from_name"], "label");
      EXPECT_EQ(r["to_name"], "image");
      EXPECT_EQ(r["original_width"], im.width);
      EXPECT_EQ(r["original_height"], im.height);
      EXPECT_EQ(r["image_rotation"], 0);
      EXPECT_NEAR(r["score"].get<double>(), d.score, 1e-6);
      EXPECT_EQ(r["value"]["rotation"], 0);
      EXPECT_EQ(r["value"]["rectanglelabels"], nlohmann::json::array({names_[size_t(d.class_id)]}));
      EXPECT_TRUE(ids.insert(r["id"].get<std::string>()).second) << "duplicate result id " << r["id"];
      ++boxes;
      // Percent of the original image back to pixels, top-left corner;
      // the box clipped to the image first.
      const double x = r["value"]["x"], y = r["value"]["y"], w = r["value"]["width"],
                   h = r["value"]["height"];
      const double x1 = std::clamp(double(d.box.x1), 0.0, double(im.width));
      const double x2 = std::clamp(double(d.box.x2), 0.0, double(im.width));
      const double y1 = std::clamp(double(d.box.y1), 0.0, double(im.height));
      const double y2 = std::clamp(double(d.box.y2), 0.0, double(im.height));
      const double tol_x = 1e-4 * im.width, tol_y = 1e-4 * im.height;  // 0.01 % of the image size
      EXPECT_NEAR(x / 100 * im.width, x1, tol_x);
      EXPECT_NEAR(y / 100 * im.height, y1, tol_y);
      EXPECT_NEAR((x + w) / 100 * im.width, x2, tol_x);
      EXPECT_NEAR((y + h) / 100 * im.height, y2, tol_y);
      EXPECT_GE(x, 0);
      EXPECT_LE(x + w, 100 + 1e-9);
    }
    // The image's uncertainty: 1 - the highest box score, 1 without boxes.
    EXPECT_NEAR(pred["score"].get<double>(), im.detections.empty() ? 1.0 : 1.0 - max_score, 1e-6);
  }
  EXPECT_EQ(boxes, 3u);
  EXPECT_EQ(ids.size(), 3u);
  EXPECT_EQ(tasks[0]["data"]["image"], "https://data.example/imgs/a.jpg");
  EXPECT_EQ(tasks[1]["data"]["image"], "https://data.example/imgs/sub/b%20c.png");
  // The clipped box of b: x from 0 to the right border.
  EXPECT_DOUBLE_EQ(tasks[1]["predictions"][0]["result"][0]["value"]["x"].get<double>(), 0.0);
  EXPECT_NEAR(tasks[1]["predictions"][0]["result"][0]["value"]["width"].get<double>(), 100.0, 1e-9);
}

TEST_F(PreannotationsTest, LabelStudioNamesAndLocalFilesDefaultAreConfigurable) {
  PreannotationOptions o = Options("label-studio");
  o.ls_from_name = "bbox";
  o.ls_to_name = "img";
  const nlohmann::json tasks = LabelStudioTasksJson(images_, names_, o);
  const nlohmann::json& r = tasks[0]["predictions"][0]["result"][0];
  EXPECT_EQ(r["from_name"], "bbox");
  EXPECT_EQ(r["to_name"], "img");
  // No ls_image_root: Label Studio's local-files URL of the absolute path.
  std::string abs = std::filesystem::absolute("in/sub/b c.png").lexically_normal().generic_string().substr(1);
  std::string encoded;
  for (char c : abs) encoded += c == ' ' ? std::string("%20") : std::string(1, c);
  EXPECT_EQ(tasks[1]["data"]["image"], "/data/local-files/?d=" + encoded);

  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_string(LabelStudioConfigXml(names_, o).c_str()));
  pugi::xml_node view = doc.child("View");
  EXPECT_STREQ(view.child("Image").attribute("name").value(), "img");
  EXPECT_STREQ(view.child("Image").attribute("value").value(), "$image");
  pugi::xml_node labels = view.child("RectangleLabels");
  EXPECT_STREQ(labels.attribute("name").value(), "bbox");
  EXPECT_STREQ(labels.attribute("toName").value(), "img");
  std::vector<std::string> values;
  for (pugi::xml_node l : labels.children("Label")) values.push_back(l.attribute("value").value());
  EXPECT_EQ(values, names_);  // every class, escaped and read back ("car & bus")
}

TEST_F(PreannotationsTest, CvatXmlHasMetaLabelsAndPixelBoxesPerImage) {
  const PreannotationOptions o = Options("cvat");
  pugi::xml_document doc;
  ASSERT_TRUE(doc.load_string(CvatXml(images_, names_, o).c_str()));
  pugi::xml_node root = doc.child("annotations");
  EXPECT_STREQ(root.child_value("version"), "1.1");
  pugi::xml_node task = root.child("meta").child("task");
  EXPECT_STREQ(task.child_value("size"), "3");
  std::vector<std::string> labels;
  for (pugi::xml_node l : task.child("labels").children("label")) labels.push_back(l.child_value("name"));
  EXPECT_EQ(labels, names_);
  size_t i = 0;
  for (pugi::xml_node img : root.children("image")) {
    ASSERT_LT(i, images_.size());
    const PredictedImage& im = images_[i];
    EXPECT_EQ(img.attribute("id").as_int(), int(i));
    EXPECT_EQ(img.attribute("width").as_int(), im.width);
    EXPECT_EQ(img.attribute("height").as_int(), im.height);
    size_t b = 0;
    for (pugi::xml_node box : img.children("box")) {
      ASSERT_LT(b, im.detections.size());
      const eval::Detection& d = im.detections[b];
      EXPECT_EQ(std::string(box.attribute("label").value()), names_[size_t(d.class_id)]);
      EXPECT_STREQ(box.attribute("source").value(), "auto");
      EXPECT_STREQ(box.attribute("occluded").value(), "0");
      const double tol_x = 1e-4 * im.width, tol_y = 1e-4 * im.height;
      EXPECT_NEAR(box.attribute("xtl").as_double(), std::clamp(double(d.box.x1), 0.0, double(im.width)),
                  tol_x);
      EXPECT_NEAR(box.attribute("ytl").as_double(), std::clamp(double(d.box.y1), 0.0, double(im.height)),
                  tol_y);
      EXPECT_NEAR(box.attribute("xbr").as_double(), std::clamp(double(d.box.x2), 0.0, double(im.width)),
                  tol_x);
      EXPECT_NEAR(box.attribute("ybr").as_double(), std::clamp(double(d.box.y2), 0.0, double(im.height)),
                  tol_y);
      ++b;
    }
    EXPECT_EQ(b, im.detections.size());
    ++i;
  }
  EXPECT_EQ(i, images_.size());
  EXPECT_STREQ(root.find_child_by_attribute("image", "id", "1").attribute("name").value(), "sub/b c.png");
}

TEST_F(PreannotationsTest, BadOptionsAndFramesAreRefusedNamingTheField) {
  PreannotationOptions o = Options("voc");
  Status s = ValidatePreannotationOptions(o);
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Where().field, "format");
  o.format = "label-studio";
  o.ls_from_name = "a b";
  s = ValidatePreannotationOptions(o);
  EXPECT_EQ(s.Where().field, "ls_from_name");
  o.ls_from_name = "label";
  o.ls_to_name = "";
  EXPECT_EQ(ValidatePreannotationOptions(o).Where().field, "ls_to_name");

  PredictResult r;
  r.dir = ::testing::TempDir();
  r.images = {images_[0]};
  r.images[0].frame = 3;
  r.predicted = 1;
  Result<std::vector<std::string>> w = WritePreannotations(Env::Default(), r, Options("cvat"));
  ASSERT_FALSE(w.IsOk());
  EXPECT_EQ(w.GetStatus().Where().field, "format");
  r.images.clear();  // stream=true: predicted but none kept
  w = WritePreannotations(Env::Default(), r, Options("cvat"));
  ASSERT_FALSE(w.IsOk());
  EXPECT_EQ(w.GetStatus().Where().field, "format");
}

TEST_F(PreannotationsTest, WritesTasksWithTheConfigBesideThem) {
  const std::string dir = ::testing::TempDir() + "/preannotations_write";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  PredictResult r;
  r.dir = dir;
  r.names = names_;
  r.images = images_;
  r.predicted = int64_t(images_.size());
  PreannotationOptions o = Options("label-studio");
  o.out = dir + "/tasks.json";
  Result<std::vector<std::string>> w = WritePreannotations(Env::Default(), r, o);
  ASSERT_TRUE(w.IsOk()) << w.GetStatus().ToString();
  EXPECT_EQ(*w, (std::vector<std::string>{dir + "/tasks.json", dir + "/tasks.label_config.xml"}));
  Result<std::string> text = Env::Default().ReadFile(dir + "/tasks.json");
  ASSERT_TRUE(text.IsOk());
  EXPECT_EQ(nlohmann::json::parse(*text), LabelStudioTasksJson(images_, names_, o));
  w = WritePreannotations(Env::Default(), r, Options("cvat"));
  ASSERT_TRUE(w.IsOk()) << w.GetStatus().ToString();
  EXPECT_EQ(*w, std::vector<std::string>{dir + "/cvat_annotations.xml"});
  std::filesystem::remove_all(dir);
}

// A zip's local entries read back (STORED only): name -> data, checking each
// entry's CRC and that the central directory and end record agree.
std::vector<std::pair<std::string, std::string>> ReadStoredZip(const std::string& zip) {
  auto u16 = [&](size_t at) { return uint32_t(uint8_t(zip[at])) | uint32_t(uint8_t(zip[at + 1])) << 8; };
  auto u32 = [&](size_t at) { return u16(at) | u16(at + 2) << 16; };
  std::vector<std::pair<std::string, std::string>> out;
  size_t at = 0;
  while (at + 30 <= zip.size() && u32(at) == 0x04034b50u) {
    EXPECT_EQ(u16(at + 8), 0u) << "stored";
    const uint32_t crc = u32(at + 14), size = u32(at + 18), name_len = u16(at + 26), extra = u16(at + 28);
    std::string name = zip.substr(at + 30, name_len);
    std::string data = zip.substr(at + 30 + name_len + extra, size);
    uint32_t c = 0xFFFFFFFFu;  // bitwise CRC-32, independent of the writer's table
    for (unsigned char b : data) {
      c ^= b;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    EXPECT_EQ(c ^ 0xFFFFFFFFu, crc) << name;
    out.emplace_back(std::move(name), std::move(data));
    at += 30 + name_len + extra + size;
  }
  EXPECT_EQ(u32(at), 0x02014b50u) << "central directory after the entries";
  const size_t eocd = zip.size() - 22;
  EXPECT_EQ(u32(eocd), 0x06054b50u);
  EXPECT_EQ(u16(eocd + 10), out.size());
  EXPECT_EQ(u32(eocd + 16), at) << "central directory offset";
  return out;
}

TEST_F(PreannotationsTest, YoloTreeIsUltralyticsDetection10WithNormalizedClippedBoxes) {
  const PreannotationOptions o = Options("yolo");
  Result<std::vector<std::pair<std::string, std::string>>> tree = YoloLabelTree(images_, names_, o);
  ASSERT_TRUE(tree.IsOk()) << tree.GetStatus().ToString();
  ASSERT_EQ(tree->size(), 5u);
  EXPECT_EQ((*tree)[0].first, "data.yaml");
  EXPECT_EQ((*tree)[0].second,
            "path: ./\ntrain: train.txt\nnames:\n  0: \"person\"\n  1: \"car & bus\"\n  2: \"dog\"\n");
  EXPECT_EQ((*tree)[1].first, "train.txt");
  EXPECT_EQ((*tree)[1].second, "images/train/a.jpg\nimages/train/sub/b c.png\nimages/train/empty.jpg\n");
  EXPECT_EQ((*tree)[2].first, "labels/train/a.txt");
  EXPECT_EQ((*tree)[3].first, "labels/train/sub/b c.txt");
  EXPECT_EQ((*tree)[4].first, "labels/train/empty.txt");
  EXPECT_EQ((*tree)[4].second, "") << "an image without boxes has an empty label file";
  // a.jpg's first box: (10.25, 20.5)-(300.75, 400.125) in 641x479.
  const std::string first = (*tree)[2].second.substr(0, (*tree)[2].second.find('\n'));
  char buf[128];
  std::snprintf(buf, sizeof buf, "0 %.6f %.6f %.6f %.6f", (10.25 + 300.75) / 2 / 641,
                (20.5 + 400.125) / 2 / 479, (300.75 - 10.25) / 641, (400.125 - 20.5) / 479);
  EXPECT_EQ(first, buf) << "5 columns, no score";
  // b's box is clipped to the image: x from 0 to 333, so cx 0.5, w 1.
  EXPECT_EQ((*tree)[3].second.substr(0, 20), "1 0.500000 0.234562 ");

  // Two images that would share labels/train/x.txt are refused.
  std::vector<PredictedImage> clash = {images_[0], images_[0]};
  clash[1].source = "in/a.png";
  Result<std::vector<std::pair<std::string, std::string>>> bad = YoloLabelTree(clash, names_, o);
  ASSERT_FALSE(bad.IsOk());
  EXPECT_EQ(bad.GetStatus().Where().field, "format");

  // The zip holds the same entries, in order.
  Result<std::string> zip = StoredZip(*tree);
  ASSERT_TRUE(zip.IsOk());
  EXPECT_EQ(ReadStoredZip(*zip), *tree);
}

TEST_F(PreannotationsTest, CocoJsonCarriesPixelBoxesAndScores) {
  const nlohmann::json j = CocoPredictionsJson(images_, names_, Options("coco"));
  ASSERT_EQ(j["categories"].size(), 3u);
  EXPECT_EQ(j["categories"][1], (nlohmann::json{{"id", 2}, {"name", "car & bus"}}));
  ASSERT_EQ(j["images"].size(), 3u);
  EXPECT_EQ(j["images"][1]["file_name"], "sub/b c.png");
  EXPECT_EQ(j["images"][1]["id"], 2);
  EXPECT_EQ(j["images"][1]["width"], 333);
  ASSERT_EQ(j["annotations"].size(), 3u);
  const nlohmann::json& a = j["annotations"][0];
  EXPECT_EQ(a["image_id"], 1);
  EXPECT_EQ(a["category_id"], 1);
  EXPECT_NEAR(a["score"].get<double>(), 0.91, 1e-6);
  EXPECT_NEAR(a["bbox"][0].get<double>(), 10.25, 1e-4);
  EXPECT_NEAR(a["bbox"][2].get<double>(), 300.75 - 10.25, 1e-4);
  const nlohmann::json& b = j["annotations"][2];  // b's box, clipped
  EXPECT_EQ(b["image_id"], 2);
  EXPECT_EQ(b["category_id"], 2);
  EXPECT_DOUBLE_EQ(b["bbox"][0].get<double>(), 0.0);
  EXPECT_NEAR(b["bbox"][2].get<double>(), 333.0, 1e-4);
}

TEST_F(PreannotationsTest, WritesYoloFolderAndZipAndRefusesAFolderInUse) {
  const std::string dir = ::testing::TempDir() + "/preannotations_yolo";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  PredictResult r;
  r.dir = dir;
  r.names = names_;
  r.images = images_;
  r.predicted = int64_t(images_.size());
  Result<std::vector<std::string>> w = WritePreannotations(Env::Default(), r, Options("yolo"));
  ASSERT_TRUE(w.IsOk()) << w.GetStatus().ToString();
  EXPECT_EQ(*w, (std::vector<std::string>{dir + "/yolo", dir + "/yolo.zip"}));
  Result<std::string> label = Env::Default().ReadFile(dir + "/yolo/labels/train/sub/b c.txt");
  ASSERT_TRUE(label.IsOk());
  EXPECT_EQ(label->substr(0, 2), "1 ");
  Result<std::string> zip = Env::Default().ReadFile(dir + "/yolo.zip");
  ASSERT_TRUE(zip.IsOk());
  EXPECT_EQ(ReadStoredZip(*zip).size(), 5u);
  // A second run onto the same folder is refused; the folder is unchanged.
  w = WritePreannotations(Env::Default(), r, Options("yolo"));
  EXPECT_FALSE(w.IsOk());
  w = WritePreannotations(Env::Default(), r, Options("coco"));
  ASSERT_TRUE(w.IsOk()) << w.GetStatus().ToString();
  EXPECT_EQ(*w, std::vector<std::string>{dir + "/coco_annotations.json"});
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kestrel::app
