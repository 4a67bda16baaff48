#include "app_run/evaluate.h"

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>
#include <vector>

#include "app_run/onnx_predict.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/staged_dir.h"
#include "data/image.h"
#include "eval/compare_plots.h"
#include "eval/plots.h"
#include "model/predictor.h"

namespace kestrel::app {
namespace {

struct ModelRunOptions {
  int imgsz = 640;
  int batch = 16;
  double conf = 0.001;  // validator settings (multi-label NMS)
  double iou = 0.7;
  int max_det = 300;
  bool rect = true;            // eval/val_shapes.h: batches by aspect ratio (false: imgsz x imgsz)
  double pad = 0.5;            // rect border in strides
  std::string device = "cpu";  // LibTorch models (core/device_spec.h); ONNX files run on the CPU
};

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

// One split through either runner, one image decoded at a time.
Result<std::vector<eval::ImagePrediction>> RunSplit(model::Predictor& p, store::ArtifactStore& blobs,
                                                    const eval::EvalSplit& split,
                                                    const std::vector<eval::ImageSize>& sizes,
                                                    const eval::ValShapeOptions& shapes) {
  return p.PredictVal(sizes, shapes, [&](size_t i) -> Result<cv::Mat> {
    KESTREL_ASSIGN_OR_RETURN(std::string bytes, blobs.Get(split.images[i].image_sha));
    return data::DecodeImage(bytes, split.images[i].path);
  });
}
Result<std::vector<eval::ImagePrediction>> RunSplit(OnnxPredictor& p, store::ArtifactStore& blobs,
                                                    const eval::EvalSplit& split,
                                                    const std::vector<eval::ImageSize>& sizes,
                                                    const eval::ValShapeOptions& shapes) {
  cv::Mat current;  // valid until the next load, as BatchInference requires
  return p.PredictVal(sizes, shapes, [&](size_t i) -> Result<eval::ImageView> {
    KESTREL_ASSIGN_OR_RETURN(std::string bytes, blobs.Get(split.images[i].image_sha));
    KESTREL_ASSIGN_OR_RETURN(current, data::DecodeImage(bytes, split.images[i].path));
    return eval::ImageView{current.data, current.cols, current.rows, current.channels(), current.step[0]};
  });
}

std::string ArchName(const model::Predictor& p) { return p.Spec().Name(); }
std::string ArchName(const OnnxPredictor& p) { return p.Info().arch; }

// A model's detections on every image of a split, scored (ScoredSplit
// without the provenance source, which the caller names). `pred` is
// model::Predictor or OnnxPredictor: the same eval::BatchInference.
template <class Runner>
Result<ScoredSplit> ScoreWith(Runner& pred, store::ArtifactStore& blobs, const std::string& weights,
                              const eval::EvalSplit& split, const ModelRunOptions& opts) {
  if (pred.NumClasses() != static_cast<int>(split.names.size())) {
    return Status::InvalidArgument("class count mismatch: the model has " +
                                       std::to_string(pred.NumClasses()) + " classes, the dataset has " +
                                       std::to_string(split.names.size()),
                                   {weights, 0, "nc"});
  }
  std::vector<eval::ImageSize> sizes;
  sizes.reserve(split.images.size());
  for (const auto& im : split.images) sizes.push_back({im.width, im.height});
  KESTREL_ASSIGN_OR_RETURN(auto preds, RunSplit(pred, blobs, split, sizes, ValShapes(opts)));
  ScoredSplit out;
  for (auto& p : preds) out.per_image.push_back(std::move(p.detections));
  out.source_kind = "model";
  out.source = weights;
  out.extra = {{"model", ArchName(pred)}, {"nc", pred.NumClasses()}, {"imgsz", opts.imgsz},
               {"batch", opts.batch},     {"nms_conf", opts.conf},   {"nms_iou", opts.iou},
               {"multi_label", true},     {"rect", opts.rect},       {"pad", opts.pad}};
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

Result<ScoredSplit> ScoreModelOnSplit(store::ArtifactStore& blobs, const std::string& weights,
                                      const eval::EvalSplit& split, ModelRunOptions opts) {
  model::PredictorOptions po;
  po.imgsz = opts.imgsz;
  po.batch = opts.batch;
  po.nms.conf = static_cast<float>(opts.conf);
  po.nms.iou = static_cast<float>(opts.iou);
  po.nms.max_det = opts.max_det;
  po.device = opts.device;
  po.nms.multi_label = true;  // the validator's setting for mAP
  if (IsOnnxModelPath(weights)) {
    // OpenCV DNN on the exported file. A graph with a fixed input has one
    // shape: every image is letterboxed into the file's side (rect=false),
    // which the record's provenance shows (docs/evaluation.md); a dynamic
    // one runs the rect batches as LibTorch does.
    KESTREL_ASSIGN_OR_RETURN(auto onnx, OnnxPredictor::Load(weights, po));
    if (onnx->Info().FixedSize()) {
      opts.imgsz = onnx->Options().imgsz;
      opts.rect = false;
    }
    KESTREL_ASSIGN_OR_RETURN(ScoredSplit out, ScoreWith(*onnx, blobs, weights, split, opts));
    out.extra["runtime"] = onnx->RuntimeName();
    return out;
  }
  KESTREL_ASSIGN_OR_RETURN(auto pred, model::Predictor::Load(weights, po));
  return ScoreWith(*pred, blobs, weights, split, opts);
}

inline constexpr size_t kMaxDiffImages = 8;

// Image i of the split with A's detections (left) and B's (right), labels drawn.
Result<std::string> RenderSideBySide(store::ArtifactStore& blobs, const eval::EvalSplit& split, size_t i,
                                     const ScoredSplit& a, const ScoredSplit& b) {
  const eval::SplitImage& im = split.images[i];
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, blobs.Get(im.image_sha));
  KESTREL_ASSIGN_OR_RETURN(cv::Mat rgb, data::DecodeImage(bytes, im.path));
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  const eval::ImageView view{bgr.data, bgr.cols, bgr.rows, 3, bgr.step};
  std::vector<eval::GridTile> tiles = {{view, a.per_image[i], im.labels, "A: " + im.path},
                                       {view, b.per_image[i], im.labels, "B: " + im.path}};
  eval::GridOptions go;
  go.columns = 2;
  go.tile_size = 480;
  return eval::RenderDetectionGrid(tiles, split.names, go);
}

}  // namespace

Result<ValRun> EvaluateModel(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                             const ValKeys& keys, const std::string& dir_or_empty) {
  KESTREL_ASSIGN_OR_RETURN(LoadedSplit loaded, LoadSplit(meta, blobs, keys.data, keys.split));
  ModelRunOptions mo{keys.imgsz, keys.batch, keys.conf, keys.iou, keys.max_det};
  mo.device = keys.device;
  mo.rect = keys.rect;
  KESTREL_ASSIGN_OR_RETURN(ScoredSplit scored, ScoreModelOnSplit(blobs, keys.model, loaded.split, mo));
  return WriteValRun(env, blobs, keys, loaded, scored, dir_or_empty);
}

Result<CompareResult> CompareModels(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                                    const CompareRequest& request, const WeightsResolver& resolve) {
  const CompareRequest& o = request;
  KESTREL_ASSIGN_OR_RETURN(LoadedSplit loaded, LoadSplit(meta, blobs, o.data, o.split));
  const eval::EvalSplit& split = loaded.split;
  const ModelRunOptions mo{o.imgsz, o.batch, o.conf, o.iou, o.max_det};
  const std::string models[2] = {o.model_a, o.model_b};
  std::vector<ScoredSplit> scored;
  for (std::string m : models) {
    if (resolve) KESTREL_RETURN_IF_ERROR(resolve(&m));  // e.g. a registered model's reference
    KESTREL_ASSIGN_OR_RETURN(ScoredSplit s, ScoreModelOnSplit(blobs, m, split, mo));
    scored.push_back(std::move(s));
  }
  const ScoredSplit& a = scored[0];
  const ScoredSplit& b = scored[1];
  CompareResult out;
  // Per-image "right" (docs/evaluation.md): A right & B wrong, and vice versa.
  std::vector<size_t> a_only, b_only;
  for (size_t i = 0; i < split.images.size(); ++i) {
    const bool ra = eval::ImageIsRight(split.images[i].labels, a.per_image[i]);
    const bool rb = eval::ImageIsRight(split.images[i].labels, b.per_image[i]);
    if (ra && !rb) a_only.push_back(i);
    if (rb && !ra) b_only.push_back(i);
  }
  // Everything rendered before anything is written.
  std::vector<eval::HtmlFigure> figures;
  std::vector<std::pair<std::string, std::string>> files;  // name, bytes
  Status st;
  auto add = [&](const std::string& file, const std::string& title, Result<std::string> png) {
    if (!st.IsOk()) return;
    if (!png.IsOk()) {
      st = png.GetStatus().WithContext(file);
      return;
    }
    figures.push_back({title, *png});
    files.emplace_back(file, std::move(png).Value());
  };
  add("PR_curve_compare.png", "Mean PR curve (IoU 0.5): A vs B",
      eval::RenderPrOverlay(a.result, b.result, Stem(models[0]), Stem(models[1])));
  add("confusion_matrix_A.png", "Confusion matrix A: " + models[0],
      eval::RenderConfusionMatrix(a.result.confusion, split.names, true));
  add("confusion_matrix_B.png", "Confusion matrix B: " + models[1],
      eval::RenderConfusionMatrix(b.result.confusion, split.names, true));
  nlohmann::json lists = nlohmann::json::object();
  for (const auto& [key, idx] :
       {std::pair{"a_right_b_wrong", &a_only}, std::pair{"b_right_a_wrong", &b_only}}) {
    nlohmann::json arr = nlohmann::json::array();
    for (size_t k = 0; k < idx->size(); ++k) {
      const size_t i = (*idx)[k];
      arr.push_back(split.images[i].path);
      if (k < kMaxDiffImages) {
        add(std::string(key) + "_" + std::to_string(k + 1) + ".png",
            std::string(key) + ": " + split.images[i].path + " (left A, right B)",
            RenderSideBySide(blobs, split, i, a, b));
      }
    }
    lists[key] = arr;
  }
  KESTREL_RETURN_IF_ERROR(st);
  const auto& rec = loaded.version.record;
  const nlohmann::json metrics = eval::CompareMetricsJson(a.result, b.result);
  out.report = {
      {"kind", "kestrel.compare"},
      {"format_version", 1},
      {"dataset", rec.dataset},
      {"version", "v" + std::to_string(rec.seq)},
      {"version_id", rec.version_id},
      {"split", split.split},
      {"images", split.images.size()},
      {"a", {{"model", models[0]}, {"info", a.extra}, {"metrics", eval::EvalResultToJson(a.result)}}},
      {"b", {{"model", models[1]}, {"info", b.extra}, {"metrics", eval::EvalResultToJson(b.result)}}},
      {"delta", metrics},
      {"right_rule",
       "every label matched one-to-one by a same-class prediction with IoU >= 0.5 and conf >= 0.25, "
       "and no prediction with conf >= 0.25 unmatched"},
      {"differing_images", lists}};
  out.title = "kestrel compare: A " + models[0] + " vs B " + models[1] + " on " + rec.dataset + "@v" +
              std::to_string(rec.seq) + " " + split.split;
  out.metrics_text = eval::CompareMetricsText(a.result, b.result);
  out.images = split.images.size();
  out.a_right_b_wrong = a_only.size();
  out.b_right_a_wrong = b_only.size();
  // The JSON report names its HTML page by content hash, so the stored JSON
  // blob leads to the stored HTML blob.
  const std::string html = eval::CompareHtml(out.title, metrics, figures);
  out.report["html_sha"] = Sha256Hex(html);
  const std::string report_text = DumpJson(out.report, 1);
  out.dir = eval::NextRunDir(env, o.project, o.name, "compare", o.exist_ok);
  {
    // Built beside the run folder, moved in when complete (compare.json last).
    KESTREL_ASSIGN_OR_RETURN(StagedDir staged, StagedDir::Create(env, out.dir));
    for (const auto& [name, bytes] : files) {
      KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(staged.Path(), name), bytes));
    }
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(staged.Path(), "compare.html"), html));
    KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(JoinPath(staged.Path(), "compare.json"), report_text));
    KESTREL_RETURN_IF_ERROR(staged.Commit({"compare.json"}));
  }
  // Into the artifact store, as val stores its result record.
  KESTREL_ASSIGN_OR_RETURN(out.html_sha, blobs.Put(html));
  KESTREL_ASSIGN_OR_RETURN(out.report_sha, blobs.Put(report_text));
  out.report_path = blobs.PathFor(out.report_sha);
  out.html_path = blobs.PathFor(out.html_sha);
  return out;
}

nlohmann::json CompareResultJson(const CompareResult& result) {
  return {{"ok", true},
          {"dir", result.dir},
          {"report_sha", result.report_sha},
          {"report_path", result.report_path},
          {"html_sha", result.html_sha},
          {"html_path", result.html_path},
          {"report", result.report}};
}

std::string CompareResultText(const CompareResult& result) {
  return result.title + " (" + std::to_string(result.images) + " images)\n" + result.metrics_text +
         "A right, B wrong: " + std::to_string(result.a_right_b_wrong) +
         " images; B right, A wrong: " + std::to_string(result.b_right_a_wrong) +
         " images\nresults saved to " + result.dir + "\ncompare report " + result.report_sha + " (" +
         result.report_path + ")\ncompare html " + result.html_sha + " (" + result.html_path + ")\n";
}

}  // namespace kestrel::app
