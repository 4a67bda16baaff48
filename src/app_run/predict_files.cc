#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "app_run/detector.h"
#include "app_run/onnx_predict.h"
#include "app_run/predict.h"
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

// The images of `source`: the file itself, or the image files of a folder.
Result<std::vector<std::string>> SourceFiles(Env& env, const std::string& source) {
  const FileInfo info = env.Stat(source);
  if (!info.exists) return Status::NotFound("source not found", {source, 0, "source"});
  if (!info.is_dir) return std::vector<std::string>{source};
  KESTREL_ASSIGN_OR_RETURN(auto names, env.ListDir(source));
  std::vector<std::string> files;
  for (const auto& n : names) {
    if (data::IsImageExtension(Extension(n))) files.push_back(JoinPath(source, n));
  }
  if (files.empty())
    return Status::NotFound("no images (jpg, png, bmp, webp, tif) in folder", {source, 0, "source"});
  return files;
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
  return {{"ok", true}, {"dir", r.dir}, {"speed", PredictSpeedJson(r.speed)}, {"images", images}};
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

Result<PredictResult> PredictFiles(Env& env, const PredictRequest& o, const std::vector<std::string>& files,
                                   Detector& p) {
  PredictResult out;
  out.names = p.Names();
  // At most one batch of decoded images is held, except the ones kept for
  // drawing when save=true.
  std::vector<cv::Mat> decoded(files.size());
  const size_t batch = size_t(p.Options().batch);
  for (size_t start = 0; start < files.size(); start += batch) {
    std::vector<cv::Mat> images;
    std::vector<eval::ImageView> views;
    for (size_t i = start; i < std::min(files.size(), start + batch); ++i) {
      KESTREL_ASSIGN_OR_RETURN(std::string bytes, env.ReadFile(files[i]));
      KESTREL_ASSIGN_OR_RETURN(cv::Mat img, data::DecodeImage(bytes, files[i]));
      if (o.save) decoded[i] = img;
      views.push_back({img.data, img.cols, img.rows, img.channels(), img.step[0]});
      images.push_back(std::move(img));
    }
    KESTREL_ASSIGN_OR_RETURN(auto preds, p.Predict(views));
    for (auto& pr : preds) {
      const size_t i = out.images.size();
      out.images.push_back({files[i], pr.width, pr.height, std::move(pr.detections)});
    }
  }
  const eval::StageTimes t = p.Timing();
  out.speed = {t.preprocess_ms, t.inference_ms, t.postprocess_ms, t.images, t.Fps(), p.Options().imgsz};

  out.dir = eval::NextRunDir(env, o.project, o.name, "predict", o.exist_ok);
  // Written beside the run folder and moved in when every image is done: a
  // failure halfway leaves no folder that looks like a complete prediction.
  KESTREL_ASSIGN_OR_RETURN(StagedDir staged, StagedDir::Create(env, out.dir));
  const std::string& dir = staged.Path();
  if (o.save_txt) KESTREL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(dir, "labels")));
  for (size_t i = 0; i < files.size(); ++i) {
    const PredictedImage& r = out.images[i];
    const std::string stem = Stem(files[i]);
    if (o.save) {
      const cv::Mat& img = decoded[i];
      const eval::ImageView view{img.data, img.cols, img.rows, 3, img.step};
      Result<std::string> jpg = RenderDetectionsJpeg(view, r.detections, out.names);
      if (!jpg.IsOk()) return Status::Internal(jpg.GetStatus().Message(), {files[i]});
      KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(dir, stem + ".jpg"), *jpg));
      decoded[i].release();
    }
    if (o.save_txt)
      KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(dir, "labels/" + stem + ".txt"), YoloTxt(r)));
    if (o.save_json) {
      KESTREL_RETURN_IF_ERROR(
          env.WriteFileAtomic(JoinPath(dir, stem + ".json"), DumpJson(PredictedImageJson(r, out.names), 1)));
    }
  }
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
  std::string weights = o.model;
  if (resolve) KESTREL_RETURN_IF_ERROR(resolve(&weights));
  KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<Detector> detector,
                           load(weights, InferenceOptionsOf(o), DetectorPlacement{o.device, o.runtime}));
  return PredictFiles(env, o, files, *detector);
}

Result<std::unique_ptr<Detector>> LoadOnnxDetector(const std::string& weights,
                                                   const eval::InferenceOptions& options,
                                                   const DetectorPlacement& where) {
  if (where.runtime != "opencv" && where.runtime != "onnxruntime") {
    return Status::InvalidArgument("runtime=" + where.runtime + ": one of opencv, onnxruntime",
                                   {"command line", 0, "runtime"});
  }
  if (!IsOnnxModelPath(weights)) {
    return Status::FailedPrecondition(
        "this program runs exported ONNX files only (LibTorch-free): export the model with `kestrel export "
        "model=" +
            weights + "` and pass the .onnx file",
        {weights, 0, "model"});
  }
  const OnnxEngine engine =
      where.runtime == "onnxruntime" ? OnnxEngine::kOnnxRuntime : OnnxEngine::kOpenCvDnn;
  KESTREL_ASSIGN_OR_RETURN(auto onnx, OnnxPredictor::Load(weights, options, engine));
  return std::unique_ptr<Detector>(std::move(onnx));
}

Result<PredictResult> PredictOnnx(Env& env, const PredictRequest& request, const WeightsResolver& resolve) {
  return PredictWith(env, request, resolve, LoadOnnxDetector);
}

}  // namespace kestrel::app
