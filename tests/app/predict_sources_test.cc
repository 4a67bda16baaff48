// predict's sources beyond still images (issue 28 item 3): video files
// (alone, in a folder, every vid_stride-th frame), globs (`*`, `**`), a video
// read from a local HTTP server on loopback (the FFmpeg stream path), a
// camera index without its device and `screen` refused naming the kind,
// stream=true keeping no frame (resident memory bounded over a 400-frame
// video), the per-frame outputs (labels/<stem>_<frame>.txt, <stem>.mp4 written
// through VideoWriter) and the console's progress lines (piped and terminal).
// The detector is a fake (a box on frames whose first pixel is bright); the
// videos are made here with cv::VideoWriter. Unit tier: well under a second each.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/videoio.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "app/detector.h"
#include "app/predict.h"
#include "app/predict_source.h"
#include "app/video_io.h"
#include "backend_video/video_backend.h"
#include "cli/predict_console.h"
#include "core/env.h"

namespace kestrel::app {
namespace {

namespace fs = std::filesystem;

class BrightFrameDetector final : public Detector {
 public:
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
      if (v.data[0] > 128) p.detections.push_back({{2, 2, float(v.width - 2), float(v.height - 2)}, 0.9f, 0});
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
  eval::InferenceOptions options_;

 private:
  std::vector<std::string> names_{"thing"};
};

// VmRSS of this process in kB.
int64_t ResidentKb() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

class PredictSourcesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("kestrel_src_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // As kestrel-torch's and kestrel-deploy's main(): videos are read through
    // the program's video backend (app/video_io.h).
    InstallVideoBackend(backend_video::OpenCvVideoBackend());
  }
  void TearDown() override {
    fs::remove_all(dir_);
    InstallVideoBackend({});
  }

  // A video of `frames` frames, frame k (0-based) bright when k is even.
  std::string Video(const std::string& rel, int frames, int w = 64, int h = 48) {
    const fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    cv::VideoWriter vw(p.string(), cv::CAP_FFMPEG, cv::VideoWriter::fourcc('m', 'p', '4', 'v'), 10, {w, h});
    EXPECT_TRUE(vw.isOpened()) << p;
    for (int k = 0; k < frames; ++k) {
      vw.write(cv::Mat(h, w, CV_8UC3, k % 2 == 0 ? cv::Scalar(250, 250, 250) : cv::Scalar(5, 5, 5)));
    }
    return p.string();
  }
  void Image(const std::string& rel, bool bright) {
    const fs::path p = dir_ / rel;
    fs::create_directories(p.parent_path());
    cv::imwrite(p.string(),
                cv::Mat(12, 16, CV_8UC3, bright ? cv::Scalar(255, 255, 255) : cv::Scalar(9, 9, 9)));
  }

  Result<PredictResult> Run(PredictRequest req, const PredictSink& sink = {}) {
    req.model = "fake.safetensors";
    if (req.project == "runs/detect") req.project = (dir_ / "runs").string();
    if (req.name.empty()) req.name = "p";
    return PredictWith(
        Env::Default(), req, {},
        [](const std::string&, const eval::InferenceOptions& io,
           const DetectorPlacement&) -> Result<std::unique_ptr<Detector>> {
          auto d = std::make_unique<BrightFrameDetector>();
          d->options_ = io;
          return std::unique_ptr<Detector>(std::move(d));
        },
        sink);
  }
  Result<PredictResult> Run(const std::string& source) {
    PredictRequest req;
    req.source = source;
    return Run(req);
  }

