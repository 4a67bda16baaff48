// app/predict.h against the CLI: `kestrel predict --json` must print exactly
// the application layer's JSON view of the same input (the CLI is parse ->
// call -> print; a server calling the same function cannot drift from it),
// and a bad source or model is refused naming it before anything is written.
#include "app/predict.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <opencv2/core.hpp>
#include <opencv2/videoio.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../cli/cli_fixture.h"
#include "core/env.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

const std::string kRefWeights =
    std::string(KESTREL_SHARED_DIR) + "/reference/yolov8n_nc3_weights.safetensors";

class AppPredictTest : public testing::KestrelCliTest {};

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST_F(AppPredictTest, PredictJsonIsTheAppLayersView) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  ASSERT_EQ(Kestrel("dataset synth data --images 6 --imgsz 64 --classes 3 --seed 2").code, 0);
  const std::string source = (dir_ / "data/images/val").string();
  const std::string project = (dir_ / "runs/predict").string();
  const std::string args = " predict model=" + kRefWeights + " source=" + source + " project=" + project +
                           " imgsz=64 conf=0.0001 max_det=5";
  testing::CliRun cli = Kestrel("--json" + args + " name=cli");
  ASSERT_EQ(cli.code, 0) << cli.out;
  const nlohmann::json cj = Json(cli);

  PredictRequest req;
  req.model = kRefWeights;
  req.source = source;
  req.project = project;
  req.name = "app";
  req.imgsz = 64;
  req.conf = 0.0001;  // this untrained-for-the-data model's scores are tiny
  req.max_det = 5;
  Result<PredictResult> r = Predict(Env::Default(), req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  const nlohmann::json aj = PredictResultJson(*r);

  // Same document: same keys; the detections identical to the last bit;
  // only the run folder's name and the measured times differ.
  ASSERT_FALSE(aj["images"].empty());
  for (const auto& im : aj["images"]) ASSERT_FALSE(im["detections"].empty()) << "nothing to compare";
  EXPECT_EQ(cj["images"], aj["images"]);
  EXPECT_EQ(cj["ok"], aj["ok"]);
  EXPECT_EQ(cj["dir"], project + "/cli");
  EXPECT_EQ(aj["dir"], project + "/app");
  std::vector<std::string> ck, ak, csk, ask;
  for (const auto& [k, v] : cj.items()) ck.push_back(k);
  for (const auto& [k, v] : aj.items()) ak.push_back(k);
  for (const auto& [k, v] : cj["speed"].items()) csk.push_back(k);
  for (const auto& [k, v] : aj["speed"].items()) ask.push_back(k);
  EXPECT_EQ(ck, ak);
  EXPECT_EQ(csk, ask);
  // Both runs wrote the same files with the same per-image JSON.
  for (const auto& im : aj["images"]) {
    const std::string stem = fs::path(im["source"].get<std::string>()).stem().string();
    for (const std::string& rel : {stem + ".jpg", "labels/" + stem + ".txt", stem + ".json"}) {
      EXPECT_TRUE(fs::exists(fs::path(project) / "cli" / rel)) << rel;
      EXPECT_TRUE(fs::exists(fs::path(project) / "app" / rel)) << rel;
    }
    EXPECT_EQ(nlohmann::json::parse(Env::Default().ReadFile(project + "/cli/" + stem + ".json").Value()),
              nlohmann::json::parse(Env::Default().ReadFile(project + "/app/" + stem + ".json").Value()));
  }

  // The human output is the app layer's text: per-image lines identical, then
  // the speed line and "results saved to DIR".
  testing::CliRun text = Kestrel(args.substr(1) + " name=cli_text");
  ASSERT_EQ(text.code, 0) << text.out;
  const std::vector<std::string> cl = Lines(text.out), al = Lines(PredictResultText(*r));
  ASSERT_EQ(cl.size(), al.size()) << text.out;
  for (size_t i = 0; i + 2 < al.size(); ++i) EXPECT_EQ(cl[i], al[i]);
  EXPECT_EQ(cl.back(), "results saved to " + project + "/cli_text");
  EXPECT_EQ(cl[cl.size() - 2].rfind("speed: ", 0), 0u) << cl[cl.size() - 2];
}

