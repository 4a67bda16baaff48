// Dataset readers (YOLO, COCO, VOC) and YOLO label parsing. All data is
// generated in a temp folder per test.
#include "data/formats.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "data/image.h"
#include "scratch_dir_test.h"

namespace kestrel::data {
namespace {

namespace fs = std::filesystem;

std::vector<const Finding*> With(const std::vector<Finding>& fs, const std::string& check) {
  std::vector<const Finding*> out;
  for (const Finding& f : fs) {
    if (f.check == check) out.push_back(&f);
  }
  return out;
}

class TempDirTest : public ScratchDirTest {
 protected:
  // Content does not matter to the readers; a real tiny JPEG keeps it honest.
  void Image(const std::string& rel) {
    static const std::string jpg = [] {
      std::vector<uchar> buf;
      cv::imencode(".jpg", cv::Mat(4, 6, CV_8UC3, cv::Scalar(1, 2, 3)), buf);
      return std::string(buf.begin(), buf.end());
    }();
    Write(rel, jpg);
  }
};

// ---------------- ParseYoloLabels ----------------

std::vector<Finding> Parse(const std::string& text, std::vector<Box>* boxes, int nc = 3) {
  std::vector<Finding> f;
  *boxes = ParseYoloLabels(text, "l.txt", nc, &f);
  return f;
}

TEST(YoloLabelsTest, ValidLinesWithCrlfBomBlankLinesAndTrailingSpace) {
  std::vector<Box> b;
  auto f = Parse(
      "\xEF\xBB\xBF"
      "0 0.5 0.5 0.2 0.4\r\n\n  \t\r\n2 0.25 0.75 0.1 0.1  \t\r\n",
      &b);
  EXPECT_TRUE(f.empty()) << f[0].message;
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (Box{0, 0.5, 0.5, 0.2, 0.4}));
  EXPECT_EQ(b[1], (Box{2, 0.25, 0.75, 0.1, 0.1}));
}

TEST(YoloLabelsTest, WrongFieldCountIsSyntaxErrorAndOnlyThatLineDropped) {
  std::vector<Box> b;
  auto f = Parse("0 0.5 0.5 0.2\n1 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2 0.9\n", &b);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].check, "label.syntax");
  EXPECT_EQ(f[0].severity, Severity::kError);
  EXPECT_EQ(f[0].file, "l.txt");
  EXPECT_EQ(f[0].line, 1);
  EXPECT_NE(f[0].message.find("got 4"), std::string::npos);
  EXPECT_EQ(f[1].line, 3);
  EXPECT_NE(f[1].message.find("confidence"), std::string::npos);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].cls, 1);
}

TEST(YoloLabelsTest, NonNumericFieldNamed) {
  std::vector<Box> b;
  auto f = Parse("0 0.5 abc 0.2 0.2\n", &b);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, "label.syntax");
  EXPECT_EQ(f[0].field, "y_center");
  EXPECT_EQ(f[0].line, 1);
  EXPECT_NE(f[0].message.find("'abc'"), std::string::npos);
  EXPECT_TRUE(b.empty());
}

TEST(YoloLabelsTest, FullWidthCommaNamedInMessage) {
  std::vector<Box> b;
  auto f = Parse(
      "0 0.5 0.5 0.2 0.2\n1 0.5\xEF\xBC\x8C"
      "0.5 0.2 0.2\n",
      &b);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, "label.syntax");
  EXPECT_EQ(f[0].line, 2);
  EXPECT_EQ(f[0].field, "x_center");
  EXPECT_NE(f[0].message.find("\xEF\xBC\x8C"), std::string::npos) << f[0].message;
  EXPECT_NE(f[0].message.find("U+FF0C"), std::string::npos) << f[0].message;
  EXPECT_NE(f[0].message.find("column 6"), std::string::npos) << f[0].message;
  EXPECT_EQ(b.size(), 1u);
}

TEST(YoloLabelsTest, DecimalCommaIsSyntaxError) {
  std::vector<Box> b;
  auto f = Parse("0 0,5 0.5 0.2 0.2\n", &b);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, "label.syntax");
  EXPECT_EQ(f[0].field, "x_center");
  EXPECT_NE(f[0].message.find("','"), std::string::npos) << f[0].message;
}

