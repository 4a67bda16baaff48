// `predict` on a folder with files it cannot read (issue 26, item 14): a
// truncated JPEG or a text file named .png is skipped with a finding and the
// other images are predicted; x.jpg and x.webp, and a/x.jpg and b/x.jpg, each
// keep their own outputs; an image without detections gets no labels/*.txt
// (the reference's save_txt). The pipeline (app::PredictWith) runs a fake
// detector here (no model, milliseconds); the exit status is checked through
// `kestrel predict` with the reference weights at imgsz 64.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#include <regex>
#include <string>
#include <vector>

#include "../cli/cli_fixture.h"
#include "app/detector.h"
#include "app/predict.h"
#include "core/env.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

// One box on images whose first pixel is bright (red > 128), none on dark
// ones: the test chooses which image has detections.
class BrightPixelDetector final : public Detector {
 public:
  BrightPixelDetector() { options_.batch = 2; }
  int NumClasses() const override { return 1; }
  const std::vector<std::string>& Names() const override { return names_; }
  std::string Arch() const override { return "fake"; }
  const eval::InferenceOptions& Options() const override { return options_; }
  Result<std::vector<eval::ImagePrediction>> Predict(const std::vector<eval::ImageView>& images) override {
    std::vector<eval::ImagePrediction> out;
    for (const auto& v : images) {
      eval::ImagePrediction p;
      p.width = v.width;
      p.height = v.height;
      if (v.data[0] > 128) {
        eval::Detection d;
        d.box = {1, 1, float(v.width - 1), float(v.height - 1)};
        d.score = 0.9f;
        d.class_id = 0;
        p.detections.push_back(d);
      }
      out.push_back(std::move(p));
    }
    ++batches;
    return out;
  }
  Result<std::vector<eval::ImagePrediction>> PredictVal(
      const std::vector<eval::ImageSize>&, const eval::ValShapeOptions&,
      const std::function<Result<eval::ImageView>(size_t)>&) override {
    return Status::Internal("not used");
  }
  eval::StageTimes Timing() const override { return {}; }
  int batches = 0;

 private:
  std::vector<std::string> names_{"thing"};
  eval::InferenceOptions options_;
};

class PredictFolderTest : public testing::KestrelCliTest {
 protected:
  // A 16x12 image file, bright (a detection) or dark (none), in the format
  // its extension names.
  void Image(const std::string& rel, bool bright) {
    const cv::Mat img(12, 16, CV_8UC3, bright ? cv::Scalar(255, 255, 255) : cv::Scalar(10, 10, 10));
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(cv::imencode(fs::path(rel).extension().string(), img, bytes)) << rel;
    Bytes(rel, std::string(bytes.begin(), bytes.end()));
  }
  void Bytes(const std::string& rel, const std::string& data) {
    fs::create_directories((dir_ / rel).parent_path());
    std::ofstream(dir_ / rel, std::ios::binary) << data;
  }
  std::string Read(const std::string& rel) { return Env::Default().ReadFile((dir_ / rel).string()).Value(); }

  // app::PredictWith over the fake detector.
  Result<PredictResult> Run(const std::string& source, const std::string& name) {
    PredictRequest req;
    req.model = "fake.safetensors";
    req.source = (dir_ / source).string();
    req.project = (dir_ / "runs").string();
    req.name = name;
    return PredictWith(Env::Default(), req, {},
                       [this](const std::string&, const eval::InferenceOptions&,
                              const DetectorPlacement&) -> Result<std::unique_ptr<Detector>> {
                         auto d = std::make_unique<BrightPixelDetector>();
                         detector_ = d.get();
                         return std::unique_ptr<Detector>(std::move(d));
                       });
  }

  BrightPixelDetector* detector_ = nullptr;
};

