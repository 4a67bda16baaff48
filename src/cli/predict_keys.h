// The keys of `predict`, bound once for `kestrel predict` (model_cmd.cc) and
// `kestrel-deploy predict` (deploy_cmd.cc), so the two cannot disagree on a
// name, range or default. Torch-free header.
#pragma once

#include "app/predict.h"
#include "core/options.h"
#include "train/train_config.h"

namespace kestrel::cli {

// The exit status both predict commands document in --help (docs/cli.md "Exit
// codes", docs/evaluation.md) and set through app::PredictExitCode.
inline constexpr const char* kPredictExitHelp =
    "Exit status: 0 every image predicted; 1 a file could not be read or decoded (skipped, listed in "
    "\"skipped\" and the summary; the other images' outputs are written) or no image could be read at "
    "all, or another failure; 2 bad command line; 130 stopped by Ctrl-C or SIGTERM (the run folder holds "
    "what was predicted until then).";

inline void BindPredictKeys(OptionSet& s, app::PredictRequest* r) {
  s.String("model", &r->model, "weights file (.safetensors, .pt) or an exported .onnx file");
  s.String("source", &r->source,
           "an image or video file, a folder (images and videos), a glob ('dir/*.jpg', 'dir/**/*.mp4'), a "
           "camera index (0) or a stream URL (rtsp://, rtmp://, http(s)://, tcp://, udp://)");
  s.Int("vid_stride", &r->vid_stride, "videos, cameras, streams: predict every vid_stride-th frame", 1);
  s.Bool("stream", &r->stream,
         "print each image's or frame's result as it is predicted and keep none (constant memory on long "
         "videos; --json: one JSON line per frame, then the summary)");
  train::BindInferenceKeys(s, &r->conf, &r->iou, &r->imgsz, &r->max_det, &r->batch);
  s.String("device", &r->device, "cpu, cuda, cuda:N or a CUDA device index N");
  s.Choice(
      "runtime", &r->runtime, {"opencv", "onnxruntime"},
      "model=*.onnx: opencv (OpenCV DNN in process) or onnxruntime (ONNX Runtime through node; runs FP16 "
      "and INT8 exports)");
  s.Bool("save", &r->save, "write annotated images");
  s.Bool("save_txt", &r->save_txt, "write YOLO txt (class cx cy w h conf, normalized) per image");
  s.Bool("save_json", &r->save_json, "write a JSON file per image");
  s.Bool("save_crop", &r->save_crop,
         "write each detection's pixels to crops/<class name>/<image>.jpg (then <image>2.jpg, ...)");
  s.Bool("save_conf", &r->save_conf,
         "save_txt: the confidence as a sixth column (the reference's default is false, Kestrel's true)");
  s.String("classes", &r->classes,
           "keep only these class indices' detections, e.g. 0,2 or [0,2] (\"\" = all)");
  s.Bool("agnostic_nms", &r->agnostic_nms,
         "NMS across classes (a box suppresses overlapping boxes of any class)");
  s.Int("line_width", &r->line_width,
        "box line width in pixels of annotated images and videos (0 = from the size)", 0, 100);
  s.Bool("show_labels", &r->show_labels, "annotated images and videos: the class name in each caption");
  s.Bool("show_conf", &r->show_conf, "annotated images and videos: the confidence in each caption");
  s.Bool("half", &r->half,
         "FP16 inference: only an FP16 ONNX export with runtime=onnxruntime (weights: a clear error on this "
         "CPU build)");
  train::BindRunFolderKeys(s, &r->project, &r->name, &r->exist_ok);  // name "" = predict, predict2, ...
}

}  // namespace kestrel::cli
