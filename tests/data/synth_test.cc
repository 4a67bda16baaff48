#include "data/synth.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <opencv2/imgcodecs.hpp>
#include <set>
#include <sstream>

#include "core/fault_env.h"
#include "core/hash.h"

namespace kestrel::data {
namespace {

namespace fs = std::filesystem;

class SynthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kestrel_synth_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Out(const std::string& name) { return (dir_ / name).string(); }

  // Relative path -> SHA-256 of every file under root.
  static std::map<std::string, std::string> Digests(const std::string& root) {
    std::map<std::string, std::string> out;
    for (const auto& e : fs::recursive_directory_iterator(root)) {
      if (!e.is_regular_file()) continue;
      auto h = Sha256File(e.path().string());
      EXPECT_TRUE(h.IsOk()) << h.GetStatus().ToString();
      out[fs::relative(e.path(), root).string()] = *h;
    }
    return out;
  }

  static std::vector<fs::path> Files(const std::string& dir) {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

TEST_F(SynthTest, SameOptionsGiveByteIdenticalFiles) {
  SynthOptions o;
  ASSERT_TRUE(WriteSynthDataset(o, Out("a")).IsOk());
  ASSERT_TRUE(WriteSynthDataset(o, Out("b")).IsOk());
  const auto a = Digests(Out("a"));
  EXPECT_EQ(a.size(), 2u * 64u + 1u);
  EXPECT_EQ(a, Digests(Out("b")));
}

TEST_F(SynthTest, DifferentSeedGivesDifferentData) {
  SynthOptions o;
  o.images = 8;
  ASSERT_TRUE(WriteSynthDataset(o, Out("a")).IsOk());
  o.seed = 1;
  ASSERT_TRUE(WriteSynthDataset(o, Out("b")).IsOk());
  const auto a = Digests(Out("a")), b = Digests(Out("b"));
  int same_images = 0;
  for (const auto& [path, digest] : a) {
    if (path.ends_with(".jpg") && b.count(path) && b.at(path) == digest) ++same_images;
  }
  EXPECT_EQ(same_images, 0);
  EXPECT_NE(a, b);
}

TEST_F(SynthTest, LayoutCountsLabelsAndImagesAreValid) {
  SynthOptions o;  // 64 images, 25% val, 6.25% background
  ASSERT_TRUE(WriteSynthDataset(o, Out("d")).IsOk());
  const int n_val = static_cast<int>(std::llround(o.images * o.val_fraction));
  const int n_bg = static_cast<int>(std::llround(o.images * o.background_fraction));
  int empty_labels = 0, boxes = 0;
  std::vector<int> per_class(o.classes, 0);
  for (const std::string split : {"train", "val"}) {
    const auto images = Files(Out("d/images/" + split));
    const auto labels = Files(Out("d/labels/" + split));
    const size_t expected = split == "val" ? n_val : o.images - n_val;
    ASSERT_EQ(images.size(), expected) << split;
    ASSERT_EQ(labels.size(), expected) << split;
    for (size_t k = 0; k < images.size(); ++k) {
      EXPECT_EQ(images[k].extension(), ".jpg");
      EXPECT_EQ(images[k].stem(), labels[k].stem());
      auto bytes = Env::Default().ReadFile(images[k].string());
      ASSERT_TRUE(bytes.IsOk());
      const std::vector<uchar> buf(bytes->begin(), bytes->end());
      const cv::Mat img = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
      ASSERT_FALSE(img.empty()) << images[k];
      EXPECT_EQ(img.cols, o.imgsz);
      EXPECT_EQ(img.rows, o.imgsz);
      EXPECT_EQ(img.channels(), 3);

      auto text = Env::Default().ReadFile(labels[k].string());
      ASSERT_TRUE(text.IsOk());
      if (text->empty()) ++empty_labels;
      std::istringstream lines(*text);
      std::string line;
      while (std::getline(lines, line)) {
        std::istringstream in(line);
        int cls = -1;
        double cx = -1, cy = -1, w = -1, h = -1;
        ASSERT_TRUE(static_cast<bool>(in >> cls >> cx >> cy >> w >> h)) << line;
        ASSERT_GE(cls, 0);
        ASSERT_LT(cls, o.classes);
        ++per_class[cls];
        ++boxes;
        // 6 decimals exactly.
        EXPECT_EQ(line.size() - line.rfind('.') - 1, 6u) << line;
        EXPECT_GT(w, 0);
        EXPECT_GT(h, 0);
        const double eps = 1e-6;
        EXPECT_GE(cx - w / 2, -eps) << line;
        EXPECT_GE(cy - h / 2, -eps) << line;
        EXPECT_LE(cx + w / 2, 1 + eps) << line;
        EXPECT_LE(cy + h / 2, 1 + eps) << line;
        // Extent 8%-50% of imgsz; rotated triangles/stars are >= 75% of it.
        EXPECT_GE(std::max(w, h), 0.75 * 0.08 - 2.0 / o.imgsz) << line;
        EXPECT_LE(std::max(w, h), 0.5 + 2.0 / o.imgsz) << line;
      }
    }
  }
  EXPECT_EQ(empty_labels, n_bg);
  EXPECT_GE(boxes, (o.images - n_bg) * 1);
  for (int c = 0; c < o.classes; ++c) EXPECT_GT(per_class[c], 0) << c;
}

TEST_F(SynthTest, DataYamlNamesTheClasses) {
  SynthOptions o;
  o.images = 4;
  o.classes = 10;
  ASSERT_TRUE(WriteSynthDataset(o, Out("d")).IsOk());
  const YAML::Node y = YAML::LoadFile(Out("d/data.yaml"));
  EXPECT_EQ(y["path"].as<std::string>(), ".");
  EXPECT_EQ(y["train"].as<std::string>(), "images/train");
  EXPECT_EQ(y["val"].as<std::string>(), "images/val");
  EXPECT_EQ(y["nc"].as<int>(), 10);
  const auto names = y["names"].as<std::vector<std::string>>();
  EXPECT_EQ(names, SynthClassNames(10));
  ASSERT_EQ(names.size(), 10u);
  EXPECT_EQ(names[0], "circle");
  EXPECT_EQ(names[1], "rectangle");
  EXPECT_EQ(names[2], "triangle");
  EXPECT_EQ(names[7], "diamond");
  EXPECT_EQ(names[8], "circle_1");
  EXPECT_EQ(names[9], "rectangle_1");
}

TEST_F(SynthTest, RenderMatchesWrittenLabels) {
  SynthOptions o;
  o.images = 6;
  o.background_fraction = 0;
  ASSERT_TRUE(WriteSynthDataset(o, Out("d")).IsOk());
  for (int i = 0; i < o.images; ++i) {
    auto s = RenderSynthSample(o, i);
    ASSERT_TRUE(s.IsOk());
    EXPECT_FALSE(s->boxes.empty());
    EXPECT_EQ(s->image.type(), CV_8UC3);
    const std::string label = Out("d/labels/" + std::string(SplitName(s->split)) + "/" + s->stem + ".txt");
    auto text = Env::Default().ReadFile(label);
    ASSERT_TRUE(text.IsOk()) << label;
    EXPECT_EQ(std::count(text->begin(), text->end(), '\n'), static_cast<std::ptrdiff_t>(s->boxes.size()));
  }
  EXPECT_FALSE(RenderSynthSample(o, o.images).IsOk());
}

TEST_F(SynthTest, AllBackgroundAndAllValAreAllowed) {
  SynthOptions o;
  o.images = 5;
  o.val_fraction = 1;
  o.background_fraction = 1;
  ASSERT_TRUE(WriteSynthDataset(o, Out("d")).IsOk());
  EXPECT_EQ(Files(Out("d/images/val")).size(), 5u);
  EXPECT_TRUE(Files(Out("d/images/train")).empty());
  for (const auto& p : Files(Out("d/labels/val"))) EXPECT_EQ(fs::file_size(p), 0u);
}

TEST_F(SynthTest, RejectsNonEmptyOutputFolder) {
  SynthOptions o;
  o.images = 2;
  ASSERT_TRUE(WriteSynthDataset(o, Out("d")).IsOk());
  const Status s = WriteSynthDataset(o, Out("d"));
  EXPECT_EQ(s.Code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.Where().file, Out("d"));
  // An existing empty folder is fine.
  fs::create_directories(Out("empty"));
  EXPECT_TRUE(WriteSynthDataset(o, Out("empty")).IsOk());
}

TEST_F(SynthTest, RejectsBadOptionsNamingTheField) {
  struct Case {
    SynthOptions o;
    const char* field;
  };
  std::vector<Case> cases(14);
  cases[0].o.images = 0, cases[0].field = "images";
  cases[1].o.classes = 0, cases[1].field = "classes";
  cases[2].o.classes = 65, cases[2].field = "classes";
  cases[3].o.imgsz = 16, cases[3].field = "imgsz";
  cases[4].o.val_fraction = 1.5, cases[4].field = "val_fraction";
  cases[5].o.background_fraction = std::nan(""), cases[5].field = "background_fraction";
  cases[6].o.min_objects = 3, cases[6].o.max_objects = 2, cases[6].field = "max_objects";
  cases[7].o.max_objects = 33, cases[7].field = "max_objects";
  cases[8].o.min_object = 0.6, cases[8].o.max_object = 0.5, cases[8].field = "max_object";
  cases[9].o.max_object = 1.5, cases[9].field = "max_object";
  cases[10].o.min_side = 31, cases[10].o.max_side = 100, cases[10].field = "min_side";
  cases[11].o.max_side = 100, cases[11].field = "max_side";  // without min_side
  cases[12].o.min_side = 200, cases[12].o.max_side = 100, cases[12].field = "max_side";
  cases[13].o.min_side = 64, cases[13].o.max_side = 4097, cases[13].field = "max_side";
  for (const Case& c : cases) {
    const Status s = WriteSynthDataset(c.o, Out("x"));
    EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(s.Where().field, c.field);
  }
  EXPECT_FALSE(fs::exists(Out("x")));
}

TEST_F(SynthTest, WriteFailureIsReportedAndLeavesNoDataYaml) {
  FaultInjectionEnv env(Env::Default());
  env.FailWritesAfter(5);
  SynthOptions o;
  o.images = 8;
  const Status s = WriteSynthDataset(o, Out("d"), env);
  EXPECT_EQ(s.Code(), StatusCode::kIoError);
  EXPECT_FALSE(fs::exists(Out("d/data.yaml")));
  // Nothing half-written at all (images/ + labels/ alone import as a bare
  // YOLO tree), and no staging folder left behind.
  EXPECT_FALSE(fs::exists(Out("d")));
  for (const auto& e : fs::directory_iterator(Out(""))) {
    EXPECT_EQ(e.path().filename().string().find(".kestrel-tmp-"), std::string::npos) << e.path();
  }
}

TEST_F(SynthTest, ManyClassesCycleShapesWithColourBands) {
  SynthOptions o;
  o.images = 40;
  o.classes = 20;
  o.imgsz = 96;
  ASSERT_TRUE(WriteSynthDataset(o, Out("d")).IsOk());
  int max_cls = -1;
  for (int i = 0; i < o.images; ++i) {
    auto s = RenderSynthSample(o, i);
    ASSERT_TRUE(s.IsOk());
    for (const Box& b : s->boxes) max_cls = std::max(max_cls, b.cls);
  }
  EXPECT_GE(max_cls, 16);
  EXPECT_LT(max_cls, 20);
}

// The original options draw exactly what they drew before min_side, the
// object-count and the object-size keys existed (existing datasets, demos and
// recorded curves depend on it). Labels depend only on this code and OpenCV's
// rasterizer, not on the JPEG encoder, so their digest is pinned here; the
// digest is of the label files of the default options concatenated in path
// order, taken before those keys were added.
TEST_F(SynthTest, DefaultLabelsAreUnchangedByTheNewKeys) {
  SynthOptions o;
  ASSERT_TRUE(WriteSynthDataset(o, Out("d")).IsOk());
  std::string all;
  for (const auto& [path, digest] : Digests(Out("d"))) {
    if (!path.starts_with("labels/")) continue;
    auto text = Env::Default().ReadFile(Out("d/" + path));
    ASSERT_TRUE(text.IsOk());
    all += *text;
  }
  EXPECT_EQ(Sha256Hex(all), "1c40a186ea8d890246d38e584f986b2b08b362188c207fa7d097765a7462c7b3");
}

// Photo-like sets (issue 11): W x H drawn per image in [min_side, max_side],
// 1..max_objects objects of min_object..max_object of each side.
TEST_F(SynthTest, VariedSidesWithLargeObjects) {
  SynthOptions o;
  o.images = 24;
  o.classes = 1;  // circles stretched to ellipses: their box spans the drawn extent
  o.background_fraction = 0;
  o.min_objects = 1;
  o.max_objects = 2;
  o.min_object = 0.3;
  o.max_object = 0.9;
  o.min_side = 180;
  o.max_side = 700;
  ASSERT_TRUE(WriteSynthDataset(o, Out("d")).IsOk());
  std::set<int> widths, heights;
  int non_square = 0, two = 0;
  for (int i = 0; i < o.images; ++i) {
    auto s = RenderSynthSample(o, i);
    ASSERT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    const int w = s->image.cols, h = s->image.rows;
    EXPECT_GE(w, o.min_side);
    EXPECT_LE(w, o.max_side);
    EXPECT_GE(h, o.min_side);
    EXPECT_LE(h, o.max_side);
    widths.insert(w), heights.insert(h);
    if (w != h) ++non_square;
    ASSERT_GE(s->boxes.size(), 1u) << i;
    ASSERT_LE(s->boxes.size(), 2u) << i;
    if (s->boxes.size() == 2) ++two;
    for (const Box& b : s->boxes) {
      // Extent 30-90% of each side, +-2 px of rasterization.
      EXPECT_GE(b.w, 0.3 - 2.0 / w) << i;
      EXPECT_LE(b.w, 0.9 + 2.0 / w) << i;
      EXPECT_GE(b.h, 0.3 - 2.0 / h) << i;
      EXPECT_LE(b.h, 0.9 + 2.0 / h) << i;
      EXPECT_GE(b.cx - b.w / 2, -1e-9) << i;
      EXPECT_LE(b.cx + b.w / 2, 1 + 1e-9) << i;
      EXPECT_GE(b.cy - b.h / 2, -1e-9) << i;
      EXPECT_LE(b.cy + b.h / 2, 1 + 1e-9) << i;
    }
    // The written JPEG has the rendered size.
    const std::string img = Out("d/images/" + std::string(SplitName(s->split)) + "/" + s->stem + ".jpg");
    const cv::Mat decoded = cv::imread(img, cv::IMREAD_COLOR);
    ASSERT_FALSE(decoded.empty()) << img;
    EXPECT_EQ(decoded.cols, w);
    EXPECT_EQ(decoded.rows, h);
  }
  EXPECT_GE(non_square, o.images - 2);
  EXPECT_GE(widths.size(), 12u);
  EXPECT_GE(heights.size(), 12u);
  EXPECT_GE(two, 1);  // sometimes two
  // Deterministic like the square sets.
  ASSERT_TRUE(WriteSynthDataset(o, Out("e")).IsOk());
  EXPECT_EQ(Digests(Out("d")), Digests(Out("e")));
}

TEST_F(SynthTest, BindExposesEveryKeyWithItsRange) {
  SynthOptions o;
  OptionSet set;
  o.Bind(set);
  ASSERT_TRUE(set.ApplyArgs({"min_side=180", "max_side=1400", "min_object=0.3", "max_object=0.9",
                             "max_objects=2", "classes=1", "background_fraction=0"})
                  .IsOk());
  EXPECT_EQ(o.min_side, 180);
  EXPECT_EQ(o.max_side, 1400);
  EXPECT_EQ(o.max_objects, 2);
  EXPECT_TRUE(o.Validate().IsOk());
  const Status bad = set.ApplyArgs({"max_side=5000"});
  EXPECT_EQ(bad.Code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.ToString().find("max_side"), std::string::npos) << bad.ToString();
}

}  // namespace
}  // namespace kestrel::data
