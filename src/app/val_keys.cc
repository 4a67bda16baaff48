#include "app/val_keys.h"

#include "train/train_config.h"

namespace kestrel::app {

void ValKeys::Bind(OptionSet& s) {
  s.String("predictions", &predictions,
           "predictions to score: folder of YOLO txt files or COCO results JSON");
  s.String("model", &model, "weights file (.safetensors, .pt) or exported .onnx file to run on the split");
  s.String("data", &data, "dataset NAME or NAME@VERSION");
  s.Choice("split", &split, {"train", "val", "test"}, "split to evaluate");
  // iou, imgsz and batch apply to model=; iou is recorded for predictions=.
  train::BindInferenceKeys(s, &conf, &iou, &imgsz, &max_det, &batch);
  s.String("device", &device, "model=: cpu, cuda, cuda:N or a CUDA device index N (val jobs: cpu)");
  s.Choice("runtime", &runtime, {"opencv", "onnxruntime"},
           "model=*.onnx: opencv (OpenCV DNN in process) or onnxruntime (ONNX Runtime through node; runs "
           "FP16 and INT8 exports)");
  s.Bool("rect", &rect,
         "model=: batches by aspect ratio, each letterboxed to its own shape plus half a stride "
         "(the reference validator); false: every image letterboxed into imgsz x imgsz");
  s.Choice("image_ids", &image_ids, {"auto", "stem", "export"},
           "how COCO results image_id names images (read with predictions=, written with save_json=)");
  train::BindRunFolderKeys(s, &project, &name, &exist_ok);  // name "" = val, val2, ...
  s.Bool("plots", &plots, "write the PNG plots and the val_batch0 image grids into the run folder");
  s.Bool("save_json", &save_json, "write the scored predictions as COCO results JSON (predictions.json)");
  s.Bool("coco_metrics", &coco_metrics, "also compute COCO-style AP/AR (pycocotools conventions)");
  s.Bool("agnostic_nms", &agnostic_nms, "model=: NMS across classes (a box suppresses any class's)");
  s.Bool("half", &half,
         "model=: FP16 inference, only an FP16 ONNX export with runtime=onnxruntime (weights: a clear error "
         "on this CPU build)");
  // The reference validator's dataset: only these classes' labels, or one
  // class (single_cls: predictions become class 0, NMS class-agnostic).
  subset.Bind(s, /*train=*/false);
}

bool IsJobOwnedValKey(const std::string& key) {
  return key == "predictions" || key == "project" || key == "name" || key == "exist_ok";
}

}  // namespace kestrel::app
