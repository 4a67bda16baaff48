// `data=` as YOLO users type it (issue 11): a path to a data.yaml, a dataset
// folder or a COCO JSON is imported (content-addressed: once) and the
// version it resolved to is what train, submit and val use; a source with
// errors is reported exactly as `dataset import` reports it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

#include "cli_fixture.h"
#include "data/dataset_ref.h"

namespace {

namespace fs = std::filesystem;

using kestrel::testing::CliRun;

class DataPathTest : public kestrel::testing::KestrelCliTest {
 protected:
  void SetUp() override {
    KestrelCliTest::SetUp();
    ASSERT_EQ(Kestrel("dataset synth ds --images 12 --imgsz 64 --seed 5").code, 0);
  }
  nlohmann::json Datasets() { return Json(Kestrel("--json dataset list"))["datasets"]; }
  // The first label file of the train split (which images land in train
  // depends on the synth seed).
  fs::path FirstTrainLabel() {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir_ / "ds" / "labels" / "train")) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    EXPECT_FALSE(files.empty());
    return files.empty() ? fs::path() : files.front();
  }
  // Appends a malformed line (4 fields) to one label file.
  void BreakOneLabel() {
    std::ofstream f(FirstTrainLabel(), std::ios::app);
    f << "0 0.5 0.5 0.1\n";
  }
};

TEST(DatasetNameForPath, FolderFileAndGenericNames) {
  using kestrel::data::DatasetNameForPath;
  EXPECT_EQ(DatasetNameForPath("datasets/shapes"), "shapes");
  EXPECT_EQ(DatasetNameForPath("datasets/shapes/"), "shapes");
  EXPECT_EQ(DatasetNameForPath("/data/coco128.yaml"), "coco128");
  EXPECT_EQ(DatasetNameForPath("/data/shapes/data.yaml"), "shapes");
  EXPECT_EQ(DatasetNameForPath("/data/shapes/Data.YML"), "shapes");
  EXPECT_EQ(DatasetNameForPath("/d/coco/annotations/instances_val2017.json"), "coco");
  EXPECT_EQ(DatasetNameForPath("/d/rf/train/_annotations.coco.json"), "train")
      << "a split folder is the nearest name";
  EXPECT_EQ(DatasetNameForPath("/d/my set@2/data.yaml"), "my_set_2")
      << "registry names have no spaces or '@'";
  EXPECT_EQ(DatasetNameForPath("/data.yaml"), "data");
  EXPECT_EQ(DatasetNameForPath("/"), "dataset");
}

TEST(IsDatasetPath, SlashOrSourceExtension) {
  using kestrel::data::IsDatasetPath;
  for (const char* p : {"ds/", "./ds", "/abs/ds", "data.yaml", "x.YML", "instances.json", ".", ".."}) {
    EXPECT_TRUE(IsDatasetPath(p)) << p;
  }
  for (const char* r : {"shapes", "shapes@v2", "shapes@1a2b3c", "coco128"})
    EXPECT_FALSE(IsDatasetPath(r)) << r;
}

#ifdef KESTREL_CLI_WITH_TORCH
// The second run reuses the version the first imported: one dataset, one
// version, and the output says which.
TEST_F(DataPathTest, TrainTwiceOnTheSameYamlImportsOnce) {
  const std::string args =
      "model=t imgsz=64 batch=4 workers=1 threads=1 epochs=1 warmup_epochs=0 plots=false project=runs ";
  CliRun first = Kestrel("--json train data=ds/data.yaml " + args + "name=a");
  ASSERT_EQ(first.code, 0) << first.out;
  auto a = Json(first);
  EXPECT_EQ(a["data"]["dataset"], "ds");
  EXPECT_EQ(a["data"]["version"], "v1");
  EXPECT_EQ(a["data"]["created"], true);
  CliRun second = Kestrel("--json train data=ds/data.yaml " + args + "name=b");
  ASSERT_EQ(second.code, 0) << second.out;
  auto b = Json(second);
  EXPECT_EQ(b["data"]["created"], false);
  EXPECT_EQ(b["data"]["version_id"], a["data"]["version_id"]);
  // The folder form of the same content: the same version.
  CliRun folder = Kestrel("--json train data=./ds " + args + "name=c");
  ASSERT_EQ(folder.code, 0) << folder.out;
  EXPECT_EQ(Json(folder)["data"]["version_id"], a["data"]["version_id"]);
  auto list = Datasets();
  ASSERT_EQ(list.size(), 1u) << list.dump();
  EXPECT_EQ(list[0]["num_versions"], 1);

  // Human output names the version.
  CliRun text = Kestrel("train data=ds/data.yaml " + args + "name=d");
  ASSERT_EQ(text.code, 0);
  EXPECT_NE(text.out.find("data: ds/data.yaml -> reused ds@v1 (version " +
                          a["data"]["version_id"].get<std::string>().substr(0, 12)),
            std::string::npos)
      << text.out;

  // Changed content: a new version of the same name.
  { std::ofstream(FirstTrainLabel()) << ""; }  // now a background image
  CliRun changed = Kestrel("--json train data=ds/data.yaml " + args + "name=e");
  ASSERT_EQ(changed.code, 0) << changed.out;
  EXPECT_EQ(Json(changed)["data"]["version"], "v2");
}
#endif

