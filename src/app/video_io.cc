#include "app/video_io.h"

#include <utility>

#include "app/backends.h"

namespace kestrel::app {
namespace {

VideoBackend& Installed() {
  static VideoBackend video;
  return video;
}

}  // namespace

void InstallVideoBackend(VideoBackend video) { Installed() = std::move(video); }

Result<const VideoBackend*> ProgramVideo(const std::string& source) {
  const VideoBackend& v = Installed();
  if (!v.open_file || !v.open_camera || !v.create_mp4) {
    return Status::FailedPrecondition(ProgramBackends().program +
                                          " has no video I/O: videos, cameras and streams are read by "
                                          "kestrel-torch and kestrel-deploy",
                                      {source, 0, "source"});
  }
  return &v;
}

}  // namespace kestrel::app
