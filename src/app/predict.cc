// `predict` (predict.h): the source listed, the detector the program's
// backend loads run `batch` images at a time, the run folder written. OpenCV
// only for the decoded images and the drawing (data/text_render.h).
#include "app/predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <optional>
#include <set>

#include "app/backends.h"
#include "app/detector.h"
#include "app/predict_source.h"
#include "app/video_io.h"
#include "core/json.h"
#include "core/staged_dir.h"
#include "data/codec.h"
#include "data/image.h"
#include "data/text_render.h"
#include "eval/dataset_eval.h"
#include "train/data_subset.h"

namespace kestrel::app {
namespace {

std::string ClassName(const std::vector<std::string>& names, int class_id, const char* unknown) {
  return class_id >= 0 && class_id < static_cast<int>(names.size()) ? names[size_t(class_id)] : unknown;
}

// Draws boxes and "name 0.87" captions on a BGR image.
void DrawDetections(cv::Mat& bgr, const std::vector<eval::Detection>& dets,
                    const std::vector<std::string>& names, const DrawStyle& style) {
  const int thick = style.line_width > 0
                        ? style.line_width
                        : std::max(1, static_cast<int>(std::lround((bgr.cols + bgr.rows) / 2.0 * 0.003)));
  for (const auto& d : dets) {
    const cv::Scalar color((d.class_id * 67 + 40) % 256, (d.class_id * 131 + 90) % 256,
                           (d.class_id * 29 + 160) % 256);
    const cv::Point p1(static_cast<int>(d.box.x1), static_cast<int>(d.box.y1));
    const cv::Point p2(static_cast<int>(d.box.x2), static_cast<int>(d.box.y2));
    cv::rectangle(bgr, p1, p2, color, thick, cv::LINE_AA);
    const std::string name =
        d.class_id < static_cast<int>(names.size()) ? names[size_t(d.class_id)] : std::to_string(d.class_id);
    if (!style.show_labels && !style.show_conf) continue;
    char label[160];
    if (style.show_labels && style.show_conf) {
      std::snprintf(label, sizeof(label), "%s %.2f", name.c_str(), d.score);
    } else if (style.show_labels) {
      std::snprintf(label, sizeof(label), "%s", name.c_str());
    } else {
      std::snprintf(label, sizeof(label), "%.2f", d.score);
    }
    data::DrawBoxLabel(bgr, label, p1, std::max(12.0, thick * 8.0), color);
  }
}

// The pixels save_crop cuts for a box on a `width` x `height` image, as the
// reference's save_one_box(gain=1.02, pad=10, square=False): the box grown
// about its centre (side * 1.02 + 10 px), truncated to whole pixels, clipped
// to the image. Empty when the box lies outside the image.
cv::Rect CropRect(const eval::Box& b, int width, int height) {
  const double cx = (b.x1 + b.x2) / 2.0, cy = (b.y1 + b.y2) / 2.0;
  const double w = (b.x2 - b.x1) * 1.02 + 10, h = (b.y2 - b.y1) * 1.02 + 10;
  auto clip = [](double v, int hi) { return std::clamp(static_cast<int>(v), 0, hi); };  // trunc as .long()
  const int x1 = clip(cx - w / 2, width), x2 = clip(cx + w / 2, width);
  const int y1 = clip(cy - h / 2, height), y2 = clip(cy + h / 2, height);
  return {x1, y1, std::max(0, x2 - x1), std::max(0, y2 - y1)};
}

// The crops/ folder of a class: its name, or its index when the model has
// none for it or the name is not a plain folder name.
std::string CropFolder(const std::vector<std::string>& names, int class_id) {
  std::string n = class_id >= 0 && class_id < static_cast<int>(names.size()) ? names[size_t(class_id)] : "";
  std::replace(n.begin(), n.end(), '/', '_');
  std::replace(n.begin(), n.end(), '\\', '_');
  return n.empty() || n == "." || n == ".." ? std::to_string(class_id) : n;
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
  return {{"source", image.source}, {"output", image.output},
          {"frame", image.frame},   {"width", image.width},
          {"height", image.height}, {"detections", DetectionsJson(image.detections, names)}};
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
  return {{"ok", r.skipped.empty()},  {"dir", r.dir},        {"speed", PredictSpeedJson(r.speed)},
          {"predicted", r.predicted}, {"frames", r.frames},  {"images", images},
          {"skipped", skipped},       {"stopped", r.stopped}};
}

int PredictExitCode(const PredictResult& r) {
  if (r.stopped) return kPredictExitStopped;
  return r.skipped.empty() ? 0 : 1;
}

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

std::string PredictedImageLine(const PredictedImage& im, const std::vector<std::string>& names) {
  std::map<std::string, int> counts;
  for (const auto& d : im.detections) ++counts[ClassName(names, d.class_id, "?")];
  std::string text = im.source;
  if (im.frame > 0) text += " (frame " + std::to_string(im.frame) + ")";
  text += ": " + std::to_string(im.width) + "x" + std::to_string(im.height) + ", ";
  if (counts.empty()) text += "(no detections)";
  for (const auto& [n, c] : counts) text += std::to_string(c) + " " + n + ", ";
  return text;
}

std::string PredictProgressText(const PredictProgress& p) {
  char buf[160];
  const double rate = p.elapsed_s > 0 ? static_cast<double>(p.done) / p.elapsed_s : 0.0;
  if (p.total > 0) {
    std::snprintf(buf, sizeof(buf), "frames %lld/%lld (%d%%), %.1f frames/s, %.1f s",
                  static_cast<long long>(p.done), static_cast<long long>(p.total),
                  static_cast<int>(std::min<int64_t>(100, p.done * 100 / p.total)), rate, p.elapsed_s);
  } else {
    std::snprintf(buf, sizeof(buf), "frames %lld, %.1f frames/s, %.1f s", static_cast<long long>(p.done),
                  rate, p.elapsed_s);
  }
  return buf;
}

std::string PredictResultText(const PredictResult& r) {
  std::string text;
  for (const auto& im : r.images) text += PredictedImageLine(im, r.names) + "\n";
  for (const auto& s : r.skipped) text += "skipped " + s.source + ": " + s.reason + "\n";
  const int64_t stills = r.predicted - r.frames;
  text += std::to_string(stills) + (stills == 1 ? " image" : " images");
  if (r.frames > 0)
    text += " and " + std::to_string(r.frames) + (r.frames == 1 ? " video frame" : " video frames");
  text += " predicted, " + std::to_string(r.skipped.size()) + " skipped";
  text += r.stopped ? ", stopped by a signal (what was predicted is saved)\n" : "\n";
  return text + PredictSpeedText(r.speed) + "results saved to " + r.dir + "\n";
}

std::string YoloTxt(const PredictedImage& p, bool with_conf) {
  std::string out;
  char line[160];
  for (const auto& d : p.detections) {
    const double w = p.width, h = p.height;
    std::snprintf(line, sizeof(line), "%d %.6f %.6f %.6f %.6f", d.class_id, (d.box.x1 + d.box.x2) / 2.0 / w,
                  (d.box.y1 + d.box.y2) / 2.0 / h, (d.box.x2 - d.box.x1) / w, (d.box.y2 - d.box.y1) / h);
    out += line;
    if (with_conf) {
      std::snprintf(line, sizeof(line), " %.6f", d.score);
      out += line;
    }
    out += '\n';
  }
  return out;
}

Result<std::string> RenderDetectionsJpeg(const eval::ImageView& rgb,
                                         const std::vector<eval::Detection>& detections,
                                         const std::vector<std::string>& names, const DrawStyle& style) {
  if (rgb.data == nullptr || rgb.channels != 3 || rgb.width <= 0 || rgb.height <= 0) {
    return Status::InvalidArgument("expected an 8-bit RGB image", {"", 0, "image"});
  }
  try {
    const cv::Mat view(rgb.height, rgb.width, CV_8UC3, const_cast<uint8_t*>(rgb.data),
                       rgb.stride != 0 ? rgb.stride : size_t(cv::Mat::AUTO_STEP));
    cv::Mat bgr;
    cv::cvtColor(view, bgr, cv::COLOR_RGB2BGR);
    DrawDetections(bgr, detections, names, style);
    return data::EncodeJpeg(bgr);
  } catch (const cv::Exception& e) {
    return Status::Internal(std::string("OpenCV: ") + e.what());
  }
}

namespace {

// One thing the run reads: a still image, or a video file, camera or stream
// read frame by frame through OpenCV's video I/O (FFmpeg, V4L2).
struct PredictInput {
  enum class Kind { kImage, kVideo, kCamera, kStream } kind = Kind::kImage;
  std::string source;  // the path or URL as found (PredictedImage::source)
  std::string output;  // its outputs' name (a video: the stem of <output>.mp4 and <output>_<frame>)
  int camera = -1;
};

// The reader of a video, camera or stream input (nullptr: it cannot be opened).
std::unique_ptr<VideoReader> OpenVideo(const VideoBackend& video, const PredictInput& in) {
  if (in.kind == PredictInput::Kind::kCamera) return video.open_camera(in.camera);
  return video.open_file(in.source);
}

// A decoded image or frame waiting for its batch: RGB for the detector, the
// capture's BGR kept only for a video frame that is drawn into the .mp4.
Status CheckVidStride(const PredictRequest& o) {
  if (o.vid_stride >= 1) return {};
  return Status::InvalidArgument("vid_stride must be >= 1, got " + std::to_string(o.vid_stride),
                                 {"", 0, "vid_stride"});
}

struct PendingFrame {
  cv::Mat rgb;
  size_t input = 0;
  int64_t frame = 0;
  // A video frame's decoded BGR pixels (save=true), the reader's buffer moved
  // here rather than copied. No view of them is stored: the pending vector
  // copies its frames when it grows (cv::Mat's move is not noexcept), which
  // frees the old block, so Bgr() makes the view where it is drawn.
  std::vector<uint8_t> pixels;
  int width = 0, height = 0;
  cv::Mat Bgr() { return cv::Mat(height, width, CV_8UC3, pixels.data()); }
};

// The images and frames of `inputs` through `p`, each one's files written
// into the staged run folder as soon as its batch is predicted.
Result<PredictResult> RunInputs(Env& env, const PredictRequest& o, const std::vector<PredictInput>& inputs,
                                Detector& p, const PredictSink& sink) {
  KESTREL_RETURN_IF_ERROR(CheckVidStride(o));
  PredictResult out;
  out.names = p.Names();
  // classes=: only these detections are kept, after NMS and max_det (the
  // reference drops the other classes inside its NMS, before max_det).
  auto classes = train::ParseIndexList(o.classes, "classes", std::max<int>(0, int(out.names.size()) - 1));
  if (!classes.IsOk()) {
    return Status::InvalidArgument(
        classes.GetStatus().Message() + " (the model has " + std::to_string(out.names.size()) + " classes)",
        {"", 0, "classes"});
  }
  std::vector<int> keep_classes = std::move(classes).Value();
  std::sort(keep_classes.begin(), keep_classes.end());
  const DrawStyle draw{o.line_width, o.show_labels, o.show_conf};
  out.dir = eval::NextRunDir(env, o.project, o.name, "predict", o.exist_ok);
  // Written beside the run folder and moved in when every image is done: a
  // failure halfway leaves no folder that looks like a complete prediction.
  // Staged at the first predicted image, so a run that reads nothing
  // creates nothing (not even the project folder).
  std::optional<StagedDir> staged;
  std::string dir;
  auto stage = [&]() -> Status {
    if (staged) return {};
    KESTREL_ASSIGN_OR_RETURN(StagedDir created, StagedDir::Create(env, out.dir));
    staged.emplace(std::move(created));
    dir = staged->Path();
    return {};
  };
  std::set<std::string> made;  // folders created in the staged run folder
  auto make_parent = [&](const std::string& path) -> Status {
    const std::string parent = DirName(path);
    if (made.insert(parent).second) KESTREL_RETURN_IF_ERROR(env.CreateDirs(parent));
    return {};
  };
  // Deferred writes (no fsync per file: a long video writes two files per
  // frame), made durable by one SyncFilesystem before the folder is moved in.
  auto write = [&](const std::string& rel, std::string_view data) -> Status {
    const std::string path = JoinPath(dir, rel);
    KESTREL_RETURN_IF_ERROR(make_parent(path));
    return env.WriteFileDeferred(path, data);
  };

  // The program's video I/O, asked for only when an input needs it.
  const VideoBackend* video = nullptr;
  for (const auto& in : inputs) {
    if (in.kind == PredictInput::Kind::kImage) continue;
    KESTREL_ASSIGN_OR_RETURN(video, ProgramVideo(in.source));
    break;
  }
  PredictProgress progress;
  progress.total = 0;
  for (const auto& in : inputs) {
    if (in.kind == PredictInput::Kind::kImage) {
      ++progress.total;
    } else if (in.kind == PredictInput::Kind::kVideo) {
      double n = 0;
      try {
        const std::unique_ptr<VideoReader> probe = OpenVideo(*video, in);
        n = probe ? probe->FrameCount() : 0.0;
      } catch (const std::exception&) {
        n = 0;  // unknown: the read below reports what is wrong with it
      }
      if (n > 0 && std::isfinite(n)) progress.total += static_cast<int64_t>(n) / o.vid_stride;
    } else {
      progress.total = -1;  // a camera or stream has no end we know of
      break;
    }
  }
  const int64_t start_us = env.NowMicros();

  std::unique_ptr<VideoWriter> writer;  // the annotated .mp4 of the video being read
  double writer_fps = 30;
  // The predicted image's files, the sink, the result.
  auto emit = [&](PredictedImage&& im, PendingFrame& f) -> Status {
    const PredictInput& in = inputs[f.input];
    KESTREL_RETURN_IF_ERROR(stage());
    if (o.save && im.frame == 0) {
      const eval::ImageView view{f.rgb.data, f.rgb.cols, f.rgb.rows, 3, f.rgb.step};
      Result<std::string> jpg = RenderDetectionsJpeg(view, im.detections, out.names, draw);
      if (!jpg.IsOk()) return Status::Internal(jpg.GetStatus().Message(), {im.source});
      KESTREL_RETURN_IF_ERROR(write(im.output + ".jpg", *jpg));
    } else if (o.save) {
      try {
        if (!writer) {
          const std::string path = JoinPath(dir, in.output + ".mp4");
          KESTREL_RETURN_IF_ERROR(make_parent(path));
          writer = video->create_mp4(path, writer_fps, f.width, f.height);
          if (!writer) {
            return Status::IoError("cannot write the annotated video (OpenCV VideoWriter, mp4v)",
                                   {in.output + ".mp4", 0, "save"});
          }
        }
        cv::Mat bgr = f.Bgr();
        DrawDetections(bgr, im.detections, out.names, draw);
        writer->Write(bgr.data, bgr.cols, bgr.rows, bgr.step[0]);
      } catch (const std::exception& e) {  // cv::Exception among them
        return Status::Internal(std::string("OpenCV: ") + e.what(), {im.source});
      }
    }
    // save_crop: each detection's pixels of the undrawn image, as the
    // reference: crops/<class>/<output>.jpg, then <output>2.jpg, ... for the
    // next crop of that class that would take a name already written.
    if (o.save_crop) {
      for (const auto& d : im.detections) {
        const cv::Rect r = CropRect(d.box, f.rgb.cols, f.rgb.rows);
        if (r.empty()) continue;  // outside the image: no pixels to save
        const std::string base = "crops/" + CropFolder(out.names, d.class_id) + "/" + im.output;
        std::string rel = base + ".jpg";
        for (int k = 2; env.Stat(JoinPath(dir, rel)).exists; ++k) rel = base + std::to_string(k) + ".jpg";
        Result<std::string> jpg = Status::Internal("JPEG encoding failed");
        try {
          cv::Mat bgr;
          cv::cvtColor(f.rgb(r), bgr, cv::COLOR_RGB2BGR);
          jpg = data::EncodeJpeg(bgr);
        } catch (const cv::Exception& e) {
          return Status::Internal(std::string("OpenCV: ") + e.what(), {im.source});
        }
        if (!jpg.IsOk()) return Status::Internal(jpg.GetStatus().Message(), {im.source});
        KESTREL_RETURN_IF_ERROR(write(rel, *jpg));
      }
    }
    // As the reference's save_txt: no file for an image without detections.
    if (o.save_txt && !im.detections.empty())
      KESTREL_RETURN_IF_ERROR(write("labels/" + im.output + ".txt", YoloTxt(im, o.save_conf)));
    if (o.save_json)
      KESTREL_RETURN_IF_ERROR(write(im.output + ".json", DumpJson(PredictedImageJson(im, out.names), 1)));
    ++out.predicted;
    if (im.frame > 0) ++out.frames;
    progress.done = out.predicted;
    progress.elapsed_s = static_cast<double>(env.NowMicros() - start_us) / 1e6;
    if (sink) sink(im, progress, out.names);
    if (!o.stream) out.images.push_back(std::move(im));
    return {};
  };

  // PredictRequest::stop, polled before each image and frame is read.
  auto stop_now = [&]() {
    if (o.stop == nullptr || !o.stop->load()) return false;
    out.stopped = true;
    return true;
  };
  const size_t batch = size_t(std::max(1, p.Options().batch));
  std::vector<PendingFrame> pending;  // at most one batch of decoded images
  pending.reserve(batch);
  auto run_batch = [&]() -> Status {
    if (pending.empty()) return {};
    std::vector<eval::ImageView> views;
    for (const auto& f : pending) views.push_back({f.rgb.data, f.rgb.cols, f.rgb.rows, 3, f.rgb.step[0]});
    KESTREL_ASSIGN_OR_RETURN(auto preds, p.Predict(views));
    if (preds.size() != pending.size())
      return Status::Internal("the detector returned a wrong number of images");
    for (size_t k = 0; k < preds.size(); ++k) {
      PendingFrame& f = pending[k];
      const PredictInput& in = inputs[f.input];
      PredictedImage im;
      im.source = in.source;
      im.output = f.frame > 0 ? in.output + "_" + std::to_string(f.frame) : in.output;
      im.frame = f.frame;
      im.width = preds[k].width;
      im.height = preds[k].height;
      im.detections = std::move(preds[k].detections);
      im.embedding = std::move(preds[k].embedding);
      if (!keep_classes.empty()) {  // classes=: the reference filters in its NMS, before max_det
        std::erase_if(im.detections, [&](const eval::Detection& d) {
          return !std::binary_search(keep_classes.begin(), keep_classes.end(), d.class_id);
        });
      }
      KESTREL_RETURN_IF_ERROR(emit(std::move(im), f));
    }
    pending.clear();
    return {};
  };

  for (size_t i = 0; i < inputs.size() && !stop_now(); ++i) {
    const PredictInput& in = inputs[i];
    if (in.kind == PredictInput::Kind::kImage) {
      // A file that cannot be read or decoded is a finding, not the end of
      // the run: the others are still predicted.
      Result<std::string> bytes = env.ReadFile(in.source);
      Result<cv::Mat> img =
          bytes.IsOk() ? data::DecodeImage(*bytes, in.source) : Result<cv::Mat>(bytes.GetStatus());
      if (!img.IsOk()) {
        out.skipped.push_back({in.source, img.GetStatus().Message()});
        continue;
      }
      pending.push_back({std::move(img).Value(), i, 0});
      if (pending.size() == batch) KESTREL_RETURN_IF_ERROR(run_batch());
      continue;
    }
    // A video: the images before it go first, so the writer sees only its frames.
    KESTREL_RETURN_IF_ERROR(run_batch());
    try {
      const std::unique_ptr<VideoReader> cap = OpenVideo(*video, in);
      if (!cap) {
        if (in.kind == PredictInput::Kind::kVideo) {
          out.skipped.push_back({in.source, "cannot open the video (OpenCV video I/O, FFmpeg)"});
          continue;
        }
        return Status::Unavailable(in.kind == PredictInput::Kind::kCamera
                                       ? "cannot open camera " + std::to_string(in.camera)
                                       : "cannot open the stream (OpenCV video I/O, FFmpeg)",
                                   {in.source, 0, "source"});
      }
      const double fps = cap->Fps();
      writer_fps = fps > 0 && std::isfinite(fps) ? std::max(1.0, fps / o.vid_stride) : 30.0;
      int64_t frame = 0;
      VideoFrame decoded;
      while (!stop_now()) {
        // As the reference: grab vid_stride frames, decode the last one.
        if (!cap->Next(o.vid_stride, &decoded)) break;
        PendingFrame f{cv::Mat(), i, ++frame, {}, decoded.width, decoded.height};
        cv::cvtColor(cv::Mat(decoded.height, decoded.width, CV_8UC3, decoded.bgr.data()), f.rgb,
                     cv::COLOR_BGR2RGB);
        if (o.save) {
          // The frame is drawn on and written later: keep the decoded pixels
          // (the reader refills a fresh buffer for the next frame).
          f.pixels = std::move(decoded.bgr);
        }
        pending.push_back(std::move(f));
        if (pending.size() == batch) KESTREL_RETURN_IF_ERROR(run_batch());
      }
      KESTREL_RETURN_IF_ERROR(run_batch());
      if (writer) writer->Close();  // a stop too: the .mp4 is finished (trailer written), not cut off
      writer.reset();
      if (frame == 0 && !out.stopped)
        out.skipped.push_back({in.source, "no frame could be read (OpenCV video I/O, FFmpeg)"});
    } catch (const std::exception& e) {  // cv::Exception among them
      return Status::Internal(std::string("OpenCV: ") + e.what(), {in.source, 0, "source"});
    }
  }
  KESTREL_RETURN_IF_ERROR(run_batch());
  if (out.predicted == 0 && out.stopped) {
    // Nothing was staged (the folder is made at the first image): no run folder.
    return Status::Aborted("stopped by a signal before any image was predicted", {o.source, 0, "source"});
  }
  if (out.predicted == 0) {
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
  if (o.save_txt) KESTREL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(dir, "labels")));
  KESTREL_RETURN_IF_ERROR(env.SyncFilesystem(dir));
  KESTREL_RETURN_IF_ERROR(staged->Commit());
  return out;
}

}  // namespace

Result<PredictResult> PredictFiles(Env& env, const PredictRequest& o, const std::string& root,
                                   const std::vector<std::string>& files, Detector& p,
                                   const PredictSink& sink) {
  const std::vector<std::string> outputs = PredictOutputNames(root, files);
  std::vector<PredictInput> inputs;
  inputs.reserve(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    const bool video = IsVideoExtension(Extension(files[i]));
    inputs.push_back({video ? PredictInput::Kind::kVideo : PredictInput::Kind::kImage, files[i], outputs[i]});
  }
  return RunInputs(env, o, inputs, p, sink);
}

eval::InferenceOptions InferenceOptionsOf(const PredictRequest& o) {
  eval::InferenceOptions io;
  io.imgsz = o.imgsz;
  io.batch = o.batch;
  io.nms.conf = static_cast<float>(o.conf);
  io.nms.iou = static_cast<float>(o.iou);
  io.nms.max_det = o.max_det;
  io.nms.agnostic = o.agnostic_nms;
  return io;
}

Status CheckHalf(bool half, const std::string& model, const std::string& runtime) {
  if (!half) return {};
  const bool onnx = model.size() >= 5 && model.compare(model.size() - 5, 5, ".onnx") == 0;
  if (onnx && runtime == "onnxruntime") return {};
  return Status::InvalidArgument(
      std::string("half=true: ") +
          (onnx ? "OpenCV DNN (runtime=opencv) runs float32 only; use runtime=onnxruntime with an FP16 export"
                : "FP16 inference of weights is not on this CPU build (LibTorch runs float32 here); export "
                  "format=onnx half=true and run model=FILE.onnx runtime=onnxruntime"),
      {"", 0, "half"});
}

Result<PredictResult> PredictWith(Env& env, const PredictRequest& o, const WeightsResolver& resolve,
                                  const DetectorLoader& load, const PredictSink& sink) {
  if (o.model.empty() || o.source.empty()) {
    return Status::InvalidArgument("model=WEIGHTS and source=IMAGE|VIDEO|DIR|GLOB|CAMERA|URL are required",
                                   {"", 0, o.model.empty() ? "model" : "source"});
  }
  KESTREL_RETURN_IF_ERROR(CheckHalf(o.half, o.model, o.runtime));
  KESTREL_RETURN_IF_ERROR(CheckVidStride(o));
  // Inputs first: nothing is written for a bad source or model.
  KESTREL_ASSIGN_OR_RETURN(PredictSource src, ResolvePredictSource(env, o.source));
  std::string weights = o.model;
  if (resolve) KESTREL_RETURN_IF_ERROR(resolve(&weights));
  KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<Detector> detector,
                           load(weights, InferenceOptionsOf(o), DetectorPlacement{o.device, o.runtime}));
  if (src.kind == PredictSourceKind::kCamera || src.kind == PredictSourceKind::kStream) {
    PredictInput in;
    in.kind =
        src.kind == PredictSourceKind::kCamera ? PredictInput::Kind::kCamera : PredictInput::Kind::kStream;
    in.source = o.source;
    in.output = src.stem;
    in.camera = src.camera;
    return RunInputs(env, o, {in}, *detector, sink);
  }
  return PredictFiles(env, o, src.root, src.files, *detector, sink);
}

Result<PredictResult> Predict(Env& env, const PredictRequest& request, const WeightsResolver& resolve,
                              const PredictSink& sink) {
  return PredictWith(env, request, resolve, LoadDetector, sink);
}

}  // namespace kestrel::app