  fs::path dir_;
};

TEST_F(PredictSourcesTest, VideoFileFramesAreNumberedAsTheReferenceWithAnAnnotatedMp4) {
  const std::string clip = Video("in/clip.mp4", 6);
  PredictRequest req;
  req.source = clip;
  req.batch = 4;  // a batch spans the end of the video: its frames still come in order
  Result<PredictResult> r = Run(req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  ASSERT_EQ(r->images.size(), 6u);
  EXPECT_EQ(r->predicted, 6);
  EXPECT_EQ(r->frames, 6);
  for (int k = 0; k < 6; ++k) {
    const PredictedImage& im = r->images[size_t(k)];
    EXPECT_EQ(im.source, clip);
    EXPECT_EQ(im.frame, k + 1);
    EXPECT_EQ(im.output, "clip_" + std::to_string(k + 1));
    EXPECT_EQ(im.width, 64);
    EXPECT_EQ(im.detections.size(), k % 2 == 0 ? 1u : 0u) << k;
  }
  const fs::path run = dir_ / "runs/p";
  // labels/<stem>_<frame>.txt for frames with detections (1, 3, 5), a JSON per frame.
  EXPECT_TRUE(fs::exists(run / "labels/clip_1.txt"));
  EXPECT_FALSE(fs::exists(run / "labels/clip_2.txt"));
  EXPECT_TRUE(fs::exists(run / "labels/clip_5.txt"));
  EXPECT_EQ(nlohmann::json::parse(Env::Default().ReadFile((run / "clip_2.json").string()).Value())["frame"],
            2);
  // The annotated video: every predicted frame, the source's size.
  cv::VideoCapture back((run / "clip.mp4").string(), cv::CAP_FFMPEG);
  ASSERT_TRUE(back.isOpened());
  EXPECT_EQ(back.get(cv::CAP_PROP_FRAME_COUNT), 6);
  EXPECT_EQ(back.get(cv::CAP_PROP_FRAME_WIDTH), 64);
  const nlohmann::json j = PredictResultJson(*r);
  EXPECT_EQ(j["frames"], 6);
  EXPECT_EQ(j["images"][2]["frame"], 3);
  EXPECT_NE(PredictResultText(*r).find("0 images and 6 video frames predicted, 0 skipped"),
            std::string::npos);
  EXPECT_NE(PredictResultText(*r).find(clip + " (frame 3): 64x48, 1 thing"), std::string::npos);
}

TEST_F(PredictSourcesTest, VidStrideGrabsStrideFramesAndDecodesTheLast) {
  // Source frames 0..9; stride 3 predicts source frames 2, 5, 8 (bright,
  // dark, bright) as frames 1, 2, 3.
  PredictRequest req;
  req.source = Video("clip.avi", 10);
  req.vid_stride = 3;
  Result<PredictResult> r = Run(req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  ASSERT_EQ(r->images.size(), 3u);
  EXPECT_EQ(r->images[0].detections.size(), 1u);
  EXPECT_EQ(r->images[1].detections.size(), 0u);
  EXPECT_EQ(r->images[2].detections.size(), 1u);
  EXPECT_EQ(r->images[2].output, "clip_3");

  req.vid_stride = 0;
  req.name = "zero";
  r = Run(req);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Where().field, "vid_stride");
  EXPECT_FALSE(fs::exists(dir_ / "runs/zero"));
  EXPECT_FALSE(fs::exists(dir_ / "runs/p2"));
}

TEST_F(PredictSourcesTest, AVideoInAFolderIsPredictedAndAnUnreadableOneIsSkippedByName) {
  Image("in/a.jpg", true);
  Video("in/b.mkv", 3);
  Image("in/c.png", false);
  std::ofstream(dir_ / "in/d.mp4") << "not a video";
  Result<PredictResult> r = Run((dir_ / "in").string());
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  std::vector<std::string> outputs;
  for (const auto& im : r->images) outputs.push_back(im.output);
  EXPECT_EQ(outputs, (std::vector<std::string>{"a", "b_1", "b_2", "b_3", "c"}));
  EXPECT_EQ(r->frames, 3);
  ASSERT_EQ(r->skipped.size(), 1u);
  EXPECT_EQ(r->skipped[0].source, (dir_ / "in/d.mp4").string());
  EXPECT_NE(r->skipped[0].reason.find("video"), std::string::npos) << r->skipped[0].reason;
  EXPECT_TRUE(fs::exists(dir_ / "runs/p/a.jpg"));
  EXPECT_TRUE(fs::exists(dir_ / "runs/p/b.mp4"));
  EXPECT_NE(PredictResultText(*r).find("2 images and 3 video frames predicted, 1 skipped"),
            std::string::npos);
}

// A program without a video backend (`kestrel` itself, which hands predict
// to kestrel-torch) refuses a video by name before anything is written,
// and still predicts still images.
TEST_F(PredictSourcesTest, WithoutAVideoBackendAVideoIsAFailedPreconditionNamingIt) {
  InstallVideoBackend({});  // the program is "kestrel": no app::InstallBackends in this test
  Image("in/a.jpg", true);
  const std::string clip = Video("in/b.mkv", 3);
  Result<PredictResult> r = Run((dir_ / "in").string());
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kFailedPrecondition) << r.GetStatus().ToString();
  EXPECT_EQ(r.GetStatus().Where().file, clip);
  EXPECT_EQ(r.GetStatus().Where().field, "source");
  EXPECT_NE(r.GetStatus().Message().find("kestrel has no video I/O"), std::string::npos)
      << r.GetStatus().Message();
  EXPECT_NE(r.GetStatus().Message().find("kestrel-torch"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ / "runs/p"));
  fs::remove(clip);
  r = Run((dir_ / "in").string());
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_EQ(r->predicted, 1);
}

TEST_F(PredictSourcesTest, GlobsMatchOneFolderOrEveryFolderBelowWithDoubleStar) {
  Image("g/a.jpg", true);
  Image("g/b.png", true);
  Image("g/sub/c.jpg", true);
  Image("g/sub/deeper/d.jpg", true);
  Image("g/.hidden/e.jpg", true);
  Image("g/.f.jpg", true);
  const std::string g = (dir_ / "g").string();

  Result<std::vector<std::string>> m = ExpandGlob(Env::Default(), g + "/*.jpg");
  ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
  EXPECT_EQ(*m, (std::vector<std::string>{g + "/a.jpg"}));
  std::string root;
  m = ExpandGlob(Env::Default(), g + "/**/*.jpg", &root);
  ASSERT_TRUE(m.IsOk());
  EXPECT_EQ(root, g);
  EXPECT_EQ(*m, (std::vector<std::string>{g + "/a.jpg", g + "/sub/c.jpg", g + "/sub/deeper/d.jpg"}));
  m = ExpandGlob(Env::Default(), g + "/s?b/*");
  ASSERT_TRUE(m.IsOk());
  EXPECT_EQ(*m, (std::vector<std::string>{g + "/sub/c.jpg"}));  // files only, not the folder deeper/

  // As a source: outputs named relative to the pattern's fixed folder.
  Result<PredictResult> r = Run(g + "/**/*.jpg");
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  std::vector<std::string> outputs;
  for (const auto& im : r->images) outputs.push_back(im.output);
  EXPECT_EQ(outputs, (std::vector<std::string>{"a", "sub/c", "sub/deeper/d"}));

  r = Run(g + "/*.gif");
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kNotFound);
  EXPECT_EQ(r.GetStatus().Where().field, "source");
  EXPECT_NE(r.GetStatus().Message().find("no file matches"), std::string::npos) << r.GetStatus().Message();
}

