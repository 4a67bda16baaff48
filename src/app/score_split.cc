// ScoreModelOnSplit (score_split.h): the split decoded one image at a time
// (OpenCV only as data::DecodeImage's result) through a Detector.
#include "app/score_split.h"

#include <opencv2/core.hpp>
#include <utility>
#include <vector>

#include "app/backends.h"
#include "app/predict.h"
#include "data/image.h"
#include "data/version_files.h"

namespace kestrel::app {
namespace {

eval::ValShapeOptions ValShapes(const ModelRunOptions& opts) {
  eval::ValShapeOptions s;
  s.imgsz = opts.imgsz;
  s.batch = opts.batch;
  s.rect = opts.rect;
  s.pad = opts.pad;
  return s;
}

PredictSpeed Speed(const eval::StageTimes& t, int imgsz) {
  return {t.preprocess_ms, t.inference_ms, t.postprocess_ms, t.images, t.Fps(), imgsz};
}

// A model's detections on every image of a split, scored (ScoredSplit
// without the provenance source, which the caller names).
Result<ScoredSplit> ScoreDetector(Detector& pred, store::ArtifactStore& blobs, const std::string& weights,
                                  const eval::EvalSplit& split, const ModelRunOptions& opts) {
  if (!opts.single_cls && pred.NumClasses() != static_cast<int>(split.names.size())) {
    return Status::InvalidArgument("class count mismatch: the model has " +
                                       std::to_string(pred.NumClasses()) + " classes, the dataset has " +
                                       std::to_string(split.names.size()),
                                   {weights, 0, "nc"});
  }
  std::vector<eval::ImageSize> sizes;
  sizes.reserve(split.images.size());
  for (const auto& im : split.images) sizes.push_back({im.width, im.height});
  cv::Mat current;  // one image decoded at a time, valid until the next load
  KESTREL_ASSIGN_OR_RETURN(
      auto preds, pred.PredictVal(sizes, ValShapes(opts), [&](size_t i) -> Result<eval::ImageView> {
        const eval::SplitImage& im = split.images[i];
        KESTREL_ASSIGN_OR_RETURN(
            std::string bytes,
            data::ReadImageBytes(im.path, im.image_sha, im.file, split.version, blobs, Env::Default()));
        KESTREL_ASSIGN_OR_RETURN(current, data::DecodeImage(bytes, split.images[i].path));
        return eval::ImageView{current.data, current.cols, current.rows, current.channels(), current.step[0]};
      }));
  ScoredSplit out;
  for (auto& p : preds) out.per_image.push_back(std::move(p.detections));
  if (opts.single_cls) {
    for (auto& dets : out.per_image) {
      for (auto& d : dets) d.class_id = 0;
    }
  }
  out.source_kind = "model";
  out.source = weights;
  out.extra = {{"model", pred.Arch()}, {"nc", pred.NumClasses()}, {"imgsz", opts.imgsz},
               {"batch", opts.batch},  {"nms_conf", opts.conf},   {"nms_iou", opts.iou},
               {"multi_label", true},  {"rect", opts.rect},       {"pad", opts.pad}};
  out.speed = PredictSpeedJson(Speed(pred.Timing(), opts.imgsz));
  out.speed_text = PredictSpeedText(Speed(pred.Timing(), opts.imgsz));
  eval::EvalOptions eo;
  eo.conf = opts.conf;
  eo.iou = opts.iou;
  eo.max_det = opts.max_det;
  // Labels as the reference validator scores them after its letterbox.
  const eval::EvalSplit scored = eval::ValScoredSplit(split, ValShapes(opts));
  KESTREL_ASSIGN_OR_RETURN(out.result, eval::EvaluateSplit(scored, out.per_image, eo));
  return out;
}

}  // namespace

eval::InferenceOptions ModelRunInference(const ModelRunOptions& opts) {
  eval::InferenceOptions io;
  io.imgsz = opts.imgsz;
  io.batch = opts.batch;
  io.nms.conf = static_cast<float>(opts.conf);
  io.nms.iou = static_cast<float>(opts.iou);
  io.nms.max_det = opts.max_det;
  io.nms.multi_label = true;  // the validator's setting for mAP
  io.nms.agnostic = opts.agnostic_nms || opts.single_cls;
  return io;
}

Result<ScoredSplit> ScoreLoadedModelOnSplit(Detector& detector, store::ArtifactStore& blobs,
                                            const std::string& weights, const eval::EvalSplit& split,
                                            ModelRunOptions opts) {
  // The side in effect: the one given, the weights' training size when
  // imgsz was not given (LoadDetector), or a fixed ONNX file's.
  opts.imgsz = detector.Options().imgsz;
  if (detector.FixedInputSize()) {
    // An ONNX file with a fixed input has one shape: every image is
    // letterboxed into the file's side (rect=false), which the record's
    // provenance shows (docs/evaluation.md); a dynamic one runs the rect
    // batches as LibTorch does.
    opts.rect = false;
  }
  KESTREL_ASSIGN_OR_RETURN(ScoredSplit out, ScoreDetector(detector, blobs, weights, split, opts));
  if (const std::string runtime = detector.RuntimeName(); !runtime.empty()) out.extra["runtime"] = runtime;
  return out;
}

Result<ScoredSplit> ScoreModelOnSplit(store::ArtifactStore& blobs, const std::string& weights,
                                      const eval::EvalSplit& split, const ModelRunOptions& opts,
                                      const DetectorLoader& load) {
  KESTREL_ASSIGN_OR_RETURN(
      std::unique_ptr<Detector> pred,
      load(weights, ModelRunInference(opts), DetectorPlacement{opts.device, opts.runtime}));
  return ScoreLoadedModelOnSplit(*pred, blobs, weights, split, opts);
}

Result<ValRun> EvaluateModelWith(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                                 const ValKeys& keys, const std::string& dir_or_empty,
                                 const DetectorLoader& load) {
  KESTREL_RETURN_IF_ERROR(CheckHalf(keys.half, keys.model, keys.runtime));
  KESTREL_ASSIGN_OR_RETURN(LoadedSplit loaded, LoadSplit(meta, blobs, keys.data, keys.split, &keys.subset));
  ModelRunOptions mo{keys.imgsz, keys.batch, keys.conf, keys.iou, keys.max_det};
  mo.agnostic_nms = keys.agnostic_nms;
  mo.single_cls = keys.subset.single_cls;
  mo.device = keys.device;
  mo.runtime = keys.runtime;
  mo.rect = keys.rect;
  KESTREL_ASSIGN_OR_RETURN(ScoredSplit scored, ScoreModelOnSplit(blobs, keys.model, loaded.split, mo, load));
  return WriteValRun(env, blobs, keys, loaded, scored, dir_or_empty);
}

// evaluate.h's `val model=`, defined beside the scoring it is.
Result<ValRun> EvaluateModel(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                             const ValKeys& keys, const std::string& dir_or_empty) {
  return EvaluateModelWith(env, meta, blobs, keys, dir_or_empty, LoadDetector);
}

}  // namespace kestrel::app