TEST_F(AppPredictTest, PredictErrorsNameTheInputAndWriteNothing) {
  PredictRequest req;
  req.model = "nope.safetensors";
  req.source = (dir_ / "missing").string();
  req.project = (dir_ / "runs/predict").string();
  Result<PredictResult> r = Predict(Env::Default(), req);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(r.GetStatus().Where().field, "source");
  // The resolver runs only after the source was checked, and its error wins.
  fs::create_directories(dir_ / "imgs");
  std::ofstream(dir_ / "imgs/readme.txt") << "no images here";
  req.source = (dir_ / "imgs").string();
  bool resolved = false;
  r = Predict(Env::Default(), req, [&](std::string*) {
    resolved = true;
    return Status();
  });
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_FALSE(resolved);
  std::ofstream(dir_ / "imgs/a.png") << "x";
  r = Predict(Env::Default(), req, [&](std::string* w) {
    resolved = true;
    return Status::NotFound("no model named " + *w, {"", 0, "model"});
  });
  EXPECT_TRUE(resolved);
  EXPECT_EQ(r.GetStatus().Where().field, "model");
  req.model.clear();
  EXPECT_EQ(Predict(Env::Default(), req).GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(dir_ / "runs"));
}

// A video through `kestrel predict` (issue 28 item 3): stream=true with
// --json prints one JSON line per frame as it is predicted (the app layer's
// PredictedImageJson, frame numbered), then the summary document with no
// images kept; the run folder has the annotated .mp4; an unsupported
// source kind fails naming it.
TEST_F(AppPredictTest, VideoStreamJsonLinesThenTheSummary) {
  if (!fs::exists(kRefWeights)) GTEST_SKIP() << "no ../shared reference weights";
  const std::string clip = (dir_ / "clip.mp4").string();
  {
    cv::VideoWriter vw(clip, cv::CAP_FFMPEG, cv::VideoWriter::fourcc('m', 'p', '4', 'v'), 10, {96, 64});
    ASSERT_TRUE(vw.isOpened());
    for (int k = 0; k < 4; ++k) vw.write(cv::Mat(64, 96, CV_8UC3, cv::Scalar(40 * k, 120, 200)));
  }
  const std::string project = (dir_ / "runs").string();
  testing::CliRun cli = Kestrel("--json predict model=" + kRefWeights + " source=" + clip +
                                " project=" + project + " name=v imgsz=64 conf=0.0001 max_det=3 stream=true");
  ASSERT_EQ(cli.code, 0) << cli.out;
  std::istringstream in(cli.out);
  std::string line, rest;
  for (int k = 1; k <= 4; ++k) {
    ASSERT_TRUE(std::getline(in, line)) << cli.out;
    const nlohmann::json f = nlohmann::json::parse(line);
    EXPECT_EQ(f["frame"], k);
    EXPECT_EQ(f["source"], clip);
    EXPECT_EQ(f["output"], "clip_" + std::to_string(k));
    EXPECT_EQ(f["width"], 96);
  }
  for (std::string l; std::getline(in, l);) rest += l + "\n";
  const nlohmann::json doc = nlohmann::json::parse(rest);
  EXPECT_EQ(doc["predicted"], 4);
  EXPECT_EQ(doc["frames"], 4);
  EXPECT_TRUE(doc["images"].empty());
  EXPECT_TRUE(fs::is_regular_file(dir_ / "runs/v/clip.mp4"));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "runs/v/clip_4.json"));

  testing::CliRun screen = Kestrel("--json predict model=" + kRefWeights + " source=screen");
  EXPECT_EQ(screen.code, 1);
  EXPECT_NE(screen.out.find("source kind 'screen'"), std::string::npos) << screen.out;
}

}  // namespace
}  // namespace kestrel::app