TEST_F(PredictSourcesTest, UnsupportedKindsAndMissingCamerasAreNamed) {
  Env& env = Env::Default();
  Result<PredictSource> s = ResolvePredictSource(env, "screen");
  ASSERT_FALSE(s.IsOk());
  EXPECT_EQ(s.GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.GetStatus().Where().field, "source");
  EXPECT_NE(s.GetStatus().Message().find("'screen'"), std::string::npos) << s.GetStatus().Message();

  s = ResolvePredictSource(env, "ftp://example.org/clip.mp4");
  ASSERT_FALSE(s.IsOk());
  EXPECT_NE(s.GetStatus().Message().find("'ftp://'"), std::string::npos) << s.GetStatus().Message();

  // A camera index whose /dev/videoN does not exist (none on a CI machine).
  if (!fs::exists("/dev/video63")) {
    s = ResolvePredictSource(env, "63");
    ASSERT_FALSE(s.IsOk());
    EXPECT_EQ(s.GetStatus().Code(), StatusCode::kNotFound);
    EXPECT_NE(s.GetStatus().Message().find("camera 63 not found: /dev/video63 does not exist"),
              std::string::npos)
        << s.GetStatus().Message();
  }
  s = ResolvePredictSource(env, "rtsp://10.0.0.7:554/live/cam1?token=x");
  ASSERT_TRUE(s.IsOk());
  EXPECT_EQ(s->kind, PredictSourceKind::kStream);
  EXPECT_EQ(s->stem, "cam1");
  EXPECT_TRUE(IsVideoExtension("MOV"));
  EXPECT_TRUE(IsVideoExtension(".webm"));
  EXPECT_FALSE(IsVideoExtension("jpg"));
}