TEST_F(PredictFolderTest, BadFilesAreSkippedWithAFindingAndEveryGoodImageKeepsItsOutputs) {
  Image("in/good.jpg", true);
  Image("in/dark.png", false);
  Image("in/x.jpg", true);
  Image("in/x.png", true);
  Image("in/x.webp", true);
  Image("in/a/x.jpg", true);
  Image("in/b/x.jpg", false);
  Bytes("in/fake.png", "this is a text file, not a PNG\n");
  Image("in/cut.jpg", true);
  const std::string jpg = Read("in/cut.jpg");
  Bytes("in/cut.jpg", jpg.substr(0, jpg.size() / 2));  // truncated: no end-of-image marker
  Bytes("in/readme.txt", "not an image extension: ignored");
  Bytes("in/.hidden.jpg", "hidden entries are not listed");

  Result<PredictResult> r = Run("in", "mixed");
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  const std::string in = (dir_ / "in").string();

  // Skipped: the two bad files, in listing order, each with its reason.
  ASSERT_EQ(r->skipped.size(), 2u);
  EXPECT_EQ(r->skipped[0].source, in + "/cut.jpg");
  EXPECT_NE(r->skipped[0].reason.find("truncated JPEG"), std::string::npos) << r->skipped[0].reason;
  EXPECT_EQ(r->skipped[1].source, in + "/fake.png");
  EXPECT_FALSE(r->skipped[1].reason.empty());
  EXPECT_EQ(PredictExitCode(*r), 1);

  // Predicted: every good image, sorted by relative path, outputs collision-free.
  std::vector<std::string> sources, outputs;
  for (const auto& im : r->images) {
    sources.push_back(im.source.substr(in.size() + 1));
    outputs.push_back(im.output);
  }
  EXPECT_EQ(sources, (std::vector<std::string>{"a/x.jpg", "b/x.jpg", "dark.png", "good.jpg", "x.jpg", "x.png",
                                               "x.webp"}));
  EXPECT_EQ(outputs, (std::vector<std::string>{"a/x", "b/x", "dark", "good", "x", "x.png", "x.webp"}));
  EXPECT_EQ(detector_->batches, 4);  // 7 images, batch 2: the skipped ones take no slot

  const fs::path run = dir_ / "runs/mixed";
  for (const std::string& out : outputs) {
    EXPECT_TRUE(fs::is_regular_file(run / (out + ".jpg"))) << out;
    EXPECT_TRUE(fs::is_regular_file(run / (out + ".json"))) << out;
  }
  // YOLO txt only where something was detected (dark.png and b/x.jpg: none).
  for (const char* out : {"a/x", "good", "x", "x.png", "x.webp"})
    EXPECT_TRUE(fs::is_regular_file(run / "labels" / (std::string(out) + ".txt"))) << out;
  EXPECT_FALSE(fs::exists(run / "labels/dark.txt"));
  EXPECT_FALSE(fs::exists(run / "labels/b/x.txt"));
  EXPECT_TRUE(fs::is_directory(run / "labels"));
  // x.png's and x.webp's JSON are their own, not x.jpg's.
  EXPECT_EQ(nlohmann::json::parse(Read("runs/mixed/x.webp.json"))["source"], in + "/x.webp");
  EXPECT_EQ(nlohmann::json::parse(Read("runs/mixed/x.png.json"))["source"], in + "/x.png");
  EXPECT_EQ(nlohmann::json::parse(Read("runs/mixed/x.json"))["source"], in + "/x.jpg");
  EXPECT_FALSE(fs::exists(run / "cut.jpg"));
  EXPECT_FALSE(fs::exists(run / "fake.json"));

  // The JSON and text views count and list the skipped files.
  const nlohmann::json j = PredictResultJson(*r);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["predicted"], 7);
  ASSERT_EQ(j["skipped"].size(), 2u);
  EXPECT_EQ(j["skipped"][1]["source"], in + "/fake.png");
  EXPECT_EQ(j["images"][5]["output"], "x.png");
  const std::string text = PredictResultText(*r);
  EXPECT_NE(text.find("skipped " + in + "/fake.png: "), std::string::npos) << text;
  EXPECT_NE(text.find("7 images predicted, 2 skipped\n"), std::string::npos) << text;
}

