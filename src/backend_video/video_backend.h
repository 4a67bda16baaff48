// The video backend: app/video_io.h's VideoBackend in OpenCV's video I/O
// (cv::VideoCapture with FFmpeg for files and URLs, any API for cameras;
// cv::VideoWriter mp4v for the annotated .mp4). Torch- and OpenCV-free
// header.
#pragma once

#include "app/video_io.h"

namespace kestrel::backend_video {

// The backend main() installs (app::InstallVideoBackend) before any thread starts.
app::VideoBackend OpenCvVideoBackend();

}  // namespace kestrel::backend_video