TEST(YoloLabelsTest, NanAndInfAreNonFinite) {
  std::vector<Box> b;
  auto f = Parse("0 nan 0.5 0.2 0.2\n0 0.5 0.5 inf 0.2\n0 0.5 0.5 0.2 1e999\n", &b);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].check, "label.nonfinite");
  EXPECT_EQ(f[0].field, "x_center");
  EXPECT_EQ(f[1].field, "width");
  EXPECT_EQ(f[1].line, 2);
  EXPECT_EQ(f[2].field, "height");
  EXPECT_TRUE(b.empty());
}

TEST(YoloLabelsTest, ClassRange) {
  std::vector<Box> b;
  auto f = Parse("3 0.5 0.5 0.2 0.2\n-1 0.5 0.5 0.2 0.2\n1.5 0.5 0.5 0.2 0.2\n2.0 0.5 0.5 0.2 0.2\n", &b, 3);
  ASSERT_EQ(f.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(f[i].check, "label.class_range");
    EXPECT_EQ(f[i].field, "class");
    EXPECT_EQ(f[i].line, i + 1);
  }
  EXPECT_NE(f[0].message.find("[0, 3)"), std::string::npos);
  EXPECT_NE(f[2].message.find("not an integer"), std::string::npos);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].cls, 2);
  // Unknown class count: no upper bound.
  auto g = Parse("99 0.5 0.5 0.2 0.2\n", &b, -1);
  EXPECT_TRUE(g.empty());
}

TEST(YoloLabelsTest, OutOfBoundsClipped) {
  std::vector<Box> b;
  auto f = Parse("0 0.95 0.5 0.2 0.2\n", &b);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, "label.out_of_bounds");
  EXPECT_EQ(f[0].severity, Severity::kWarning);
  EXPECT_EQ(f[0].field, "width");
  EXPECT_EQ(f[0].action, "clipped");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NEAR(b[0].cx, 0.925, 1e-12);  // xyxy [0.85, 1] -> cxcywh
  EXPECT_NEAR(b[0].w, 0.15, 1e-12);
  EXPECT_NEAR(b[0].cy, 0.5, 1e-12);
}

TEST(YoloLabelsTest, DegenerateDropped) {
  std::vector<Box> b;
  auto f = Parse("0 0.5 0.5 0 0.2\n0 0.5 0.5 0.2 -0.1\n0 1.5 0.5 0.2 0.2\n", &b);
  ASSERT_EQ(With(f, "label.degenerate").size(), 3u);
  EXPECT_EQ(With(f, "label.degenerate")[0]->field, "width");
  EXPECT_EQ(With(f, "label.degenerate")[1]->field, "height");
  EXPECT_EQ(With(f, "label.degenerate")[0]->action, "box dropped");
  ASSERT_EQ(With(f, "label.out_of_bounds").size(), 1u);
  EXPECT_EQ(With(f, "label.out_of_bounds")[0]->line, 3);
  EXPECT_TRUE(b.empty());
}

TEST(YoloLabelsTest, DuplicatesRemoved) {
  std::vector<Box> b;
  auto f = Parse("0 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n0 0.50 0.5 0.2 0.2\n", &b);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, "label.duplicate");
  EXPECT_EQ(f[0].line, 3);
  EXPECT_NE(f[0].message.find("line 1"), std::string::npos);
  EXPECT_EQ(b.size(), 2u);
}

TEST(YoloLabelsTest, EmptyFileIsBackgroundInfo) {
  for (const char* text : {"", "\n\n  \r\n", "\xEF\xBB\xBF"}) {
    std::vector<Box> b;
    auto f = Parse(text, &b);
    ASSERT_EQ(f.size(), 1u);
    EXPECT_EQ(f[0].check, "label.empty");
    EXPECT_EQ(f[0].severity, Severity::kInfo);
    EXPECT_TRUE(b.empty());
  }
}

TEST(YoloLabelsTest, PolygonBecomesBoundingBox) {
  std::vector<Box> b;
  auto f = Parse("1 0.1 0.2 0.5 0.2 0.3 0.6\n", &b);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, "label.polygon");
  ASSERT_EQ(b.size(), 1u);
  EXPECT_NEAR(b[0].cx, 0.3, 1e-12);
  EXPECT_NEAR(b[0].cy, 0.4, 1e-12);
  EXPECT_NEAR(b[0].w, 0.4, 1e-12);
  EXPECT_NEAR(b[0].h, 0.4, 1e-12);
}

// ---------------- YOLO datasets ----------------