TEST_F(PredictFolderTest, AllImagesReadableExitsZero) {
  Image("in/one.jpg", true);
  Image("in/two.bmp", false);
  Result<PredictResult> r = Run("in", "clean");
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(r->skipped.empty());
  EXPECT_EQ(PredictExitCode(*r), 0);
  EXPECT_EQ(PredictResultJson(*r)["ok"], true);
  EXPECT_NE(PredictResultText(*r).find("2 images predicted, 0 skipped\n"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "runs/clean/labels/one.txt"));
  EXPECT_FALSE(fs::exists(dir_ / "runs/clean/labels/two.txt"));
}

TEST_F(PredictFolderTest, NoReadableImageIsAnErrorNamingTheSourceAndWritesNothing) {
  Bytes("in/fake.png", "text");
  Bytes("in/empty.jpg", "");
  Result<PredictResult> r = Run("in", "none");
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kCorruption);
  EXPECT_EQ(r.GetStatus().Where().field, "source");
  EXPECT_NE(r.GetStatus().Message().find("no image could be read (2 skipped)"), std::string::npos)
      << r.GetStatus().Message();
  EXPECT_NE(r.GetStatus().Message().find("fake.png"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "runs"));

  // A single bad file as the source: the same error, nothing written.
  r = Run("in/fake.png", "single");
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kCorruption);
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

TEST(PredictOutputNamesTest, DeterministicAndCollisionFree) {
  // The reference's name (the stem) first, then the file name with its
  // extension, then a number; subfolders keep their relative path.
  EXPECT_EQ(PredictOutputNames("/d", {"/d/x.jpg", "/d/x.webp", "/d/x.webp.png", "/d/a/x.jpg", "/d/b/x.jpg"}),
            (std::vector<std::string>{"x", "x.webp", "x.webp.png", "a/x", "b/x"}));
  EXPECT_EQ(PredictOutputNames("/d/", {"/d/x.png.jpg", "/d/x.jpg", "/d/x.png"}),
            (std::vector<std::string>{"x.png", "x", "x.png-2"}));
  // A single file (no root): its file name's stem.
  EXPECT_EQ(PredictOutputNames("", {"/some/where/img.jpg"}), (std::vector<std::string>{"img"}));
}

// `kestrel predict` exit status (docs/cli.md "Exit codes", `predict --help`): 1
// when a file was skipped, 0 when every image was predicted.
TEST_F(PredictFolderTest, CliExitStatusCountsSkippedFiles) {
  const std::string weights = std::string(KESTREL_SHARED_DIR) + "/reference/yolov8n_nc3_weights.safetensors";
  if (!fs::exists(weights)) GTEST_SKIP() << "no ../shared reference weights";
  Image("in/good.jpg", true);
  Bytes("in/fake.png", "text");
  const std::string args = " predict model=" + weights + " source=" + (dir_ / "in").string() +
                           " project=" + (dir_ / "runs").string() + " imgsz=64";
  testing::CliRun bad = Kestrel("--json" + args + " name=bad");
  EXPECT_EQ(bad.code, 1) << bad.out;
  const nlohmann::json j = Json(bad);
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["predicted"], 1);
  ASSERT_EQ(j["skipped"].size(), 1u);
  EXPECT_EQ(j["skipped"][0]["source"], (dir_ / "in/fake.png").string());
  EXPECT_TRUE(fs::exists(dir_ / "runs/bad/good.jpg"));

  fs::remove(dir_ / "in/fake.png");
  testing::CliRun good = Kestrel(args.substr(1) + " name=good");
  EXPECT_EQ(good.code, 0) << good.out;
  EXPECT_NE(good.out.find("1 image predicted, 0 skipped"), std::string::npos) << good.out;

  testing::CliRun help = Kestrel("predict --help");
  EXPECT_NE(help.out.find("Exit status: 0 every image predicted; 1 a file could not be read"),
            std::string::npos)
      << help.out;
}

