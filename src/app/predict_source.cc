// predict's sources (predict_source.h): classification, folder listing and
// glob expansion over Env; the frames themselves are read in predict.cc.
#include "app/predict_source.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "data/image.h"

namespace kestrel::app {
namespace {

Status SourceError(StatusCode code, const std::string& msg, const std::string& source) {
  return Status(code, msg, {source, 0, "source"});
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool IsMediaFile(const std::string& name) {
  const std::string ext = Extension(name);
  return data::IsImageExtension(ext) || IsVideoExtension(ext);
}

// Folder depth beyond which a folder is not listed further (a guard; the
// symlinked folders that could loop are not followed at all).
constexpr int kMaxSourceDepth = 32;

// Appends the image and video files under `dir`, sorted by name at each
// level, subfolders in place: hidden entries and symlinked folders left out.
Status ListMedia(Env& env, const std::string& dir, int depth, std::vector<std::string>* files) {
  KESTREL_ASSIGN_OR_RETURN(auto names, env.ListDir(dir));
  for (const auto& n : names) {
    if (n.empty() || n[0] == '.') continue;
    const std::string path = JoinPath(dir, n);
    const FileInfo info = env.Stat(path);
    if (info.is_dir) {
      if (info.is_symlink || depth >= kMaxSourceDepth) continue;
      KESTREL_RETURN_IF_ERROR(ListMedia(env, path, depth + 1, files));
    } else if (IsMediaFile(n)) {
      files->push_back(path);
    }
  }
  return {};
}

std::vector<std::string> SplitPath(const std::string& p) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= p.size()) {
    const size_t slash = p.find('/', start);
    const std::string part = p.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    if (!part.empty() && part != ".") out.push_back(part);
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return out;
}

// Matches comps[i...] under `dir` (listed as `dir`, "" meaning the working
// folder; output paths are `dir`-joined names).
void WalkGlob(Env& env, const std::string& dir, const std::vector<std::string>& comps, size_t i, int depth,
              std::set<std::string>* out) {
  if (depth > kMaxSourceDepth) return;
  const std::string& pat = comps[i];
  const bool last = i + 1 == comps.size();
  Result<std::vector<std::string>> names = env.ListDir(dir.empty() ? "." : dir);
  if (pat == "**") {
    // Zero folders, then each (non-hidden, non-symlinked) subfolder again.
    if (last) {
      // A trailing `**` matches the files of this folder and every one below.
      for (const auto& f : names.IsOk() ? *names : std::vector<std::string>{}) {
        if (f.empty() || f[0] == '.') continue;
        const std::string path = dir.empty() ? f : JoinPath(dir, f);
        const FileInfo info = env.Stat(path);
        if (!info.is_dir) out->insert(path);
      }
    } else {
      WalkGlob(env, dir, comps, i + 1, depth, out);
    }
    if (!names.IsOk()) return;
    for (const auto& n : *names) {
      if (n.empty() || n[0] == '.') continue;
      const std::string path = dir.empty() ? n : JoinPath(dir, n);
      const FileInfo info = env.Stat(path);
      if (info.is_dir && !info.is_symlink) WalkGlob(env, path, comps, i, depth + 1, out);
    }
    return;
  }
  if (!names.IsOk()) return;
  for (const auto& n : *names) {
    // FNM_PERIOD: a leading dot is matched only by a dot in the pattern.
    if (fnmatch(pat.c_str(), n.c_str(), FNM_PERIOD) != 0) continue;
    const std::string path = dir.empty() ? n : JoinPath(dir, n);
    const FileInfo info = env.Stat(path);
    if (last) {
      if (!info.is_dir) out->insert(path);
    } else if (info.is_dir) {
      WalkGlob(env, path, comps, i + 1, depth + 1, out);
    }
  }
}

// The part of a URL its outputs are named after: the path's last stem, or
// the host; characters other than [A-Za-z0-9._-] become '_'.
std::string UrlStem(const std::string& url) {
  std::string rest = url.substr(url.find("://") + 3);
  rest = rest.substr(0, rest.find_first_of("?#"));
  const size_t slash = rest.find('/');
  const std::string host = rest.substr(0, slash);
  std::string stem = slash == std::string::npos ? "" : Stem(BaseName(rest.substr(slash)));
  if (stem.empty()) stem = host;
  for (char& c : stem) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') c = '_';
  }
  return stem.empty() ? "stream" : stem;
}

}  // namespace

const char* PredictSourceKindName(PredictSourceKind kind) {
  switch (kind) {
    case PredictSourceKind::kFile:
      return "file";
    case PredictSourceKind::kFolder:
      return "folder";
    case PredictSourceKind::kGlob:
      return "glob";
    case PredictSourceKind::kCamera:
      return "camera";
    case PredictSourceKind::kStream:
      return "stream";
  }
  return "?";
}

