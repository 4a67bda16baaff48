// `predict` as a use case: a model run over an image file or a folder, the
// run folder it writes (annotated JPEGs, YOLO txt, one JSON per image) and
// the one JSON view of the result that `kestrel predict --json` and
// `kestrel-deploy predict --json` print and a server returns. The model runs
// in whichever backend the program registered for its file type
// (app/backends.h LoadDetector). Torch-free and OpenCV-free header.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/backends.h"
#include "app/detector.h"
#include "core/env.h"
#include "core/status.h"
#include "eval/detection.h"
#include "eval/plots.h"

namespace kestrel::app {

struct PredictRequest {
  std::string model;  // weights file (or a reference the resolver turns into one)
  // An image or video file, a folder (images and videos, subfolders
  // included), a glob, a camera index or a stream URL (app/predict_source.h).
  std::string source;
  int vid_stride = 1;   // videos, cameras, streams: predict every vid_stride-th frame
  bool stream = false;  // true: results go to the sink only, none kept (constant memory)
  double conf = 0.25, iou = 0.7;
  int imgsz = 0, batch = 1, max_det = 300;  // imgsz 0: the weights' training size (app/imgsz.h)
  std::string device = "cpu";               // cpu, cuda, cuda:N or N (core/device_spec.h)
  std::string runtime = "opencv";  // model=*.onnx: opencv (OpenCV DNN) or onnxruntime (ONNX Runtime, node)
  // <output>.jpg, labels/<output>.txt (only for images with detections, as
  // the reference), <output>.json; <output> is PredictedImage::output. A
  // video's frames: one annotated <stem>.mp4, labels/<stem>_<frame>.txt and
  // <stem>_<frame>.json.
  bool save = true, save_txt = true, save_json = true;
  // crops/<class name>/<output>.jpg: each detection's pixels (the box grown
  // as the reference's save_one_box: side * 1.02 + 10 px, clipped to the
  // image); a second crop of that class from the same image <output>2.jpg,
  // then 3, ... (the reference's numbering). Off by default, as the reference.
  bool save_crop = false;
  // The reference's keys (issue 28 item 4): classes= keeps only those class
  // indices' detections ("" = all; "0,2" or "[0,2]"); agnostic_nms
  // suppresses across classes; save_conf writes the confidence as the
  // txt's sixth column (Kestrel's default true; the reference's false);
  // line_width (0: from the image size), show_labels and show_conf style
  // the annotated images and videos.
  std::string classes;
  bool agnostic_nms = false;
  bool save_conf = true;
  int line_width = 0;
  bool show_labels = true, show_conf = true;
  bool half = false;                    // FP16 inference: CheckHalf
  std::string project = "runs/detect";  // runs/detect/predict, as the reference
  std::string name;                     // "" = predict, predict2, ...
  bool exist_ok = false;
  // Not a key: a flag the caller raises (the CLI's SIGINT/SIGTERM handler)
  // to end the run early, polled before every image and frame is read. The
  // batch in progress is finished, the annotated video closed, the files so
  // far made durable and the run folder moved in as after a complete run;
  // PredictResult::stopped says so. A live camera or stream only ends this
  // way (or when its sender stops). nullptr = never stopped. Borrowed.
  const std::atomic<bool>* stop = nullptr;
};

// Mean milliseconds per image after the predictor's warm-up batch.
struct PredictSpeed {
  double preprocess_ms = 0, inference_ms = 0, postprocess_ms = 0;
  int64_t images = 0;
  double fps = 0;
  int imgsz = 0;  // the square network input side
};

struct PredictedImage {
  std::string source;  // the path as found (folder + relative path)
  // Where its files are, relative to the run folder and without extension:
  // the source's relative path with its stem ("a/x" for a/x.jpg, as the
  // reference names x.jpg "x"); when an earlier file of the listing took
  // that name (x.jpg before x.webp), the file name with its extension
  // ("x.webp"), then "-2", "-3"... (PredictOutputNames).
  std::string output;
  // 0 for a still image; a video's, camera's or stream's frames: 1, 2, ...
  // in the order predicted (with vid_stride=2 frame 1 is the source's
  // second frame), as the reference counts them; output is then
  // "<stem>_<frame>".
  int64_t frame = 0;
  int width = 0, height = 0;                // original pixels (after EXIF orientation)
  std::vector<eval::Detection> detections;  // xyxy in original pixels, descending score
  std::vector<float> embedding;  // a detector loaded with embeddings: the image's (eval/inference.h)
};

// A source file that was not predicted: it could not be read or decoded
// (truncated JPEG, a text file named .png). The run goes on without it.
struct PredictSkip {
  std::string source;  // the path as found
  std::string reason;  // the reader's or decoder's message
};

struct PredictResult {
  std::string dir;                 // the run folder, complete (written beside it, then moved in)
  std::vector<std::string> names;  // the model's class names
  // In source order (a folder: sorted relative paths; a video: its frames);
  // empty with stream=true (the sink saw each one).
  std::vector<PredictedImage> images;
  int64_t predicted = 0;             // images and frames predicted (images.size() unless stream=true)
  int64_t frames = 0;                // of which video, camera or stream frames
  std::vector<PredictSkip> skipped;  // in source order; their files are not in the run folder
  PredictSpeed speed;
  // PredictRequest::stop ended the run before its sources did: `predicted`
  // counts what was done, and the run folder holds exactly that.
  bool stopped = false;
};

// `kestrel predict`'s exit status when PredictRequest::stop ended the run
// (Ctrl-C): 128 + SIGINT, what a shell reports for an interrupted command,
// so scripts see it was cut short although the run folder is complete.
inline constexpr int kPredictExitStopped = 130;

// The exit status of `kestrel predict` / `kestrel-deploy predict` for a
// result: kPredictExitStopped when it was stopped, else 0 when every source
// image was predicted, 1 when any was skipped (the others' outputs are
// written). No image readable at all is an error
// (PredictWith), also 1.
int PredictExitCode(const PredictResult& result);

// PredictedImage::output of each of `files` (paths under `root`, in listing
// order; `root` "" or a file: the file names): collision-free, deterministic.
std::vector<std::string> PredictOutputNames(const std::string& root, const std::vector<std::string>& files);

// Progress of a run, passed with every predicted image or frame.
struct PredictProgress {
  int64_t done = 0;      // images and frames predicted so far
  int64_t total = -1;    // expected (a video's frame count / vid_stride); -1 when unknown (camera, stream)
  double elapsed_s = 0;  // since the first file was opened
};
// Called with every image or frame as soon as it is predicted (and its
// files written), on the calling thread, with the model's class names. The
// references are valid during the call.
using PredictSink = std::function<void(const PredictedImage& image, const PredictProgress& progress,
                                       const std::vector<std::string>& names)>;

// Turns `model=` into a weights path (the CLI resolves registry references
// such as NAME@vN here). Called once, after the source was checked.
using WeightsResolver = std::function<Status(std::string* weights)>;

// Checks the source (app/predict_source.h ResolvePredictSource: kNotFound
// or kInvalidArgument naming it), resolves the model, loads it through
// `load`, predicts every image and frame `batch` at a time, writing each
// one's files into the staged run folder as it goes (PredictFiles), and
// moves the folder in at the end. A file that cannot be read or decoded (a
// video that cannot be opened) is skipped (PredictResult::skipped) and the
// others are predicted; when none can be, kCorruption naming `source` and
// the first reasons. A camera or stream that cannot be opened is
// kUnavailable naming `source`. Nothing is written for a bad source or
// model; a failure leaves no run folder. `model` and `source` must be
// non-empty, vid_stride >= 1 (kInvalidArgument naming the field otherwise).
Result<PredictResult> PredictWith(Env& env, const PredictRequest& request, const WeightsResolver& resolve,
                                  const DetectorLoader& load, const PredictSink& sink = {});
// The images and videos `files` (listed under `root`: the source folder, or
// "" for a single file) through `detector`, `batch` at a time.
Result<PredictResult> PredictFiles(Env& env, const PredictRequest& request, const std::string& root,
                                   const std::vector<std::string>& files, Detector& detector,
                                   const PredictSink& sink = {});
// imgsz, batch, conf, iou and max_det of a request.
eval::InferenceOptions InferenceOptionsOf(const PredictRequest& request);

// PredictWith(LoadDetector of app/backends.h): `kestrel predict` and
// `kestrel-deploy predict` (which has no LibTorch backend: LibTorch weights
// are then kFailedPrecondition naming `model`, before anything is written).
Result<PredictResult> Predict(Env& env, const PredictRequest& request, const WeightsResolver& resolve = {},
                              const PredictSink& sink = {});

// The JSON views (`kestrel predict --json` prints PredictResultJson).
// Detection: {"class_id", "name" ("" when out of range), "confidence", "box_xyxy"}.
nlohmann::json DetectionsJson(const std::vector<eval::Detection>& detections,
                              const std::vector<std::string>& names);
// {"source", "output", "frame", "width", "height", "detections"}: also the
// content of <output>.json.
nlohmann::json PredictedImageJson(const PredictedImage& image, const std::vector<std::string>& names);
// {"preprocess_ms", "inference_ms", "postprocess_ms", "images", "fps"}.
nlohmann::json PredictSpeedJson(const PredictSpeed& speed);
// {"ok" (no file skipped), "dir", "speed", "predicted", "frames", "images":
// [PredictedImageJson...], "skipped": [{"source", "reason"}...], "stopped"}.
nlohmann::json PredictResultJson(const PredictResult& result);
// One image's summary line: "SOURCE: WxH, 2 person, 1 dog, " (a frame:
// "SOURCE (frame 7): ...").
std::string PredictedImageLine(const PredictedImage& image, const std::vector<std::string>& names);
// "frames 120/300 (40%), 12.3 frames/s, 9.8 s" (total unknown: "frames 120, ...").
std::string PredictProgressText(const PredictProgress& progress);
// The human summary: one line per image with counts per class, one
// "skipped FILE: reason" line per skipped file, "N images predicted, M
// skipped" (", stopped by a signal" when it was), the speed line and
// "results saved to DIR".
std::string PredictResultText(const PredictResult& result);
// "speed: ...ms preprocess, ... per image at WxH (N FPS, M images after warm-up)\n".
std::string PredictSpeedText(const PredictSpeed& speed);

// half=true (val, predict), the reference's FP16 inference: here only an
// exported .onnx file run with runtime=onnxruntime has an FP16 path (the
// file's precision decides: `kestrel export format=onnx half=true`);
// LibTorch weights run in float32 on this build, so half=true with them,
// or with runtime=opencv, is kInvalidArgument naming half.
Status CheckHalf(bool half, const std::string& model, const std::string& runtime);

// YOLO txt of one image: "class cx cy w h conf" normalized, 6 decimals
// (without conf when `with_conf` is false: the reference's save_conf=false).
std::string YoloTxt(const PredictedImage& image, bool with_conf = true);

// How detections are drawn: box line width in pixels (0: from the image
// size, as the reference), and whether the caption shows the class name
// and the confidence (neither: no caption).
struct DrawStyle {
  int line_width = 0;
  bool show_labels = true;
  bool show_conf = true;
};

// JPEG bytes of `image` (8-bit, 3 channels, RGB) with every detection drawn:
// a class-coloured box and a "name 0.87" caption in the shared text renderer
// (data/text_render.h). OpenCV failures become kInternal.
Result<std::string> RenderDetectionsJpeg(const eval::ImageView& rgb,
                                         const std::vector<eval::Detection>& detections,
                                         const std::vector<std::string>& names, const DrawStyle& style = {});

}  // namespace kestrel::app