// A source with errors: train, submit and val answer with `dataset import`'s
// exact document and exit code, and store nothing.
TEST_F(DataPathTest, SourceWithErrorsIsReportedAsImportReportsIt) {
  BreakOneLabel();
  CliRun imp = Kestrel("--json dataset import ./ds --name ds");
  ASSERT_EQ(imp.code, 1) << imp.out;
  const auto expected = Json(imp);
  ASSERT_TRUE(expected.contains("report"));
  fs::create_directories(dir_ / "preds");
  for (const std::string cmd :
       {"train data=./ds model=t imgsz=64 epochs=1", "submit data=./ds model=t imgsz=64 epochs=1",
        "val predictions=preds data=./ds"}) {
    CliRun r = Kestrel("--json " + cmd);
    EXPECT_EQ(r.code, imp.code) << cmd;
    EXPECT_EQ(Json(r), expected) << cmd;
  }
  // Text mode: the same exit code.
  EXPECT_EQ(Kestrel("dataset import ./ds --name ds").code, 1);
  EXPECT_EQ(Kestrel("submit data=./ds model=t imgsz=64 epochs=1").code, 1);
  // A path that does not exist: import's error and exit code.
  CliRun none_imp = Kestrel("--json dataset import ./nowhere --name nowhere");
  CliRun none_sub = Kestrel("--json submit data=./nowhere model=t imgsz=64 epochs=1");
  EXPECT_EQ(none_sub.code, none_imp.code);
  EXPECT_EQ(Json(none_sub), Json(none_imp));
  EXPECT_TRUE(Datasets().empty()) << "a source with errors was stored";
  EXPECT_TRUE(Json(Kestrel("--json jobs list"))["jobs"].empty());
}

// `kestrel` does not link OpenCV's imgcodecs (its GDAL libraries cost every
// start ~0.1 s): JPEG and PNG are Kestrel's own codecs and a BMP, WebP or
// TIFF loads imgcodecs on first use (src/data/image.cc). A dataset with a
// BMP among its JPEGs imports all of its images.
TEST_F(DataPathTest, ABmpLoadsImgcodecsOnlyWhenMet) {
  CliRun needed = Run("readelf", std::string("-d ") + KESTREL_CLI);
  ASSERT_EQ(needed.code, 0) << needed.out;
  EXPECT_NE(needed.out.find("libopencv_core"), std::string::npos) << needed.out;
  EXPECT_EQ(needed.out.find("imgcodecs"), std::string::npos) << needed.out;
  const fs::path label = FirstTrainLabel();
  const fs::path jpg = dir_ / "ds" / "images" / "train" / (label.stem().string() + ".jpg");
  ASSERT_TRUE(fs::remove(jpg)) << jpg;
  // The test writes it through OpenCV (tests link imgcodecs; kestrel does not).
  ASSERT_TRUE(cv::imwrite((jpg.parent_path() / (label.stem().string() + ".bmp")).string(),
                          cv::Mat(30, 40, CV_8UC3, cv::Scalar(0xC0, 0x80, 0x20))));
  CliRun imp = Kestrel("--json dataset import ./ds --name bmp");
  ASSERT_EQ(imp.code, 0) << imp.out;
  EXPECT_EQ(Json(imp)["version"]["num_images"], 12) << imp.out;
  const nlohmann::json show = Json(Kestrel("--json dataset show bmp"));
  EXPECT_NE(show.dump().find("\"bmp\""), std::string::npos)
      << "no bmp in the summary's formats: " << show.dump();
}

