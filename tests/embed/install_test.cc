// The installed C++ API, as a user gets it (docs/cpp-api.md): `cmake --install
// --component embed` into a temp prefix, examples/cpp configured and built
// against that prefix alone (find_package(Kestrel)), run on a generated image
// with an ONNX model `kestrel export` wrote; its boxes must be
// `kestrel predict model=*.onnx`'s. And the library needs no LibTorch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli_fixture.h"

namespace kestrel {
namespace {

namespace fs = std::filesystem;

class EmbedInstallTest : public testing::KestrelCliTest {
 protected:
  // A shell command in the test folder; stdout and stderr in *out.
  int Shell(const std::string& cmd, std::string* out) {
    FILE* p = popen(("cd '" + dir_.string() + "' && " + cmd + " 2>&1").c_str(), "r");
    if (p == nullptr) return -1;
    char buf[4096];
    size_t n;
    out->clear();
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
    const int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
};

TEST_F(EmbedInstallTest, ExampleBuiltAgainstTheInstalledPackageDetectsAsKestrelPredict) {
  // 1. A model: one epoch on a tiny synthetic set, exported to ONNX.
  ASSERT_EQ(Kestrel("dataset synth synth --images 8 --classes 2 --imgsz 64 --seed 5").code, 0);
  testing::CliRun train = Kestrel(
      "train data=./synth model=t epochs=1 imgsz=64 batch=4 workers=1 val=false plots=false mosaic=0 "
      "run_dir=run");
  ASSERT_EQ(train.code, 0) << train.out;
  testing::CliRun ex =
      Kestrel("export model=run/weights/last.safetensors format=onnx imgsz=64 output=m.onnx");
  ASSERT_EQ(ex.code, 0) << ex.out;
  ASSERT_TRUE(fs::exists(dir_ / "m.onnx"));

  // 2. The package, installed as a user would.
  std::string log;
  ASSERT_EQ(Shell(std::string(KESTREL_CMAKE) + " --install '" + KESTREL_BINARY_DIR +
                      "' --component embed --prefix prefix",
                  &log),
            0)
      << log;
  EXPECT_TRUE(fs::exists(dir_ / "prefix/include/kestrel/detector.h"));
  EXPECT_TRUE(fs::exists(dir_ / "prefix/lib/cmake/Kestrel/KestrelConfig.cmake"));
  // Nothing else of Kestrel's headers is installed.
  size_t headers = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "prefix/include"))
    headers += e.is_regular_file();
  EXPECT_EQ(headers, 1u);

  // 3. The example, configured with the prefix only (not the build tree),
  // with the generator this build uses (so no other build tool is assumed).
  ASSERT_EQ(
      Shell(std::string(KESTREL_CMAKE) + " -S '" + KESTREL_SOURCE_DIR + "/examples/cpp' -B example -G '" +
                KESTREL_CMAKE_GENERATOR + "' -DCMAKE_PREFIX_PATH=\"$PWD/prefix\" -DCMAKE_BUILD_TYPE=Release",
            &log),
      0)
      << log;
  ASSERT_EQ(Shell(std::string(KESTREL_CMAKE) + " --build example", &log), 0) << log;
  // The library it links is the installed one, and it needs no LibTorch.
  ASSERT_EQ(Shell("ldd example/detect", &log), 0) << log;
  EXPECT_NE(log.find((dir_ / "prefix/lib").string()), std::string::npos) << log;
  EXPECT_EQ(log.find("libtorch"), std::string::npos) << log;
  EXPECT_EQ(log.find("libc10"), std::string::npos) << log;

  // 4. A generated image: coloured shapes on grey, 96 x 80 (not the input size).
  cv::Mat bgr(80, 96, CV_8UC3, cv::Scalar(120, 130, 110));
  bgr(cv::Rect(10, 12, 30, 40)).setTo(cv::Scalar(30, 200, 240));
  bgr(cv::Rect(50, 28, 34, 32)).setTo(cv::Scalar(200, 60, 40));
  ASSERT_TRUE(cv::imwrite((dir_ / "img.png").string(), bgr));
  {
    std::ofstream ppm(dir_ / "img.ppm", std::ios::binary);
    ppm << "P6\n" << bgr.cols << " " << bgr.rows << "\n255\n";
    for (int y = 0; y < bgr.rows; ++y) {
      for (int x = 0; x < bgr.cols; ++x) {
        const cv::Vec3b p = bgr.at<cv::Vec3b>(y, x);
        const char rgb[3] = {char(p[2]), char(p[1]), char(p[0])};
        ppm.write(rgb, 3);
      }
    }
  }

  // 5. The example and the CLI on the same pixels, at a low threshold so a
  // one-epoch model (scores near the Detect head's initial ~1e-3) still
  // gives boxes.
  ASSERT_EQ(Shell("example/detect m.onnx img.ppm 0.0005", &log), 0) << log;
  std::istringstream lines(log);
  std::string header;
  std::getline(lines, header);
  EXPECT_NE(header.find("input 64 px, 2 classes"), std::string::npos) << log;
  struct Box {
    int cls;
    std::string name;
    double score, x1, y1, x2, y2;
  };
  std::vector<Box> mine;
  Box b;
  while (lines >> b.cls >> b.name >> b.score >> b.x1 >> b.y1 >> b.x2 >> b.y2) mine.push_back(b);
  testing::CliRun pred = Kestrel("--json predict model=m.onnx source=img.png conf=0.0005 save=false");
  ASSERT_EQ(pred.code, 0) << pred.out;
  const nlohmann::json dets = Json(pred)["images"][0]["detections"];
  ASSERT_EQ(mine.size(), dets.size()) << log << "\n" << pred.out;
  ASSERT_GT(mine.size(), 0u) << "no detections at conf 0.01: nothing compared";
  double max_x2 = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    // Pixels of the 96 x 80 image, not of the 64 px network input.
    EXPECT_GE(mine[i].x1, 0) << i;
    EXPECT_GE(mine[i].y1, 0) << i;
    EXPECT_LE(mine[i].x2, 96) << i;
    EXPECT_LE(mine[i].y2, 80) << i;
    max_x2 = std::max(max_x2, mine[i].x2);
    const nlohmann::json& d = dets[i];
    EXPECT_EQ(mine[i].cls, d["class_id"].get<int>()) << i;
    EXPECT_EQ(mine[i].name, d["name"].get<std::string>()) << i;
    EXPECT_NEAR(mine[i].score, d["confidence"].get<double>(), 1e-4) << i;
    for (int k = 0; k < 4; ++k) {
      const double v[4] = {mine[i].x1, mine[i].y1, mine[i].x2, mine[i].y2};
      EXPECT_NEAR(v[k], d["box_xyxy"][k].get<double>(), 0.06) << i << " coordinate " << k;
    }
  }

  EXPECT_GT(max_x2, 64) << "boxes look like network-input pixels";

  // 6. Errors are values naming the file.
  ASSERT_EQ(Shell("example/detect missing.onnx img.ppm", &log), 1);
  EXPECT_NE(log.find("missing.onnx"), std::string::npos) << log;
}

}  // namespace
}  // namespace kestrel