// Serves one file over HTTP/1.1 on 127.0.0.1 (Range requests answered with
// 206, as FFmpeg asks for them), one connection at a time, until destroyed.
class LoopbackFileServer {
 public:
  explicit LoopbackFileServer(std::string body) : body_(std::move(body)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    listen(fd_, 8);
    thread_ = std::thread([this] { Serve(); });
  }
  ~LoopbackFileServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  int requests() const { return requests_; }

 private:
  void Serve() {
    while (!stop_) {
      const int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = recv(c, buf, sizeof(buf), 0);
        if (n <= 0) break;
        req.append(buf, size_t(n));
      }
      ++requests_;
      size_t from = 0, to = body_.size() - 1;
      const size_t range = req.find("Range: bytes=");
      const bool partial = range != std::string::npos;
      if (partial) {
        const std::string spec = req.substr(range + 13, req.find("\r\n", range) - range - 13);
        from = std::stoul(spec.substr(0, spec.find('-')));
        const std::string end = spec.substr(spec.find('-') + 1);
        if (!end.empty()) to = std::min(to, size_t(std::stoul(end)));
      }
      std::string head = std::string(partial ? "HTTP/1.1 206 Partial Content\r\n" : "HTTP/1.1 200 OK\r\n") +
                         "Content-Type: video/mp4\r\nAccept-Ranges: bytes\r\nConnection: close\r\n";
      if (from > to) {
        head = "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        (void)!send(c, head.data(), head.size(), MSG_NOSIGNAL);  // best effort: the client may be gone
        close(c);
        continue;
      }
      if (partial) {
        head += "Content-Range: bytes " + std::to_string(from) + "-" + std::to_string(to) + "/" +
                std::to_string(body_.size()) + "\r\n";
      }
      head += "Content-Length: " + std::to_string(to - from + 1) + "\r\n\r\n";
      const std::string out = head + body_.substr(from, to - from + 1);
      (void)!send(c, out.data(), out.size(), MSG_NOSIGNAL);  // best effort: FFmpeg may close early
      close(c);
    }
  }
  std::string body_;
  int fd_ = -1, port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

TEST_F(PredictSourcesTest, AnHttpVideoUrlIsReadAsAStreamThroughFfmpeg) {
  const std::string clip = Video("served.mp4", 5);
  LoopbackFileServer server(Env::Default().ReadFile(clip).Value());
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port()) + "/videos/served.mp4";
  PredictRequest req;
  req.source = url;
  Result<PredictResult> r = Run(req);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_GE(server.requests(), 1);
  ASSERT_EQ(r->images.size(), 5u);
  EXPECT_EQ(r->images[0].source, url);
  EXPECT_EQ(r->images[0].output, "served_1");
  EXPECT_EQ(r->images[1].detections.size(), 0u);
  EXPECT_TRUE(fs::exists(dir_ / "runs/p/served.mp4"));
  EXPECT_TRUE(fs::exists(dir_ / "runs/p/labels/served_1.txt"));
}