// submit stores the version the path resolved to, never the path; val
// reuses the version train/submit imported.
TEST_F(DataPathTest, SubmitStoresTheVersionAndValReusesIt) {
  CliRun sub = Kestrel("--json submit data=ds/data.yaml model=t imgsz=64 epochs=1");
  ASSERT_EQ(sub.code, 0) << sub.out;
  const int64_t id = Json(sub)["job_id"];
  auto list = Datasets();
  ASSERT_EQ(list.size(), 1u);
  const std::string version_id = list[0]["version_id"];
  auto show = Json(Kestrel("--json jobs show " + std::to_string(id)));
  EXPECT_EQ(show["job"]["config"]["data"], "ds@" + version_id) << show.dump();
  // The same path again: the same job (same version, same config).
  CliRun again = Kestrel("--json submit data=ds model=t imgsz=64 epochs=1");
  EXPECT_EQ(again.code, 0) << "'ds' is a registry name now";
  EXPECT_EQ(Json(again)["job_id"], id);
  CliRun again_path = Kestrel("--json submit data=./ds/ model=t imgsz=64 epochs=1");
  EXPECT_EQ(Json(again_path)["job_id"], id);

  fs::create_directories(dir_ / "preds");
  CliRun val = Kestrel("--json val predictions=preds data=ds/data.yaml");
  ASSERT_EQ(val.code, 0) << val.out;
  EXPECT_EQ(Datasets()[0]["num_versions"], 1);
}

// Identical content already stored under another name is reused, not
// registered again.
TEST_F(DataPathTest, IdenticalContentUnderAnotherNameIsReused) {
  ASSERT_EQ(Kestrel("dataset import ds --name shapes").code, 0);
  fs::create_directories(dir_ / "preds");
  CliRun val = Kestrel("val predictions=preds data=ds/data.yaml");
  ASSERT_EQ(val.code, 0) << val.out;
  EXPECT_NE(val.out.find("data: ds/data.yaml -> reused shapes@v1"), std::string::npos) << val.out;
  auto list = Datasets();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["dataset"], "shapes");
}

}  // namespace

// data_mode=reference through the binary (issue 28 item 9; the mechanics are
// unit-tested in tests/data/reference_mode_test.cc): the flag and the key,
// the mode in `show --json`, `verify` passing, then naming a changed file
// with exit 1, and `show` refusing the version.
// submit imports data=PATH at submit time as train does, data_mode= included
// (the job stores the version; its record carries the mode).
TEST_F(DataPathTest, SubmitImportsADataPathByReference) {
  const CliRun bogus = Kestrel("--json submit data=./ds data_mode=links model=t imgsz=64 epochs=1");
  EXPECT_NE(bogus.code, 0);
  EXPECT_NE(bogus.out.find("data_mode"), std::string::npos) << bogus.out;
  EXPECT_TRUE(Datasets().empty()) << "a refused submit imports nothing";
  const CliRun sub = Kestrel("--json submit data=./ds data_mode=reference model=t imgsz=64 epochs=1");
  ASSERT_EQ(sub.code, 0) << sub.out;
  EXPECT_EQ(Json(sub)["created"], true);
  const auto shown = Json(Kestrel("--json dataset show ds@v1"));
  EXPECT_EQ(shown["version"]["data_mode"], "reference") << shown.dump(1);
}

TEST_F(DataPathTest, ReferenceImportVerifyAndAChangedFile) {
  ASSERT_EQ(Kestrel("dataset import ds --name r --data-mode reference").code, 0);
  ASSERT_EQ(Kestrel("dataset import ds --name k data_mode=reference").code, 0);
  const auto shown = Json(Kestrel("--json dataset show r@v1"));
  EXPECT_EQ(shown["version"]["data_mode"], "reference");
  const auto ok = Json(Kestrel("--json dataset verify r@v1"));
  EXPECT_EQ(ok["ok"], true);
  EXPECT_EQ(ok["images"], 12);
  EXPECT_EQ(ok["referenced_files"], 12);

  std::vector<fs::path> images;
  for (const auto& e : fs::directory_iterator(dir_ / "ds" / "images" / "train")) images.push_back(e.path());
  std::sort(images.begin(), images.end());
  ASSERT_FALSE(images.empty());
  std::ofstream(images.front(), std::ios::binary | std::ios::app) << "x";
  const CliRun bad = Kestrel("dataset verify r@v1");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find(fs::absolute(images.front()).lexically_normal().string()), std::string::npos)
      << bad.out;
  const CliRun refused = Kestrel("--json dataset show r@v1");
  EXPECT_NE(refused.code, 0);
  const std::string message = Json(refused)["error"]["message"].get<std::string>();
  EXPECT_NE(message.find("r@v1"), std::string::npos) << message;
  EXPECT_NE(message.find("size"), std::string::npos) << message;
}
