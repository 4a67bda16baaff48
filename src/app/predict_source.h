// What `predict`'s source= names (docs/cli.md "Predict sources"): an image
// or video file, a folder (its images and videos, subfolders included), a
// glob (`dir/*.jpg`, recursive `**`), a camera index (`0`: /dev/video0) or a
// network stream (`rtsp://`, `rtmp://`, `http(s)://`, `tcp://`, `udp://`),
// read through OpenCV's video I/O (FFmpeg). `screen` and any other kind are
// refused naming the kind. Pure listing: no file is opened here (a camera's
// device node is only looked up). Torch-free and OpenCV-free.
#pragma once

#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace kestrel::app {

enum class PredictSourceKind {
  kFile,    // one image or video file
  kFolder,  // the images and videos of a folder and its subfolders
  kGlob,    // the images and videos a pattern matches
  kCamera,  // a local camera by index (V4L2 device /dev/videoN)
  kStream,  // a network URL OpenCV/FFmpeg opens
};

// "file", "folder", "glob", "camera", "stream".
const char* PredictSourceKindName(PredictSourceKind kind);

struct PredictSource {
  PredictSourceKind kind = PredictSourceKind::kFile;
  // kFile, kFolder, kGlob: the files to predict, in order (a folder: sorted
  // names at each level, subfolders in place; a glob: sorted paths).
  std::vector<std::string> files;
  // The folder outputs are named relative to ("" for a file: its name).
  std::string root;
  int camera = -1;  // kCamera: the device index
  std::string url;  // kStream: the URL as given
  // kCamera, kStream: the stem of its outputs (the reference's: "0" for
  // camera 0, the URL path's last stem, or its host).
  std::string stem;
};

// True for the reference's video extensions: asf avi gif m4v mkv mov mp4
// mpeg mpg ts wmv webm (any case, with or without the dot).
bool IsVideoExtension(const std::string& ext);

// The files `pattern` matches (fnmatch per path component: `*`, `?`,
// `[...]`; a component `**` matches any number of folders, none included),
// sorted; hidden entries match only a pattern that starts with a dot, and
// symlinked folders are not followed by `**`. `root` (nullable) receives
// the pattern's folder before its first wildcard component ("." when
// none). Only files, not folders. kNotFound naming `source` when nothing matches.
Result<std::vector<std::string>> ExpandGlob(Env& env, const std::string& pattern,
                                            std::string* root = nullptr);

// True when `source` contains a glob wildcard (`*`, `?` or `[`).
bool IsGlobPattern(const std::string& source);

// Classifies and lists `source` (field "source" in every error):
// kInvalidArgument naming the kind for `screen` and URL schemes OpenCV is
// not given here (ftp://, file://, s3://, ...); kNotFound for a missing
// path, a camera index without its device node ("camera 0 not found:
// /dev/video0 does not exist"), a folder without images or videos, or a
// glob without a match.
Result<PredictSource> ResolvePredictSource(Env& env, const std::string& source);

}  // namespace kestrel::app
