// The video backend (video_backend.h) in OpenCV's video I/O.
#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>
#include <string>

#include "backend_video/video_backend.h"

namespace kestrel::backend_video {
namespace {

class CaptureReader final : public app::VideoReader {
 public:
  // Opened in place: cv::VideoCapture has no move (a copy shares the decoder).
  bool OpenFile(const std::string& path) { return cap_.open(path, cv::CAP_FFMPEG); }
  bool OpenCamera(int index) { return cap_.open(index, cv::CAP_ANY); }

  double FrameCount() override { return cap_.get(cv::CAP_PROP_FRAME_COUNT); }
  double Fps() override { return cap_.get(cv::CAP_PROP_FPS); }

  bool Next(int stride, app::VideoFrame* frame) override {
    for (int k = 0; k < stride; ++k) {
      if (!cap_.grab()) return false;
    }
    if (!cap_.retrieve(mat_) || mat_.empty()) return false;
    if (mat_.channels() == 1) cv::cvtColor(mat_, mat_, cv::COLOR_GRAY2BGR);
    if (mat_.channels() == 4) cv::cvtColor(mat_, mat_, cv::COLOR_BGRA2BGR);
    if (mat_.depth() != CV_8U || mat_.channels() != 3) return false;
    frame->width = mat_.cols;
    frame->height = mat_.rows;
    const size_t row = static_cast<size_t>(mat_.cols) * 3;
    frame->bgr.resize(row * static_cast<size_t>(mat_.rows));
    for (int y = 0; y < mat_.rows; ++y) {
      const uint8_t* src = mat_.ptr<uint8_t>(y);
      std::copy(src, src + row, frame->bgr.data() + row * static_cast<size_t>(y));
    }
    return true;
  }

 private:
  cv::VideoCapture cap_;
  cv::Mat mat_;  // the decoder's buffer, reused frame to frame
};

class Mp4Writer final : public app::VideoWriter {
 public:
  Mp4Writer() = default;
  Mp4Writer(const Mp4Writer&) = delete;
  Mp4Writer& operator=(const Mp4Writer&) = delete;
  ~Mp4Writer() override { w_.release(); }

  bool Open(const std::string& path, double fps, int width, int height) {
    return w_.open(path, cv::CAP_FFMPEG, cv::VideoWriter::fourcc('m', 'p', '4', 'v'), fps,
                   cv::Size(width, height));
  }

  void Write(const uint8_t* bgr, int width, int height, size_t step) override {
    // A view of the caller's pixels: VideoWriter copies what it encodes.
    const cv::Mat view(height, width, CV_8UC3, const_cast<uint8_t*>(bgr), step);
    w_.write(view);
  }
  void Close() override { w_.release(); }

 private:
  cv::VideoWriter w_;
};

}  // namespace

app::VideoBackend OpenCvVideoBackend() {
  app::VideoBackend b;
  b.open_file = [](const std::string& path) -> std::unique_ptr<app::VideoReader> {
    auto r = std::make_unique<CaptureReader>();
    if (!r->OpenFile(path)) return nullptr;
    return r;
  };
  b.open_camera = [](int index) -> std::unique_ptr<app::VideoReader> {
    auto r = std::make_unique<CaptureReader>();
    if (!r->OpenCamera(index)) return nullptr;
    return r;
  };
  b.create_mp4 = [](const std::string& path, double fps, int width,
                    int height) -> std::unique_ptr<app::VideoWriter> {
    auto w = std::make_unique<Mp4Writer>();
    if (!w->Open(path, fps, width, height)) return nullptr;
    return w;
  };
  return b;
}

}  // namespace kestrel::backend_video