class YoloReaderTest : public TempDirTest {
 protected:
  void MakeTree() {
    Image("images/train/a.jpg");
    Image("images/train/b.jpg");
    Image("images/val/c.jpg");
    Write("labels/train/a.txt", "0 0.5 0.5 0.2 0.2\n");
    Write("labels/train/b.txt", "1 0.5 0.5 0.2 0.2\n");
    Write("labels/val/c.txt", "1 0.2 0.2 0.1 0.1\n0 0.7 0.7 0.1 0.1\n");
  }
};

TEST_F(YoloReaderTest, DataYamlWithNamesList) {
  MakeTree();
  Write("data.yaml", "path: .\ntrain: images/train\nval: images/val\nnames: [cat, dog]\n");
  auto ds = ReadDataset(P("data.yaml"), {});
  ASSERT_TRUE(ds.IsOk()) << ds.GetStatus().ToString();
  EXPECT_EQ(ds->format, "yolo");
  EXPECT_TRUE(ds->has_splits);
  EXPECT_EQ(ds->names, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(ds->samples.size(), 3u);
  EXPECT_EQ(ds->samples[0].rel_path, "a.jpg");
  EXPECT_EQ(ds->samples[0].split, Split::kTrain);
  EXPECT_EQ(ds->samples[0].label_path, P("labels/train/a.txt"));
  EXPECT_EQ(ds->samples[2].rel_path, "c.jpg");
  EXPECT_EQ(ds->samples[2].split, Split::kVal);
  EXPECT_EQ(ds->samples[2].boxes.size(), 2u);
  EXPECT_TRUE(ds->findings.empty()) << ds->findings[0].message;
  // The folder holding data.yaml reads the same.
  auto again = ReadDataset(root_, {});
  ASSERT_TRUE(again.IsOk());
  EXPECT_EQ(again->samples.size(), 3u);
}

TEST_F(YoloReaderTest, DataYamlWithNamesMapAndClassRange) {
  MakeTree();
  Write("labels/val/c.txt", "2 0.5 0.5 0.2 0.2\n");
  Write("data.yaml", "train: images/train\nval: images/val\nnames:\n  0: cat\n  1: dog\n");
  auto ds = ReadDataset(P("data.yaml"), {});
  ASSERT_TRUE(ds.IsOk()) << ds.GetStatus().ToString();
  EXPECT_EQ(ds->names, (std::vector<std::string>{"cat", "dog"}));
  auto f = With(ds->findings, "label.class_range");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]->file, P("labels/val/c.txt"));
  EXPECT_EQ(f[0]->line, 1);
}

TEST_F(YoloReaderTest, NcMismatchNamesFieldAndLine) {
  MakeTree();
  Write("data.yaml", "train: images/train\nval: images/val\nnc: 3\nnames: [cat, dog]\n");
  auto ds = ReadDataset(P("data.yaml"), {});
  ASSERT_FALSE(ds.IsOk());
  EXPECT_EQ(ds.GetStatus().Where().field, "nc");
  EXPECT_EQ(ds.GetStatus().Where().line, 3);
  EXPECT_EQ(ds.GetStatus().Where().file, P("data.yaml"));
  EXPECT_NE(ds.GetStatus().Message().find("nc is 3 but names lists 2"), std::string::npos);
}

TEST_F(YoloReaderTest, NamesMapWithGapAndMalformedYamlAreErrors) {
  MakeTree();
  Write("data.yaml", "train: images/train\nnames:\n  0: cat\n  2: dog\n");
  auto gap = ReadDataset(P("data.yaml"), {});
  ASSERT_FALSE(gap.IsOk());
  EXPECT_EQ(gap.GetStatus().Where().field, "names");
  Write("data.yaml", "train: images/train\nnames: [cat, dog\nval: x\n");
  auto bad = ReadDataset(P("data.yaml"), {});
  ASSERT_FALSE(bad.IsOk());
  EXPECT_NE(bad.GetStatus().Message().find("malformed YAML"), std::string::npos);
  EXPECT_GT(bad.GetStatus().Where().line, 1);
  Write("data.yaml", "train: images/nope\nnames: [a]\n");
  auto missing = ReadDataset(P("data.yaml"), {});
  ASSERT_FALSE(missing.IsOk());
  EXPECT_EQ(missing.GetStatus().Where().field, "train");
  EXPECT_EQ(missing.GetStatus().Where().line, 1);
}

