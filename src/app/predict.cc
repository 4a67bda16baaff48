// `predict` (predict.h): the source listed, the detector the program's
// backend loads run `batch` images at a time, the run folder written. OpenCV
// only for the decoded images and the drawing (data/text_render.h).
#include "app/predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <set>

#include "app/backends.h"
#include "app/detector.h"
#include "core/json.h"
#include "core/staged_dir.h"
#include "data/image.h"
#include "data/text_render.h"
#include "eval/dataset_eval.h"

namespace kestrel::app {
namespace {

std::string ClassName(const std::vector<std::string>& names, int class_id, const char* unknown) {
  return class_id >= 0 && class_id < static_cast<int>(names.size()) ? names[size_t(class_id)] : unknown;
}

// Draws boxes and "name 0.87" captions on a BGR image.
void DrawDetections(cv::Mat& bgr, const std::vector<eval::Detection>& dets,
                    const std::vector<std::string>& names) {
  const int thick = std::max(1, static_cast<int>(std::lround((bgr.cols + bgr.rows) / 2.0 * 0.003)));
  for (const auto& d : dets) {
    const cv::Scalar color((d.class_id * 67 + 40) % 256, (d.class_id * 131 + 90) % 256,
                           (d.class_id * 29 + 160) % 256);
    const cv::Point p1(static_cast<int>(d.box.x1), static_cast<int>(d.box.y1));
    const cv::Point p2(static_cast<int>(d.box.x2), static_cast<int>(d.box.y2));
    cv::rectangle(bgr, p1, p2, color, thick, cv::LINE_AA);
    const std::string name =
        d.class_id < static_cast<int>(names.size()) ? names[size_t(d.class_id)] : std::to_string(d.class_id);
    char label[160];
    std::snprintf(label, sizeof(label), "%s %.2f", name.c_str(), d.score);
    data::DrawBoxLabel(bgr, label, p1, std::max(12.0, thick * 8.0), color);
  }
}

// Folder depth beyond which a source is not listed further (a guard; the
// symlinked folders that could loop are not followed at all).
constexpr int kMaxSourceDepth = 32;

// Appends the image files under `dir` (relative path `rel`), sorted by name
// at each level, subfolders in place: hidden entries and symlinked folders
// are left out.
Status ListImages(Env& env, const std::string& dir, int depth, std::vector<std::string>* files) {
  KESTREL_ASSIGN_OR_RETURN(auto names, env.ListDir(dir));
  for (const auto& n : names) {
    if (n.empty() || n[0] == '.') continue;
    const std::string path = JoinPath(dir, n);
    const FileInfo info = env.Stat(path);
    if (info.is_dir) {
      if (info.is_symlink || depth >= kMaxSourceDepth) continue;
      KESTREL_RETURN_IF_ERROR(ListImages(env, path, depth + 1, files));
    } else if (data::IsImageExtension(Extension(n))) {
      files->push_back(path);
    }
  }
  return {};
}

// The images of `source`: the file itself, or the image files of a folder
// and its subfolders.
Result<std::vector<std::string>> SourceFiles(Env& env, const std::string& source) {
  const FileInfo info = env.Stat(source);
  if (!info.exists) return Status::NotFound("source not found", {source, 0, "source"});
  if (!info.is_dir) return std::vector<std::string>{source};
  std::vector<std::string> files;
  KESTREL_RETURN_IF_ERROR(ListImages(env, source, 0, &files));
  if (files.empty())
    return Status::NotFound("no images (jpg, png, bmp, webp, tif) in folder", {source, 0, "source"});
  return files;
}

// `path` relative to `root` ("" or not a prefix: its file name).
std::string RelativeTo(const std::string& root, const std::string& path) {
  if (root.empty()) return BaseName(path);
  const std::string prefix = root.back() == '/' ? root : root + "/";
  if (path.compare(0, prefix.size(), prefix) != 0) return BaseName(path);
  return path.substr(prefix.size());
}

}  // namespace

nlohmann::json DetectionsJson(const std::vector<eval::Detection>& detections,
                              const std::vector<std::string>& names) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& d : detections) {
    arr.push_back({{"class_id", d.class_id},
                   {"name", ClassName(names, d.class_id, "")},
                   {"confidence", d.score},
                   {"box_xyxy", {d.box.x1, d.box.y1, d.box.x2, d.box.y2}}});
  }
  return arr;
}

