// A Detector scored on a dataset split as the reference validator scores:
// the step `val model=` (evaluate.h EvaluateModel), `compare` (compare.h)
// and the export's mAP check share, whatever backend loads the detector
// (app/backends.h). Torch-free and OpenCV-free header.
#pragma once

#include <string>

#include "app/detector.h"
#include "app/evaluate.h"
#include "app/val_keys.h"
#include "core/env.h"
#include "core/status.h"
#include "eval/dataset_eval.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// The validator's settings a model runs with.
struct ModelRunOptions {
  int imgsz = 640;
  int batch = 16;
  double conf = 0.001;  // validator settings (multi-label NMS)
  double iou = 0.7;
  int max_det = 300;
  bool rect = true;                // eval/val_shapes.h: batches by aspect ratio (false: imgsz x imgsz)
  double pad = 0.5;                // rect border in strides
  std::string device = "cpu";      // LibTorch models (core/device_spec.h); ONNX files run on the CPU
  std::string runtime = "opencv";  // ONNX files: opencv or onnxruntime (DetectorPlacement)
  bool agnostic_nms = false;       // one class for suppression (the reference's agnostic_nms)
  // The reference validator's single_cls: NMS class-agnostic, every
  // prediction class 0, scored against a split of one class (the model may
  // have any number).
  bool single_cls = false;
};

// `weights` loaded through `load` with the validator's settings (multi-label
// NMS at conf/iou/max_det) and run on every image of `split` (decoded from
// `blobs` one at a time), scored with the labels letterboxed as the
// reference validator scores them. A detector with a fixed input side
// letterboxes every image into it (rect=false, as the record's provenance
// says). kInvalidArgument naming field "nc" of the weights when the class
// counts differ.
Result<ScoredSplit> ScoreModelOnSplit(store::ArtifactStore& blobs, const std::string& weights,
                                      const eval::EvalSplit& split, const ModelRunOptions& opts,
                                      const DetectorLoader& load);

// ScoreModelOnSplit with the detector already loaded (with the options
// ModelRunOptionsInference gives), so a caller can time the run alone.
Result<ScoredSplit> ScoreLoadedModelOnSplit(Detector& detector, store::ArtifactStore& blobs,
                                            const std::string& weights, const eval::EvalSplit& split,
                                            ModelRunOptions opts);
// The inference options (imgsz, batch, multi-label NMS at conf/iou/max_det)
// a detector is loaded with for ScoreModelOnSplit.
eval::InferenceOptions ModelRunInference(const ModelRunOptions& opts);

// `val model=` with a caller's loader: keys.data's split (a registry
// reference) scored as ScoreModelOnSplit, then WriteValRun into
// `dir_or_empty` (or the next free keys.project/keys.name). EvaluateModel
// (evaluate.h) is this with the program's LoadDetector.
Result<ValRun> EvaluateModelWith(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                                 const ValKeys& keys, const std::string& dir_or_empty,
                                 const DetectorLoader& load);

}  // namespace kestrel::app