TEST_F(YoloReaderTest, TxtListSplitAndListOfFolders) {
  MakeTree();
  Image("images/extra/d.jpg");
  Write("labels/extra/d.txt", "0 0.5 0.5 0.2 0.2\n");
  Write("train.txt", "./images/train/a.jpg\nimages/train/b.jpg\n\n");
  Write("data.yaml", "train: train.txt\nval: [images/val, images/extra]\nnames: [cat, dog]\n");
  auto ds = ReadDataset(P("data.yaml"), {});
  ASSERT_TRUE(ds.IsOk()) << ds.GetStatus().ToString();
  ASSERT_EQ(ds->samples.size(), 4u);
  std::map<std::string, Split> got;
  for (const Sample& s : ds->samples) got[s.rel_path] = s.split;
  EXPECT_EQ(got["images/train/a.jpg"], Split::kTrain);
  EXPECT_EQ(got["images/val/c.jpg"], Split::kVal);
  EXPECT_EQ(got["images/extra/d.jpg"], Split::kVal);
}

TEST_F(YoloReaderTest, PairsByRelativePathAndStemNotListingOrder) {
  // Same stem in two folders, and stems whose string order differs from any
  // numeric/listing order: each image must get its own label.
  Image("images/10.jpg");
  Image("images/2.png");
  Image("images/sub/10.jpg");
  Write("labels/10.txt", "0 0.5 0.5 0.2 0.2\n");
  Write("labels/2.txt", "1 0.5 0.5 0.2 0.2\n");
  Write("labels/sub/10.txt", "2 0.5 0.5 0.2 0.2\n");
  Write("classes.txt", "a\nb\nc\n");
  auto ds = ReadDataset(root_, {});
  ASSERT_TRUE(ds.IsOk()) << ds.GetStatus().ToString();
  EXPECT_FALSE(ds->has_splits);
  EXPECT_EQ(ds->names, (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(ds->samples.size(), 3u);
  std::map<std::string, int> cls;
  for (const Sample& s : ds->samples) {
    ASSERT_EQ(s.boxes.size(), 1u) << s.rel_path;
    cls[s.rel_path] = s.boxes[0].cls;
    EXPECT_EQ(s.split, Split::kUnassigned);
  }
  EXPECT_EQ(cls["10.jpg"], 0);
  EXPECT_EQ(cls["2.png"], 1);
  EXPECT_EQ(cls["sub/10.jpg"], 2);
  EXPECT_EQ(ds->samples[0].rel_path, "10.jpg");  // sorted by rel_path
}

TEST_F(YoloReaderTest, BareTreeSplitsMissingOrphanEmptyAndNumericNames) {
  Image("images/train/a.jpg");
  Image("images/train/b.jpg");
  Image("images/val/c.jpg");
  Write("labels/train/a.txt", "3 0.5 0.5 0.2 0.2\n");
  Write("labels/train/zzz.txt", "0 0.5 0.5 0.2 0.2\n");
  Write("labels/val/c.txt", "");
  auto ds = ReadDataset(root_, {});
  ASSERT_TRUE(ds.IsOk()) << ds.GetStatus().ToString();
  EXPECT_TRUE(ds->has_splits);
  EXPECT_EQ(ds->names, (std::vector<std::string>{"0", "1", "2", "3"}));
  ASSERT_EQ(ds->samples.size(), 3u);
  const Sample& b = ds->samples[1];
  EXPECT_EQ(b.rel_path, "b.jpg");
  EXPECT_FALSE(b.has_label);
  auto missing = With(ds->findings, "label.missing");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]->file, P("labels/train/b.txt"));
  EXPECT_EQ(missing[0]->severity, Severity::kWarning);
  auto orphan = With(ds->findings, "label.orphan");
  ASSERT_EQ(orphan.size(), 1u);
  EXPECT_EQ(orphan[0]->file, P("labels/train/zzz.txt"));
  auto empty = With(ds->findings, "label.empty");
  ASSERT_EQ(empty.size(), 1u);
  EXPECT_EQ(empty[0]->file, P("labels/val/c.txt"));
  EXPECT_TRUE(ds->samples[2].has_label);
}