nlohmann::json PredictedImageJson(const PredictedImage& image, const std::vector<std::string>& names) {
  return {{"source", image.source},
          {"output", image.output},
          {"width", image.width},
          {"height", image.height},
          {"detections", DetectionsJson(image.detections, names)}};
}

nlohmann::json PredictSpeedJson(const PredictSpeed& s) {
  return {{"preprocess_ms", s.preprocess_ms},
          {"inference_ms", s.inference_ms},
          {"postprocess_ms", s.postprocess_ms},
          {"images", s.images},
          {"fps", s.fps}};
}

nlohmann::json PredictResultJson(const PredictResult& r) {
  nlohmann::json images = nlohmann::json::array();
  for (const auto& im : r.images) images.push_back(PredictedImageJson(im, r.names));
  nlohmann::json skipped = nlohmann::json::array();
  for (const auto& s : r.skipped) skipped.push_back({{"source", s.source}, {"reason", s.reason}});
  return {{"ok", r.skipped.empty()},      {"dir", r.dir},     {"speed", PredictSpeedJson(r.speed)},
          {"predicted", r.images.size()}, {"images", images}, {"skipped", skipped}};
}

int PredictExitCode(const PredictResult& r) { return r.skipped.empty() ? 0 : 1; }

std::vector<std::string> PredictOutputNames(const std::string& root, const std::vector<std::string>& files) {
  std::set<std::string> taken;
  std::vector<std::string> out;
  out.reserve(files.size());
  for (const auto& f : files) {
    const std::string rel = RelativeTo(root, f);
    const size_t slash = rel.rfind('/');
    const std::string stem = slash == std::string::npos ? Stem(rel) : rel.substr(0, slash + 1) + Stem(rel);
    std::string name = stem;
    // The reference's name first; then the file name with its extension,
    // which no other file of the folder has; a numbered one when even that
    // is some other file's stem (x.webp vs x.webp.png).
    if (taken.count(name)) name = rel;
    for (int k = 2; taken.count(name); ++k) name = rel + "-" + std::to_string(k);
    taken.insert(name);
    out.push_back(std::move(name));
  }
  return out;
}

std::string PredictSpeedText(const PredictSpeed& s) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "speed: %.1fms preprocess, %.1fms inference, %.1fms postprocess per image at %dx%d "
                "(%.1f FPS, %lld images after warm-up)\n",
                s.preprocess_ms, s.inference_ms, s.postprocess_ms, s.imgsz, s.imgsz, s.fps,
                static_cast<long long>(s.images));
  return buf;
}

std::string PredictResultText(const PredictResult& r) {
  std::string text;
  for (const auto& im : r.images) {
    std::map<std::string, int> counts;
    for (const auto& d : im.detections) ++counts[ClassName(r.names, d.class_id, "?")];
    text += im.source + ": " + std::to_string(im.width) + "x" + std::to_string(im.height) + ", ";
    if (counts.empty()) text += "(no detections)";
    for (const auto& [n, c] : counts) text += std::to_string(c) + " " + n + ", ";
    text += "\n";
  }
  for (const auto& s : r.skipped) text += "skipped " + s.source + ": " + s.reason + "\n";
  text += std::to_string(r.images.size()) + (r.images.size() == 1 ? " image" : " images") + " predicted, " +
          std::to_string(r.skipped.size()) + " skipped\n";
  return text + PredictSpeedText(r.speed) + "results saved to " + r.dir + "\n";
}