// Ctrl-C on `kestrel predict source=<stream> stream=true` (issue 28): the
// CLI's handler raises PredictRequest::stop; here the sink raises it after
// frame 10 of a 60-frame HTTP stream on loopback. What was done is
// committed: the run folder moved in (no staging folder left), the .mp4
// closed with exactly the 10 frames, each frame's txt and JSON, and the
// result says stopped (exit kPredictExitStopped, 130).
TEST_F(PredictSourcesTest, AStopMidStreamCommitsTheFramesDoneAndClosesTheVideo) {
  const std::string clip = Video("live.mp4", 60);
  LoopbackFileServer server(Env::Default().ReadFile(clip).Value());
  std::atomic<bool> stop{false};
  PredictRequest req;
  req.source = "http://127.0.0.1:" + std::to_string(server.port()) + "/live.mp4";
  req.stream = true;
  req.stop = &stop;
  Result<PredictResult> r =
      Run(req, [&](const PredictedImage& im, const PredictProgress&, const std::vector<std::string>&) {
        if (im.frame == 10) stop = true;
      });
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(r->predicted, 10);
  EXPECT_EQ(r->frames, 10);
  EXPECT_EQ(PredictExitCode(*r), kPredictExitStopped);
  EXPECT_EQ(kPredictExitStopped, 130);
  EXPECT_EQ(PredictResultJson(*r)["stopped"], true);
  EXPECT_NE(PredictResultText(*r).find("stopped by a signal"), std::string::npos);
  for (const auto& e : fs::directory_iterator(dir_ / "runs"))
    EXPECT_EQ(e.path().filename(), "p") << "left behind: " << e.path();
  cv::VideoCapture back((dir_ / "runs/p/live.mp4").string(), cv::CAP_FFMPEG);
  ASSERT_TRUE(back.isOpened());
  EXPECT_EQ(back.get(cv::CAP_PROP_FRAME_COUNT), 10);
  int decoded = 0;
  for (cv::Mat f; back.read(f);) ++decoded;
  EXPECT_EQ(decoded, 10);
  for (int f = 1; f <= 10; ++f) {
    const std::string stem = "live_" + std::to_string(f);
    EXPECT_TRUE(fs::exists(dir_ / ("runs/p/" + stem + ".json"))) << stem;
    EXPECT_EQ(fs::exists(dir_ / ("runs/p/labels/" + stem + ".txt")), f % 2 == 1) << stem;  // bright frames
  }
  EXPECT_FALSE(fs::exists(dir_ / "runs/p/live_11.json"));

  // Stopped before the first frame: nothing written, an error naming the source.
  std::atomic<bool> early{true};
  PredictRequest none = req;
  none.stop = &early;
  none.name = "q";
  Result<PredictResult> n = Run(none);
  ASSERT_FALSE(n.IsOk());
  EXPECT_EQ(n.GetStatus().Where().file, none.source);
  EXPECT_FALSE(fs::exists(dir_ / "runs/q"));
}

TEST_F(PredictSourcesTest, AStreamThatCannotBeOpenedIsUnavailableNamingTheSource) {
  int port = 0;
  {
    LoopbackFileServer gone("");
    port = gone.port();
  }  // closed: nothing listens on the port now
  PredictRequest req;
  req.source = "http://127.0.0.1:" + std::to_string(port) + "/x.mp4";
  Result<PredictResult> r = Run(req);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kUnavailable);
  EXPECT_EQ(r.GetStatus().Where().file, req.source);
  EXPECT_FALSE(fs::exists(dir_ / "runs"));  // nothing written, not even the project folder
}