bool IsVideoExtension(const std::string& ext) {
  static const std::set<std::string> kVideo = {"asf", "avi",  "gif", "m4v", "mkv", "mov",
                                               "mp4", "mpeg", "mpg", "ts",  "wmv", "webm"};
  std::string e = Lower(ext);
  if (!e.empty() && e[0] == '.') e.erase(0, 1);
  return kVideo.count(e) > 0;
}

bool IsGlobPattern(const std::string& source) { return source.find_first_of("*?[") != std::string::npos; }

Result<std::vector<std::string>> ExpandGlob(Env& env, const std::string& pattern, std::string* root) {
  const bool absolute = !pattern.empty() && pattern[0] == '/';
  const std::vector<std::string> comps = SplitPath(pattern);
  size_t w = 0;
  while (w < comps.size() && !IsGlobPattern(comps[w])) ++w;
  std::string base = absolute ? "/" : "";
  for (size_t k = 0; k < w; ++k) base = base.empty() ? comps[k] : JoinPath(base, comps[k]);
  if (root != nullptr) *root = base.empty() ? "." : base;
  std::set<std::string> found;
  if (w == comps.size()) {
    // No wildcard after all (a name with a literal '['): the path itself.
    const FileInfo info = env.Stat(base);
    if (info.exists && !info.is_dir) found.insert(base);
  } else {
    WalkGlob(env, base, comps, w, 0, &found);
  }
  if (found.empty()) return SourceError(StatusCode::kNotFound, "no file matches the pattern", pattern);
  return std::vector<std::string>(found.begin(), found.end());
}

Result<PredictSource> ResolvePredictSource(Env& env, const std::string& source) {
  PredictSource out;
  const std::string lower = Lower(source);
  if (lower == "screen" || lower.rfind("screen ", 0) == 0) {
    return SourceError(
        StatusCode::kInvalidArgument,
        "source kind 'screen' (screen capture) is not supported: give an image, video, folder, "
        "glob, camera index or stream URL",
        source);
  }
  if (!source.empty() && std::all_of(source.begin(), source.end(), [](char c) { return std::isdigit(c); })) {
    if (source.size() > 4) return SourceError(StatusCode::kInvalidArgument, "camera index too large", source);
    out.kind = PredictSourceKind::kCamera;
    out.camera = std::stoi(source);
    out.stem = std::to_string(out.camera);
    // A path of that name wins (a file called "0"), as the reference's
    // numeric check applies only to what is not a file.
    if (!env.Stat(source).exists) {
      const std::string device = "/dev/video" + std::to_string(out.camera);
      if (!env.Stat(device).exists) {
        return SourceError(StatusCode::kNotFound,
                           "camera " + std::to_string(out.camera) + " not found: " + device +
                               " does not exist (no video device on this machine)",
                           source);
      }
      return out;
    }
  }
  const size_t scheme_end = source.find("://");
  if (scheme_end != std::string::npos) {
    const std::string scheme = lower.substr(0, scheme_end);
    static const std::set<std::string> kStreams = {"rtsp", "rtsps", "rtmp", "http", "https", "tcp", "udp"};
    if (!kStreams.count(scheme)) {
      return SourceError(StatusCode::kInvalidArgument,
                         "source kind '" + scheme +
                             "://' URL is not supported (streams: rtsp, rtsps, rtmp, http, https, tcp, udp)",
                         source);
    }
    out.kind = PredictSourceKind::kStream;
    out.url = source;
    out.stem = UrlStem(source);
    return out;
  }
  const FileInfo info = env.Stat(source);
  if (!info.exists && IsGlobPattern(source)) {
    out.kind = PredictSourceKind::kGlob;
    KESTREL_ASSIGN_OR_RETURN(std::vector<std::string> matched, ExpandGlob(env, source, &out.root));
    for (auto& f : matched) {
      if (IsMediaFile(f)) out.files.push_back(std::move(f));
    }
    if (out.files.empty()) {
      return SourceError(StatusCode::kNotFound,
                         "the pattern matches no image (jpg, png, bmp, webp, tif) or video (mp4, avi, mkv, "
                         "mov, ...) file",
                         source);
    }
    if (out.root == ".") out.root = "";
    return out;
  }
  if (!info.exists) return SourceError(StatusCode::kNotFound, "source not found", source);
  if (!info.is_dir) {
    out.kind = PredictSourceKind::kFile;
    out.files = {source};
    return out;
  }
  out.kind = PredictSourceKind::kFolder;
  out.root = source;
  KESTREL_RETURN_IF_ERROR(ListMedia(env, source, 0, &out.files));
  if (out.files.empty()) {
    return SourceError(StatusCode::kNotFound,
                       "no images (jpg, png, bmp, webp, tif) or videos (mp4, avi, mkv, mov, ...) in folder",
                       source);
  }
  return out;
}

}  // namespace kestrel::app