std::string YoloTxt(const PredictedImage& p) {
  std::string out;
  char line[160];
  for (const auto& d : p.detections) {
    const double w = p.width, h = p.height;
    std::snprintf(line, sizeof(line), "%d %.6f %.6f %.6f %.6f %.6f\n", d.class_id,
                  (d.box.x1 + d.box.x2) / 2.0 / w, (d.box.y1 + d.box.y2) / 2.0 / h, (d.box.x2 - d.box.x1) / w,
                  (d.box.y2 - d.box.y1) / h, d.score);
    out += line;
  }
  return out;
}

Result<std::string> RenderDetectionsJpeg(const eval::ImageView& rgb,
                                         const std::vector<eval::Detection>& detections,
                                         const std::vector<std::string>& names) {
  if (rgb.data == nullptr || rgb.channels != 3 || rgb.width <= 0 || rgb.height <= 0) {
    return Status::InvalidArgument("expected an 8-bit RGB image", {"", 0, "image"});
  }
  try {
    const cv::Mat view(rgb.height, rgb.width, CV_8UC3, const_cast<uint8_t*>(rgb.data),
                       rgb.stride != 0 ? rgb.stride : size_t(cv::Mat::AUTO_STEP));
    cv::Mat bgr;
    cv::cvtColor(view, bgr, cv::COLOR_RGB2BGR);
    DrawDetections(bgr, detections, names);
    std::vector<uint8_t> jpg;
    if (!cv::imencode(".jpg", bgr, jpg)) return Status::Internal("JPEG encoding failed");
    return std::string(jpg.begin(), jpg.end());
  } catch (const cv::Exception& e) {
    return Status::Internal(std::string("OpenCV: ") + e.what());
  }
}