// Ctrl-C on `kestrel predict ... stream=true` (issue 28): a real SIGINT to
// the process after its third frame line. It exits 130 with the summary
// saying it was stopped, and the run folder is in place with a playable
// annotated video of exactly the frames it reports (the stop path inside
// the run, over a loopback HTTP stream, is
// PredictSourcesTest.AStopMidStreamCommitsTheFramesDoneAndClosesTheVideo;
// here a 400-frame file is the source, long enough to be mid-run). E2E:
// ~2 s, most of it LibTorch's start and the model load.
TEST_F(PredictFolderTest, CliCtrlCMidStreamCommitsTheRunAndExits130) {
  const std::string weights = std::string(KESTREL_SHARED_DIR) + "/reference/yolov8n_nc3_weights.safetensors";
  if (!fs::exists(weights)) GTEST_SKIP() << "no ../shared reference weights";
  const std::string clip = (dir_ / "clip.mp4").string();
  {
    cv::VideoWriter vw(clip, cv::CAP_FFMPEG, cv::VideoWriter::fourcc('m', 'p', '4', 'v'), 10, {64, 48});
    ASSERT_TRUE(vw.isOpened());
    for (int k = 0; k < 400; ++k) vw.write(cv::Mat(48, 64, CV_8UC3, cv::Scalar(k % 256, 90, 200)));
  }
  std::vector<std::string> args = {KESTREL_CLI,
                                   "predict",
                                   "model=" + weights,
                                   "source=" + clip,
                                   "stream=true",
                                   "imgsz=64",
                                   "project=" + (dir_ / "runs").string(),
                                   "name=s"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    ::close(fds[1]);
    ::setenv("KESTREL_HOME", (dir_ / "home").c_str(), 1);
    ::execv(KESTREL_CLI, argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  bool signalled = false;
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) {
    out.append(buf, size_t(n));
    if (!signalled && std::count(out.begin(), out.end(), '\n') >= 3) {
      ::kill(pid, SIGINT);
      signalled = true;
    }
  }
  ::close(fds[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(signalled) << out;
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << "\n" << out;
  EXPECT_EQ(WEXITSTATUS(status), 130) << out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      out, m, std::regex(R"((\d+) video frames predicted, 0 skipped, stopped by a signal)")))
      << out;
  const int frames = std::stoi(m[1]);
  EXPECT_GE(frames, 3);
  EXPECT_LT(frames, 400);
  for (const auto& e : fs::directory_iterator(dir_ / "runs")) EXPECT_EQ(e.path().filename(), "s") << e.path();
  cv::VideoCapture back((dir_ / "runs/s/clip.mp4").string(), cv::CAP_FFMPEG);
  ASSERT_TRUE(back.isOpened());
  EXPECT_EQ(back.get(cv::CAP_PROP_FRAME_COUNT), frames);
  EXPECT_TRUE(fs::exists(dir_ / ("runs/s/clip_" + std::to_string(frames) + ".json")));
  EXPECT_FALSE(fs::exists(dir_ / ("runs/s/clip_" + std::to_string(frames + 1) + ".json")));
}

// Fixed boxes of two classes, whatever the image: two "cat" (one at the
// corner), one "dog", one wholly outside the image.
class FixedBoxesDetector final : public Detector {
 public:
  int NumClasses() const override { return 2; }
  const std::vector<std::string>& Names() const override { return names_; }
  std::string Arch() const override { return "fake"; }
  const eval::InferenceOptions& Options() const override { return options_; }
  Result<std::vector<eval::ImagePrediction>> Predict(const std::vector<eval::ImageView>& images) override {
    std::vector<eval::ImagePrediction> out;
    for (const auto& v : images) {
      eval::ImagePrediction p;
      p.width = v.width;
      p.height = v.height;
      p.detections = {{{10, 20, 30, 40}, 0.9f, 0},
                      {{0, 0, 30, 20}, 0.8f, 0},
                      {{70, 50, 95, 75}, 0.7f, 1},
                      {{200, 200, 210, 210}, 0.6f, 1}};
      out.push_back(std::move(p));
    }
    return out;
  }
  Result<std::vector<eval::ImagePrediction>> PredictVal(
      const std::vector<eval::ImageSize>&, const eval::ValShapeOptions&,
      const std::function<Result<eval::ImageView>(size_t)>&) override {
    return Status::Internal("not used");
  }
  eval::StageTimes Timing() const override { return {}; }

 private:
  std::vector<std::string> names_{"cat", "dog"};
  eval::InferenceOptions options_;
};

// save_crop=true (issue 28): crops/<class>/<stem>.jpg, <stem>2.jpg for the
// class's second crop, each the box grown as the reference's save_one_box
// (side * 1.02 + 10 px, truncated, clipped), cut from the undrawn image.
TEST_F(PredictFolderTest, SaveCropWritesEachDetectionsPaddedPixelsPerClass) {
  cv::Mat img(80, 100, CV_8UC3, cv::Scalar(255, 0, 0));      // BGR: blue ...
  img(cv::Rect(0, 0, 50, 80)).setTo(cv::Scalar(0, 0, 255));  // ... left half red
  std::vector<uint8_t> png;
  ASSERT_TRUE(cv::imencode(".png", img, png));
  Bytes("in/pic.png", std::string(png.begin(), png.end()));
  auto run = [&](bool save_crop, const std::string& name) {
    PredictRequest req;
    req.model = "fake.safetensors";
    req.source = (dir_ / "in/pic.png").string();
    req.project = (dir_ / "runs").string();
    req.name = name;
    req.save_crop = save_crop;
    return PredictWith(Env::Default(), req, {},
                       [](const std::string&, const eval::InferenceOptions&,
                          const DetectorPlacement&) -> Result<std::unique_ptr<Detector>> {
                         return std::unique_ptr<Detector>(std::make_unique<FixedBoxesDetector>());
                       });
  };
  Result<PredictResult> off = run(false, "plain");
  ASSERT_TRUE(off.IsOk()) << off.GetStatus().ToString();
  EXPECT_FALSE(fs::exists(dir_ / "runs/plain/crops"));  // off by default, as the reference

  Result<PredictResult> r = run(true, "crops");
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  const fs::path crops = dir_ / "runs/crops/crops";
  struct Want {
    std::string file;
    int w, h;
    bool red;
  };
  const std::vector<Want> want = {
      {"cat/pic.jpg", 31, 31, true},   // 10..30 x 20..40: x 4..35, y 14..45
      {"cat/pic2.jpg", 35, 25, true},  // 0..30 x 0..20: x -5..35, y -5..25, clipped at 0
      {"dog/pic.jpg", 36, 36, false},  // 70..95 x 50..75: x 64..100, y 44..80 (clipped at the edge)
  };
  for (const auto& w : want) {
    const cv::Mat crop = cv::imread((crops / w.file).string());
    ASSERT_FALSE(crop.empty()) << w.file;
    EXPECT_EQ(crop.cols, w.w) << w.file;
    EXPECT_EQ(crop.rows, w.h) << w.file;
    const cv::Scalar mean = cv::mean(crop);  // BGR
    EXPECT_GT(w.red ? mean[2] : mean[0], 200) << w.file;
    EXPECT_LT(w.red ? mean[0] : mean[2], 50) << w.file;
  }
  // The box outside the image has no pixels: no file; nothing else written.
  size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(crops)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, want.size());
}

}  // namespace
}  // namespace kestrel::app