TEST_F(YoloReaderTest, HugeLabelFileRefusedBeforeReading) {
  MakeTree();
  int fd = ::open(P("labels/train/a.txt").c_str(), O_WRONLY | O_TRUNC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, off_t{300} << 20), 0);  // sparse, 300 MB
  ::close(fd);
  auto t0 = std::chrono::steady_clock::now();
  auto ds = ReadDataset(root_, {});
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(ds.IsOk());
  EXPECT_EQ(ds.GetStatus().Code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ds.GetStatus().Where().file, P("labels/train/a.txt"));
  EXPECT_NE(ds.GetStatus().Message().find("314572800 bytes, over the limit of 67108864"), std::string::npos)
      << ds.GetStatus().Message();
  EXPECT_LT(s, 1.0);
}

TEST_F(YoloReaderTest, SymlinkLoopTerminatesWithError) {
  MakeTree();
  fs::create_directory_symlink("..", P("images/train/up"));
  auto ds = ReadDataset(root_, {});
  ASSERT_FALSE(ds.IsOk());
  EXPECT_NE(ds.GetStatus().Message().find("symlink loop"), std::string::npos);
  fs::remove(P("images/train/up"));
  fs::create_symlink(P("images/train/self"), P("images/train/self"));  // ELOOP
  auto self = ReadDataset(root_, {});
  ASSERT_FALSE(self.IsOk());
  EXPECT_NE(self.GetStatus().Message().find("symlink loop"), std::string::npos);
}

TEST_F(YoloReaderTest, SymlinkedFolderReachedTwiceIsWalkedOnce) {
  MakeTree();
  fs::create_directory_symlink(P("images/val"), P("images/train/val_link"));
  auto files = ListFilesRecursive(P("images"), Env::Default(),
                                  [](std::string_view n) { return IsImageExtension(Extension(n)); });
  ASSERT_TRUE(files.IsOk()) << files.GetStatus().ToString();
  EXPECT_EQ(files->size(), 3u);
}

TEST_F(YoloReaderTest, NonexistentAndEmptyPaths) {
  auto none = ReadDataset(P("nope"), {});
  ASSERT_FALSE(none.IsOk());
  EXPECT_EQ(none.GetStatus().Code(), StatusCode::kNotFound);
  fs::create_directories(P("empty/images"));
  auto empty = ReadDataset(P("empty"), {});
  ASSERT_FALSE(empty.IsOk());
  EXPECT_NE(empty.GetStatus().Message().find("no images"), std::string::npos);
  auto bad_format = ReadDataset(root_, ReadOptions{"darknet"});
  EXPECT_FALSE(bad_format.IsOk());
}

TEST(SharedDatasetTest, Coco128ViaDataYaml) {
  std::string yaml = std::string(KESTREL_SHARED_DIR) + "/datasets/coco128/data.yaml";
  if (!fs::exists(yaml)) GTEST_SKIP() << "no " << yaml;
  auto ds = ReadDataset(yaml, {});
  ASSERT_TRUE(ds.IsOk()) << ds.GetStatus().ToString();
  EXPECT_EQ(ds->samples.size(), 128u);
  EXPECT_EQ(ds->names.size(), 80u);
  EXPECT_EQ(ds->names[0], "person");
  int train = 0, val = 0, boxes = 0;
  for (const Sample& s : ds->samples) {
    train += s.split == Split::kTrain;
    val += s.split == Split::kVal;
    boxes += static_cast<int>(s.boxes.size());
  }
  EXPECT_EQ(train, 102);
  EXPECT_EQ(val, 26);
  EXPECT_EQ(boxes, 929);
  // The two upstream orphan labels were dropped by the converter (README).
  EXPECT_EQ(With(ds->findings, "label.orphan").size(), 0u);
  EXPECT_EQ(With(ds->findings, "label.empty").size(), 2u);
  for (const Finding& f : ds->findings) EXPECT_NE(f.severity, Severity::kError) << f.message;
}

// ---------------- COCO ----------------

const char* kCoco = R"({
  "images": [
    {"id": 1, "file_name": "a.jpg", "width": 100, "height": 80},
    {"id": 2, "file_name": "sub/b.jpg", "width": 50, "height": 50}
  ],
  "categories": [{"id": 7, "name": "dog"}, {"id": 1, "name": "cat"}, {"id": 3, "name": "bird"}],
  "annotations": [
    {"id": 10, "image_id": 1, "category_id": 7, "bbox": [10, 20, 30, 40], "iscrowd": 0},
    {"id": 11, "image_id": 1, "category_id": 1, "bbox": [90, 70, 20, 20]},
    {"id": 12, "image_id": 2, "category_id": 3, "bbox": [0, 0, 5, 5], "iscrowd": 1},
    {"id": 13, "image_id": 2, "category_id": 99, "bbox": [0, 0, 5, 5]},
    {"id": 14, "image_id": 5, "category_id": 1, "bbox": [0, 0, 5, 5]},
    {"id": 15, "image_id": 2, "category_id": 1, "bbox": [1, 1, 0, 5]}
  ]
})";