Result<PredictResult> PredictFiles(Env& env, const PredictRequest& o, const std::string& root,
                                   const std::vector<std::string>& files, Detector& p) {
  PredictResult out;
  out.names = p.Names();
  const std::vector<std::string> outputs = PredictOutputNames(root, files);
  // At most one batch of decoded images is held, except the ones kept for
  // drawing when save=true (by index into out.images).
  std::vector<cv::Mat> decoded;
  const size_t batch = size_t(std::max(1, p.Options().batch));
  std::vector<cv::Mat> images;
  std::vector<size_t> batch_files;  // index into `files` of each image in `images`
  auto run_batch = [&]() -> Status {
    if (images.empty()) return {};
    std::vector<eval::ImageView> views;
    for (const auto& img : images)
      views.push_back({img.data, img.cols, img.rows, img.channels(), img.step[0]});
    KESTREL_ASSIGN_OR_RETURN(auto preds, p.Predict(views));
    if (preds.size() != images.size())
      return Status::Internal("the detector returned a wrong number of images");
    for (size_t k = 0; k < preds.size(); ++k) {
      const size_t i = batch_files[k];
      out.images.push_back(
          {files[i], outputs[i], preds[k].width, preds[k].height, std::move(preds[k].detections)});
      if (o.save) decoded.push_back(std::move(images[k]));
    }
    images.clear();
    batch_files.clear();
    return {};
  };
  for (size_t i = 0; i < files.size(); ++i) {
    // A file that cannot be read or decoded is a finding, not the end of
    // the run: the others are still predicted.
    Result<std::string> bytes = env.ReadFile(files[i]);
    Result<cv::Mat> img =
        bytes.IsOk() ? data::DecodeImage(*bytes, files[i]) : Result<cv::Mat>(bytes.GetStatus());
    if (!img.IsOk()) {
      out.skipped.push_back({files[i], img.GetStatus().Message()});
      continue;
    }
    images.push_back(std::move(img).Value());
    batch_files.push_back(i);
    if (images.size() == batch) KESTREL_RETURN_IF_ERROR(run_batch());
  }
  KESTREL_RETURN_IF_ERROR(run_batch());
  if (out.images.empty()) {
    std::string why;
    for (size_t k = 0; k < out.skipped.size() && k < 3; ++k)
      why += (k ? "; " : "") + out.skipped[k].source + ": " + out.skipped[k].reason;
    if (out.skipped.size() > 3) why += "; ... and " + std::to_string(out.skipped.size() - 3) + " more";
    return Status::Corruption(
        "no image could be read (" + std::to_string(out.skipped.size()) + " skipped): " + why,
        {o.source, 0, "source"});
  }
  const eval::StageTimes t = p.Timing();
  out.speed = {t.preprocess_ms, t.inference_ms, t.postprocess_ms, t.images, t.Fps(), p.Options().imgsz};

  out.dir = eval::NextRunDir(env, o.project, o.name, "predict", o.exist_ok);
  // Written beside the run folder and moved in when every image is done: a
  // failure halfway leaves no folder that looks like a complete prediction.
  KESTREL_ASSIGN_OR_RETURN(StagedDir staged, StagedDir::Create(env, out.dir));
  const std::string& dir = staged.Path();
  std::set<std::string> made;  // folders created in the staged run folder
  auto write = [&](const std::string& rel, std::string_view data) -> Status {
    const std::string path = JoinPath(dir, rel);
    const std::string parent = DirName(path);
    if (made.insert(parent).second) KESTREL_RETURN_IF_ERROR(env.CreateDirs(parent));
    return env.WriteFileAtomic(path, data);
  };
  for (size_t i = 0; i < out.images.size(); ++i) {
    const PredictedImage& r = out.images[i];
    if (o.save) {
      const cv::Mat& img = decoded[i];
      const eval::ImageView view{img.data, img.cols, img.rows, 3, img.step};
      Result<std::string> jpg = RenderDetectionsJpeg(view, r.detections, out.names);
      if (!jpg.IsOk()) return Status::Internal(jpg.GetStatus().Message(), {r.source});
      KESTREL_RETURN_IF_ERROR(write(r.output + ".jpg", *jpg));
      decoded[i].release();
    }
    // As the reference's save_txt: no file for an image without detections.
    if (o.save_txt && !r.detections.empty())
      KESTREL_RETURN_IF_ERROR(write("labels/" + r.output + ".txt", YoloTxt(r)));
    if (o.save_json)
      KESTREL_RETURN_IF_ERROR(write(r.output + ".json", DumpJson(PredictedImageJson(r, out.names), 1)));
  }
  if (o.save_txt) KESTREL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(dir, "labels")));
  KESTREL_RETURN_IF_ERROR(staged.Commit());
  return out;
}

eval::InferenceOptions InferenceOptionsOf(const PredictRequest& o) {
  eval::InferenceOptions io;
  io.imgsz = o.imgsz;
  io.batch = o.batch;
  io.nms.conf = static_cast<float>(o.conf);
  io.nms.iou = static_cast<float>(o.iou);
  io.nms.max_det = o.max_det;
  return io;
}

Result<PredictResult> PredictWith(Env& env, const PredictRequest& o, const WeightsResolver& resolve,
                                  const DetectorLoader& load) {
  if (o.model.empty() || o.source.empty()) {
    return Status::InvalidArgument("model=WEIGHTS and source=IMAGE|DIR are required",
                                   {"", 0, o.model.empty() ? "model" : "source"});
  }
  // Inputs first: nothing is written for a bad source or model.
  KESTREL_ASSIGN_OR_RETURN(std::vector<std::string> files, SourceFiles(env, o.source));
  const std::string root = env.Stat(o.source).is_dir ? o.source : "";
  std::string weights = o.model;
  if (resolve) KESTREL_RETURN_IF_ERROR(resolve(&weights));
  KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<Detector> detector,
                           load(weights, InferenceOptionsOf(o), DetectorPlacement{o.device, o.runtime}));
  return PredictFiles(env, o, root, files, *detector);
}

Result<PredictResult> Predict(Env& env, const PredictRequest& request, const WeightsResolver& resolve) {
  return PredictWith(env, request, resolve, LoadDetector);
}

}  // namespace kestrel::app