TEST_F(PredictSourcesTest, StreamTrueKeepsNoFrameAndResidentMemoryStaysFlat) {
  // 400 frames of 320x240 (230 kB decoded each, 92 MB if they were kept).
  PredictRequest req;
  req.source = Video("long.mp4", 400, 320, 240);
  req.stream = true;
  req.save = true;  // the annotated video is written as it goes, too
  req.save_json = false;
  int64_t frames_seen = 0, rss_at_20 = 0, rss_at_end = 0, last_done = 0, total = 0;
  Result<PredictResult> r = Run(
      req, [&](const PredictedImage& im, const PredictProgress& p, const std::vector<std::string>& names) {
        ++frames_seen;
        EXPECT_EQ(im.frame, frames_seen);
        EXPECT_EQ(names, std::vector<std::string>{"thing"});
        last_done = p.done;
        total = p.total;
        if (p.done == 20) rss_at_20 = ResidentKb();
        if (p.done == 400) rss_at_end = ResidentKb();
      });
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(r->images.empty());
  EXPECT_EQ(r->predicted, 400);
  EXPECT_EQ(frames_seen, 400);
  EXPECT_EQ(last_done, 400);
  EXPECT_EQ(total, 400);
  ASSERT_GT(rss_at_20, 0);
  EXPECT_LT(rss_at_end - rss_at_20, 30 * 1024) << "kB grown between frame 20 and frame 400";
  cv::VideoCapture back((dir_ / "runs/p/long.mp4").string(), cv::CAP_FFMPEG);
  EXPECT_EQ(back.get(cv::CAP_PROP_FRAME_COUNT), 400);
  EXPECT_EQ(PredictResultJson(*r)["images"].size(), 0u);
}

TEST_F(PredictSourcesTest, ConsolePrintsOneProgressLinePerNFramesWhenPipedAndRewritesOnATerminal) {
  PredictedImage im{"clip.mp4", "clip_1", 1, 64, 48, {}};
  const std::vector<std::string> names{"thing"};
  {
    std::ostringstream progress, results;
    cli::PredictConsole console(progress, /*tty=*/false, /*every=*/10, results, /*stream=*/false, false);
    app::PredictSink sink = console.Sink();
    for (int k = 1; k <= 25; ++k) sink(im, {k, 25, k * 0.1}, names);
    console.Finish();
    EXPECT_EQ(progress.str(),
              "frames 10/25 (40%), 10.0 frames/s, 1.0 s\n"
              "frames 20/25 (80%), 10.0 frames/s, 2.0 s\n"
              "frames 25/25 (100%), 10.0 frames/s, 2.5 s\n");
    EXPECT_EQ(results.str(), "");  // stream=false: the results are printed at the end
  }
  {
    std::ostringstream progress, results;
    cli::PredictConsole console(progress, /*tty=*/true, 10, results, /*stream=*/true, /*json=*/true);
    app::PredictSink sink = console.Sink();
    sink(im, {1, -1, 0.5}, names);
    sink(im, {2, -1, 0.6}, names);  // within 0.2 s of the last draw: not redrawn
    sink(im, {3, -1, 1.0}, names);
    console.Finish();
    const std::string p = progress.str();
    EXPECT_EQ(p.find('\n'), p.size() - 1) << p;  // one line, rewritten with \r
    EXPECT_NE(p.find("\rframes 1, 2.0 frames/s"), std::string::npos) << p;
    EXPECT_EQ(p.find("frames 2,"), std::string::npos) << p;
    EXPECT_NE(p.find("\rframes 3, 3.0 frames/s, 1.0 s\033[K\n"), std::string::npos) << p;
    // stream=true with --json: one JSON object per line.
    std::istringstream lines(results.str());
    int n = 0;
    for (std::string l; std::getline(lines, l); ++n) EXPECT_EQ(nlohmann::json::parse(l)["frame"], 1);
    EXPECT_EQ(n, 3);
  }
}

}  // namespace
}  // namespace kestrel::app