TEST(CocoJsonTest, CategoryRemapPixelBoxesAndFindings) {
  auto ds = ReadCocoJson(kCoco, "ann.json", "/data/imgs", Split::kVal);
  ASSERT_TRUE(ds.IsOk()) << ds.GetStatus().ToString();
  EXPECT_EQ(ds->names, (std::vector<std::string>{"cat", "bird", "dog"}));
  ASSERT_EQ(ds->samples.size(), 2u);
  const Sample& a = ds->samples[0];
  EXPECT_EQ(a.rel_path, "a.jpg");
  EXPECT_EQ(a.image_path, "/data/imgs/a.jpg");
  EXPECT_EQ(a.split, Split::kVal);
  EXPECT_TRUE(a.boxes_in_pixels);
  EXPECT_EQ(a.declared_width, 100);
  EXPECT_EQ(a.declared_height, 80);
  ASSERT_EQ(a.pixel_boxes.size(), 2u);
  EXPECT_EQ(a.pixel_boxes[0].cls, 2);  // dog: original id 7 -> 2
  EXPECT_EQ(a.pixel_boxes[0].x1, 10);
  EXPECT_EQ(a.pixel_boxes[0].y1, 20);
  EXPECT_EQ(a.pixel_boxes[0].x2, 40);
  EXPECT_EQ(a.pixel_boxes[0].y2, 60);
  EXPECT_EQ(a.pixel_boxes[0].line, 1);
  EXPECT_EQ(a.pixel_boxes[1].cls, 0);  // clipped to the 100x80 image
  EXPECT_EQ(a.pixel_boxes[1].x2, 100);
  EXPECT_EQ(a.pixel_boxes[1].y2, 80);
  EXPECT_TRUE(ds->samples[1].pixel_boxes.empty());
  EXPECT_EQ(With(ds->findings, "label.out_of_bounds").size(), 1u);
  auto crowd = With(ds->findings, "coco.crowd");
  ASSERT_EQ(crowd.size(), 1u);
  EXPECT_EQ(crowd[0]->severity, Severity::kInfo);
  auto cat = With(ds->findings, "coco.unknown_category");
  ASSERT_EQ(cat.size(), 1u);
  EXPECT_EQ(cat[0]->severity, Severity::kError);
  EXPECT_EQ(cat[0]->file, "/data/imgs/sub/b.jpg");
  EXPECT_EQ(cat[0]->field, "category_id");
  auto img = With(ds->findings, "coco.unknown_image");
  ASSERT_EQ(img.size(), 1u);
  EXPECT_EQ(img[0]->file, "ann.json");
  EXPECT_NE(img[0]->message.find("annotations[4]"), std::string::npos);
  EXPECT_EQ(With(ds->findings, "label.degenerate").size(), 1u);
}

TEST(CocoJsonTest, FileNameEscapingRootIsHardError) {
  std::string j =
      R"({"images": [{"id": 42, "file_name": "../../etc/passwd"}], "categories": [], "annotations": []})";
  auto ds = ReadCocoJson(j, "ann.json", "/data");
  ASSERT_FALSE(ds.IsOk());
  EXPECT_EQ(ds.GetStatus().Where().field, "file_name");
  EXPECT_EQ(ds.GetStatus().Where().file, "ann.json");
  EXPECT_NE(ds.GetStatus().Message().find("image id 42"), std::string::npos);
  std::string abs = R"({"images": [{"id": 1, "file_name": "/etc/passwd"}], "categories": []})";
  auto a = ReadCocoJson(abs, "ann.json", "/data");
  ASSERT_FALSE(a.IsOk());
  EXPECT_EQ(a.GetStatus().Where().field, "file_name");
}

