// ValKeys: every key of `kestrel val` (docs/evaluation.md), bound once, for
// the command and for val jobs (`kestrel submit kind=val`, app/jobs.h), so
// the two cannot disagree on a name, range or default.
#pragma once

#include <string>

#include "core/options.h"
#include "core/status.h"
#include "train/data_subset.h"

namespace kestrel::app {

struct ValKeys {
  std::string predictions;  // folder of YOLO txt or COCO results JSON
  std::string model;        // weights (.safetensors)
  std::string data;         // NAME[@VERSION]
  std::string split = "val";
  double conf = 0.001;
  double iou = 0.7;
  int max_det = 300;
  int imgsz = 0;  // model=: 0 = the weights' training size, else 640 (app/imgsz.h)
  int batch = 16;
  std::string device = "cpu";      // model=: cpu, cuda, cuda:N or N (core/device_spec.h)
  std::string runtime = "opencv";  // model=*.onnx: opencv (OpenCV DNN) or onnxruntime
  bool rect = true;
  std::string image_ids = "auto";
  std::string project = "runs/detect";  // runs/detect/val, val2, ... as the reference
  std::string name;
  bool exist_ok = false;
  bool plots = true;
  bool save_json = false;
  bool coco_metrics = false;
  bool agnostic_nms = false;  // model=: class-agnostic NMS
  bool half = false;          // model=: FP16 inference (app::CheckHalf)
  train::DataSubset subset;   // classes, single_cls: the labels scored (no fraction)

  void Bind(OptionSet& s);
};

// Val keys a val job may not set: the job system decides where the run
// folder is, and a job always runs a model (predictions= are files on the
// submitting machine).
bool IsJobOwnedValKey(const std::string& key);

}  // namespace kestrel::app
