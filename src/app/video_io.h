// Video files, cameras and streams read frame by frame, and annotated .mp4
// files written, for `predict` (app/predict.h) through the program's video
// backend (src/backend_video: OpenCV's video I/O, FFmpeg and V4L2),
// installed by main() as the other backends are (app/backends.h). Only the
// programs that predict install one (kestrel-torch, kestrel-deploy):
// OpenCV's video I/O loads ~100 more
// shared libraries (FFmpeg, GStreamer) at every process start, about
// 0.09 s of CPU, which `kestrel`, `kestrel serve` and the test executables
// no longer pay (docs/setup.md).
//
// Thread-safety: InstallVideoBackend before any thread starts (main(), a
// test's set-up), then only read; a reader or writer is used by one thread
// at a time. Torch-free and OpenCV-free header.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::app {

// One decoded frame: 8-bit BGR, rows packed (3 * width bytes a row).
struct VideoFrame {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> bgr;
};

class VideoReader {
 public:
  virtual ~VideoReader() = default;
  // The container's frame count and rate; <= 0 (or not finite) when unknown
  // (a camera, a stream).
  virtual double FrameCount() = 0;
  virtual double Fps() = 0;
  // The next frame after `stride` - 1 skipped ones (as the reference's
  // vid_stride: grab `stride` frames, decode the last), gray or BGRA
  // converted to BGR; false at the end or when none can be decoded.
  // REQUIRES: stride >= 1. May throw std::exception from the decoder.
  virtual bool Next(int stride, VideoFrame* frame) = 0;
};

class VideoWriter {
 public:
  virtual ~VideoWriter() = default;
  // Appends a BGR frame of the writer's size (`step` bytes a row). May
  // throw std::exception from the encoder.
  virtual void Write(const uint8_t* bgr, int width, int height, size_t step) = 0;
  // Writes the trailer; the file is complete after it (also done by the
  // destructor).
  virtual void Close() = 0;
};

// A program's video I/O; an empty function is a program without it.
struct VideoBackend {
  // A file or URL through FFmpeg; nullptr when it cannot be opened.
  std::function<std::unique_ptr<VideoReader>(const std::string& path)> open_file;
  // Camera `index` (V4L2 or whatever OpenCV finds); nullptr when it cannot be opened.
  std::function<std::unique_ptr<VideoReader>(int index)> open_camera;
  // An .mp4 (mp4v) of `width` x `height` at `fps`; nullptr when it cannot be made.
  std::function<std::unique_ptr<VideoWriter>(const std::string& path, double fps, int width, int height)>
      create_mp4;
};

// Makes `video` the process's (an empty one: none). REQUIRES: no other
// thread reads it yet (as app::InstallBackends).
void InstallVideoBackend(VideoBackend video);

// The process's video backend. Errors: kFailedPrecondition naming `source`
// (field "source"), this program (app/backends.h Backends::program) and the
// programs that read videos, when it has none.
Result<const VideoBackend*> ProgramVideo(const std::string& source);

}  // namespace kestrel::app