TEST(CocoJsonTest, DuplicateImageIdsIsHardError) {
  std::string j = R"({"images": [{"id": 3, "file_name": "a.jpg"}, {"id": 3, "file_name": "b.jpg"}],
                      "categories": [], "annotations": []})";
  auto ds = ReadCocoJson(j, "ann.json", "/data");
  ASSERT_FALSE(ds.IsOk());
  EXPECT_EQ(ds.GetStatus().Where().field, "id");
  EXPECT_NE(ds.GetStatus().Message().find("duplicate image id 3"), std::string::npos);
}

TEST(CocoJsonTest, MalformedJsonNamesLine) {
  auto ds = ReadCocoJson("{\n\"images\": [\n{\"id\": 1,,}\n]}", "ann.json", "/data");
  ASSERT_FALSE(ds.IsOk());
  EXPECT_EQ(ds.GetStatus().Where().line, 3);
  EXPECT_NE(ds.GetStatus().Message().find("malformed JSON"), std::string::npos);
  auto wrong = ReadCocoJson("[1, 2]", "ann.json", "/data");
  EXPECT_FALSE(wrong.IsOk());
}

TEST_F(TempDirTest, CocoFolderLayoutWithSplitsAndMissingImage) {
  Image("train2017/a.jpg");
  Image("val2017/v.jpg");
  Write("annotations/instances_train2017.json",
        R"({"images": [{"id": 1, "file_name": "a.jpg", "width": 6, "height": 4},
                      {"id": 2, "file_name": "gone.jpg"}],
           "categories": [{"id": 1, "name": "x"}],
           "annotations": [{"image_id": 1, "category_id": 1, "bbox": [1, 1, 2, 2]}]})");
  Write("annotations/instances_val2017.json",
        R"({"images": [{"id": 1, "file_name": "v.jpg"}], "categories": [{"id": 1, "name": "x"}],
           "annotations": []})");
  EXPECT_EQ(*DetectFormat(root_), "coco");
  auto ds = ReadDataset(root_, {});
  ASSERT_TRUE(ds.IsOk()) << ds.GetStatus().ToString();
  EXPECT_EQ(ds->format, "coco");
  EXPECT_TRUE(ds->has_splits);
  ASSERT_EQ(ds->samples.size(), 2u);
  EXPECT_EQ(ds->samples[0].image_path, P("train2017/a.jpg"));
  EXPECT_EQ(ds->samples[0].split, Split::kTrain);
  EXPECT_EQ(ds->samples[1].split, Split::kVal);
  auto missing = With(ds->findings, "image.missing");
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0]->file, P("train2017/gone.jpg"));
  // A single JSON passed directly.
  auto one = ReadDataset(P("annotations/instances_val2017.json"), {});
  ASSERT_TRUE(one.IsOk()) << one.GetStatus().ToString();
  EXPECT_EQ(one->samples.size(), 1u);
}

// ---------------- VOC ----------------

std::string VocXml(const std::string& file, const std::string& objects) {
  return "<annotation>\n  <filename>" + file +
         "</filename>\n  <size><width>100</width><height>80</height><depth>3</depth></size>\n" + objects +
         "</annotation>\n";
}

std::string VocObject(const std::string& name, int x1, int y1, int x2, int y2) {
  return "  <object>\n    <name>" + name + "</name>\n    <bndbox><xmin>" + std::to_string(x1) +
         "</xmin><ymin>" + std::to_string(y1) + "</ymin><xmax>" + std::to_string(x2) + "</xmax><ymax>" +
         std::to_string(y2) + "</ymax></bndbox>\n  </object>\n";
}

TEST_F(TempDirTest, VocOneBasedConversionSplitsAndNames) {
  Image("JPEGImages/a.jpg");
  Image("JPEGImages/b.jpg");
  Image("JPEGImages/c.jpg");
  Write("Annotations/a.xml",
        VocXml("a.jpg", VocObject("person", 1, 1, 50, 40) + VocObject("car", 10, 10, 120, 20)));
  Write("Annotations/b.xml", VocXml("b.jpg", VocObject("car", 5, 5, 5, 9)));
  Write("ImageSets/Main/train.txt", "a\nc\n");
  Write("ImageSets/Main/val.txt", "b\nzz\n");
  EXPECT_EQ(*DetectFormat(root_), "voc");
  auto ds = ReadDataset(root_, {});
  ASSERT_TRUE(ds.IsOk()) << ds.GetStatus().ToString();
  EXPECT_EQ(ds->format, "voc");
  EXPECT_TRUE(ds->has_splits);
  EXPECT_EQ(ds->names, (std::vector<std::string>{"car", "person"}));
  ASSERT_EQ(ds->samples.size(), 3u);
  const Sample& a = ds->samples[0];
  EXPECT_EQ(a.rel_path, "a.jpg");
  EXPECT_EQ(a.split, Split::kTrain);
  EXPECT_EQ(a.declared_width, 100);
  ASSERT_EQ(a.pixel_boxes.size(), 2u);
  EXPECT_EQ(a.pixel_boxes[0].cls, 1);
  EXPECT_EQ(a.pixel_boxes[0].x1, 0);
  EXPECT_EQ(a.pixel_boxes[0].y1, 0);
  EXPECT_EQ(a.pixel_boxes[0].x2, 50);
  EXPECT_EQ(a.pixel_boxes[0].y2, 40);
  EXPECT_EQ(a.pixel_boxes[0].line, 4);
  EXPECT_EQ(a.pixel_boxes[1].x2, 100);  // clipped
  auto oob = With(ds->findings, "label.out_of_bounds");
  ASSERT_EQ(oob.size(), 1u);
  EXPECT_EQ(oob[0]->file, P("Annotations/a.xml"));
  EXPECT_EQ(oob[0]->line, 8);
  // xmin == xmax in 1-based inclusive coordinates is a 1-pixel-wide box.
  ASSERT_EQ(ds->samples[1].pixel_boxes.size(), 1u);
  EXPECT_EQ(ds->samples[1].pixel_boxes[0].x1, 4);
  EXPECT_EQ(ds->samples[1].pixel_boxes[0].x2, 5);
  EXPECT_EQ(ds->samples[1].split, Split::kVal);
  EXPECT_FALSE(ds->samples[2].has_label);
  EXPECT_EQ(With(ds->findings, "label.missing").size(), 1u);
  EXPECT_EQ(With(ds->findings, "split.unknown_id").size(), 1u);
}

TEST_F(TempDirTest, VocMalformedXmlNamesFileAndLine) {
  Image("JPEGImages/a.jpg");
  Write("Annotations/a.xml", "<annotation>\n<filename>a.jpg</filename>\n<object><name>x</object>\n");
  auto ds = ReadDataset(root_, {});
  ASSERT_FALSE(ds.IsOk());
  EXPECT_EQ(ds.GetStatus().Where().file, P("Annotations/a.xml"));
  EXPECT_EQ(ds.GetStatus().Where().line, 3);
  EXPECT_NE(ds.GetStatus().Message().find("malformed XML"), std::string::npos);
}

TEST_F(TempDirTest, VocClassesTxtAndBadCoordinate) {
  Image("JPEGImages/a.jpg");
  Write("classes.txt", "zebra\nperson\n");
  Write("Annotations/a.xml",
        VocXml("a.jpg", VocObject("person", 1, 1, 5, 5) + VocObject("cow", 1, 1, 5, 5) +
                            "  <object><name>person</name><bndbox><xmin>x</xmin><ymin>1</ymin>"
                            "<xmax>2</xmax><ymax>2</ymax></bndbox></object>\n"));
  auto ds = ReadDataset(root_, {});
  ASSERT_TRUE(ds.IsOk()) << ds.GetStatus().ToString();
  EXPECT_EQ(ds->names, (std::vector<std::string>{"zebra", "person"}));
  ASSERT_EQ(ds->samples[0].pixel_boxes.size(), 1u);
  EXPECT_EQ(ds->samples[0].pixel_boxes[0].cls, 1);
  EXPECT_EQ(With(ds->findings, "label.class_range").size(), 1u);
  auto syn = With(ds->findings, "label.syntax");
  ASSERT_EQ(syn.size(), 1u);
  EXPECT_EQ(syn[0]->field, "bndbox/xmin");
}

TEST_F(TempDirTest, DetectFormat) {
  EXPECT_FALSE(DetectFormat(P("missing")).IsOk());
  fs::create_directories(P("x"));
  EXPECT_FALSE(DetectFormat(P("x")).IsOk());
  Write("y/data.yaml", "train: a\n");
  EXPECT_EQ(*DetectFormat(P("y")), "yolo");
  EXPECT_EQ(*DetectFormat(P("y/data.yaml")), "yolo");
  fs::create_directories(P("z/images"));
  EXPECT_EQ(*DetectFormat(P("z")), "yolo");
}

}  // namespace
}  // namespace kestrel::data
