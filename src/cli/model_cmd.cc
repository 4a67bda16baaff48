// `val model=` (RunModelOnSplit), `kestrel predict` and `kestrel compare`: the
// commands that run a model through model::Predictor. Built only with LibTorch; this file
// includes no torch header. `predict` is app::Predict (app_run/predict.h).
#include <algorithm>
#include <cstdio>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "app_run/predict.h"
#include "cli/eval_model.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/staged_dir.h"
#include "data/image.h"
#include "eval/compare_plots.h"
#include "eval/plots.h"
#include "model/predictor.h"
#include "train/train_config.h"

namespace kestrel::cli {
namespace {

app::PredictSpeed Speed(const model::StageTimes& t, int imgsz) {
  return {t.preprocess_ms, t.inference_ms, t.postprocess_ms, t.images, t.Fps(), imgsz};
}

// Decodes through the single decode entry point; `origin` names errors.
Result<cv::Mat> DecodeBytes(const std::string& bytes, const std::string& origin) {
  return data::DecodeImage(bytes, origin);
}

struct PredictOptions {
  app::PredictRequest r;
  void Bind(OptionSet& s) {
    s.String("model", &r.model, "weights file (.safetensors)");
    s.String("source", &r.source, "an image file or a folder of images");
    train::BindInferenceKeys(s, &r.conf, &r.iou, &r.imgsz, &r.max_det, &r.batch);
    s.Bool("save", &r.save, "write annotated images");
    s.Bool("save_txt", &r.save_txt, "write YOLO txt (class cx cy w h conf, normalized) per image");
    s.Bool("save_json", &r.save_json, "write a JSON file per image");
    train::BindRunFolderKeys(s, &r.project, &r.name, &r.exist_ok);  // name "" = predict, predict2, ...
  }
};

// The use case is app::Predict (app_run/predict.h); --json prints its one
// JSON view unchanged.
void RunPredict(Context& ctx, int* exit_code, const PredictOptions& o) {
  if (o.r.model.empty() || o.r.source.empty()) {
    *exit_code =
        Fail(ctx, Status::InvalidArgument("model=WEIGHTS and source=IMAGE|DIR are required",
                                          {"command line", 0, o.r.model.empty() ? "model" : "source"}));
    return;
  }
  // model= may name a registered model (NAME@vN, NAME@TAG, id prefix).
  auto r = app::Predict(Env::Default(), o.r,
                        [&ctx](std::string* weights) { return ResolveWeightsOption(ctx, weights); });
  if (!r.IsOk()) {
    *exit_code = Fail(ctx, r.GetStatus());
    return;
  }
  *exit_code = Emit(ctx, app::PredictResultText(*r), app::PredictResultJson(*r));
}

struct CompareOptions {
  std::string data, split = "val";
  double conf = 0.001, iou = 0.7;
  int imgsz = 640, batch = 16, max_det = 300;
  std::string project = "runs/compare", name;
  bool exist_ok = false;
  void Bind(OptionSet& s) {
    s.String("data", &data, "dataset NAME or NAME@VERSION");
    s.Choice("split", &split, {"train", "val", "test"}, "split to evaluate");
    train::BindInferenceKeys(s, &conf, &iou, &imgsz, &max_det, &batch);
    train::BindRunFolderKeys(s, &project, &name, &exist_ok);  // name "" = compare, compare2, ...
  }
};

inline constexpr size_t kMaxDiffImages = 8;

// Image i of the split with A's detections (left) and B's (right), labels drawn.
Result<std::string> RenderSideBySide(store::ArtifactStore& blobs, const eval::EvalSplit& split, size_t i,
                                     const ScoredModel& a, const ScoredModel& b) {
  const eval::SplitImage& im = split.images[i];
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, blobs.Get(im.image_sha));
  KESTREL_ASSIGN_OR_RETURN(cv::Mat rgb, DecodeBytes(bytes, im.path));
  cv::Mat bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  const eval::ImageView view{bgr.data, bgr.cols, bgr.rows, 3, bgr.step};
  std::vector<eval::GridTile> tiles = {{view, a.run.per_image[i], im.labels, "A: " + im.path},
                                       {view, b.run.per_image[i], im.labels, "B: " + im.path}};
  eval::GridOptions go;
  go.columns = 2;
  go.tile_size = 480;
  return eval::RenderDetectionGrid(tiles, split.names, go);
}

void RunCompare(Context& ctx, int* exit_code, const CompareOptions& o,
                const std::vector<std::string>& models) {
  if (models.size() != 2 || o.data.empty()) {
    *exit_code =
        Fail(ctx, Status::InvalidArgument("usage: compare A.safetensors B.safetensors data=NAME[@VERSION]",
                                          {"command line", 0, models.size() != 2 ? "model" : "data"}));
    return;
  }
  auto stores = OpenStores(ctx);
  if (!stores.IsOk()) {
    *exit_code = Fail(ctx, stores.GetStatus());
    return;
  }
  // data= may be a dataset path: imported (or its version reused) first.
  std::string data = o.data;
  if (!ResolveDataOption(ctx, *stores, &data, nullptr, exit_code)) return;
  auto loaded = LoadSplit(*stores, data, o.split);
  if (!loaded.IsOk()) {
    *exit_code = Fail(ctx, loaded.GetStatus());
    return;
  }
  const eval::EvalSplit& split = loaded->split;
  const ModelRunOptions mo{o.imgsz, o.batch, o.conf, o.iou, o.max_det};
  std::vector<ScoredModel> scored;
  for (std::string m : models) {
    if (Status w = ResolveWeightsOption(ctx, &m); !w.IsOk()) {  // a registered model's reference
      *exit_code = Fail(ctx, w);
      return;
    }
    auto s = ScoreModelOnSplit(*stores->blobs, m, split, mo);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s.GetStatus());
      return;
    }
    scored.push_back(std::move(s).Value());
  }
  const ScoredModel& a = scored[0];
  const ScoredModel& b = scored[1];
  // Per-image "right" (docs/evaluation.md): A right & B wrong, and vice versa.
  std::vector<size_t> a_only, b_only;
  for (size_t i = 0; i < split.images.size(); ++i) {
    const bool ra = eval::ImageIsRight(split.images[i].labels, a.run.per_image[i]);
    const bool rb = eval::ImageIsRight(split.images[i].labels, b.run.per_image[i]);
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
            RenderSideBySide(*stores->blobs, split, i, a, b));
      }
    }
    lists[key] = arr;
  }
  if (!st.IsOk()) {
    *exit_code = Fail(ctx, st);
    return;
  }
  const auto& rec = loaded->version.record;
  const nlohmann::json metrics = eval::CompareMetricsJson(a.result, b.result);
  nlohmann::json report = {
      {"kind", "kestrel.compare"},
      {"format_version", 1},
      {"dataset", rec.dataset},
      {"version", "v" + std::to_string(rec.seq)},
      {"version_id", rec.version_id},
      {"split", split.split},
      {"images", split.images.size()},
      {"a", {{"model", models[0]}, {"info", a.run.info}, {"metrics", eval::EvalResultToJson(a.result)}}},
      {"b", {{"model", models[1]}, {"info", b.run.info}, {"metrics", eval::EvalResultToJson(b.result)}}},
      {"delta", metrics},
      {"right_rule",
       "every label matched one-to-one by a same-class prediction with IoU >= 0.5 and conf >= 0.25, "
       "and no prediction with conf >= 0.25 unmatched"},
      {"differing_images", lists}};
  const std::string title = "kestrel compare: A " + models[0] + " vs B " + models[1] + " on " + rec.dataset +
                            "@v" + std::to_string(rec.seq) + " " + split.split;
  // The JSON report names its HTML page by content hash, so the stored JSON
  // blob leads to the stored HTML blob.
  std::string html = eval::CompareHtml(title, metrics, figures);
  report["html_sha"] = Sha256Hex(html);
  std::string report_text = DumpJson(report, 1);
  Env& env = Env::Default();
  const std::string dir = eval::NextRunDir(env, o.project, o.name, "compare", o.exist_ok);
  // Built beside the run folder, moved in when complete (compare.json last).
  auto staged = StagedDir::Create(env, dir);
  st = staged.GetStatus();
  for (size_t k = 0; k < files.size() && st.IsOk(); ++k) {
    st = env.WriteFileAtomic(JoinPath(staged->Path(), files[k].first), files[k].second);
  }
  if (st.IsOk()) st = env.WriteFileAtomic(JoinPath(staged->Path(), "compare.html"), html);
  if (st.IsOk()) st = env.WriteFileAtomic(JoinPath(staged->Path(), "compare.json"), report_text);
  if (st.IsOk()) st = staged->Commit({"compare.json"});
  // Into the artifact store, as val stores its result record.
  Result<std::string> html_sha = st.IsOk() ? stores->blobs->Put(html) : Result<std::string>(st);
  Result<std::string> report_sha = html_sha.IsOk() ? stores->blobs->Put(report_text) : html_sha;
  if (!report_sha.IsOk()) {
    *exit_code = Fail(ctx, report_sha.GetStatus());
    return;
  }
  const std::string report_path = stores->blobs->PathFor(*report_sha);
  const std::string html_path = stores->blobs->PathFor(*html_sha);
  const std::string text = title + " (" + std::to_string(split.images.size()) + " images)\n" +
                           eval::CompareMetricsText(a.result, b.result) +
                           "A right, B wrong: " + std::to_string(a_only.size()) +
                           " images; B right, A wrong: " + std::to_string(b_only.size()) +
                           " images\nresults saved to " + dir + "\ncompare report " + *report_sha + " (" +
                           report_path + ")\ncompare html " + *html_sha + " (" + html_path + ")\n";
  *exit_code = Emit(ctx, text,
                    {{"ok", true},
                     {"dir", dir},
                     {"report_sha", *report_sha},
                     {"report_path", report_path},
                     {"html_sha", *html_sha},
                     {"html_path", html_path},
                     {"report", report}});
}

}  // namespace

namespace {
eval::ValShapeOptions ValShapes(const ModelRunOptions& opts) {
  eval::ValShapeOptions s;
  s.imgsz = opts.imgsz;
  s.batch = opts.batch;
  s.rect = opts.rect;
  s.pad = opts.pad;
  return s;
}
}  // namespace

Result<ScoredModel> ScoreModelOnSplit(store::ArtifactStore& blobs, const std::string& weights,
                                      const eval::EvalSplit& split, const ModelRunOptions& opts) {
  ScoredModel out;
  KESTREL_ASSIGN_OR_RETURN(out.run, RunModelOnSplit(blobs, weights, split, opts));
  eval::EvalOptions eo;
  eo.conf = opts.conf;
  eo.iou = opts.iou;
  eo.max_det = opts.max_det;
  // Labels as the reference validator scores them after its letterbox.
  const eval::EvalSplit scored = eval::ValScoredSplit(split, ValShapes(opts));
  KESTREL_ASSIGN_OR_RETURN(out.result, eval::EvaluateSplit(scored, out.run.per_image, eo));
  return out;
}

Result<ModelRun> RunModelOnSplit(store::ArtifactStore& blobs, const std::string& weights,
                                 const eval::EvalSplit& split, const ModelRunOptions& opts) {
  model::PredictorOptions po;
  po.imgsz = opts.imgsz;
  po.batch = opts.batch;
  po.nms.conf = static_cast<float>(opts.conf);
  po.nms.iou = static_cast<float>(opts.iou);
  po.nms.max_det = opts.max_det;
  po.nms.multi_label = true;  // the validator's setting for mAP
  KESTREL_ASSIGN_OR_RETURN(auto pred, model::Predictor::Load(weights, po));
  if (pred->NumClasses() != static_cast<int>(split.names.size())) {
    return Status::InvalidArgument("class count mismatch: the model has " +
                                       std::to_string(pred->NumClasses()) + " classes, the dataset has " +
                                       std::to_string(split.names.size()),
                                   {weights, 0, "nc"});
  }
  std::vector<eval::ImageSize> sizes;
  for (const auto& im : split.images) sizes.push_back({im.width, im.height});
  KESTREL_ASSIGN_OR_RETURN(
      auto preds, pred->PredictVal(sizes, ValShapes(opts), [&](size_t i) -> Result<cv::Mat> {
        KESTREL_ASSIGN_OR_RETURN(std::string bytes, blobs.Get(split.images[i].image_sha));
        return DecodeBytes(bytes, split.images[i].path);
      }));
  ModelRun run;
  for (auto& p : preds) run.per_image.push_back(std::move(p.detections));
  run.info = {{"model", pred->Spec().Name()}, {"nc", pred->NumClasses()}, {"imgsz", opts.imgsz},
              {"batch", opts.batch},          {"nms_conf", opts.conf},    {"nms_iou", opts.iou},
              {"multi_label", true},          {"rect", opts.rect},        {"pad", opts.pad}};
  run.speed = app::PredictSpeedJson(Speed(pred->Timing(), opts.imgsz));
  run.speed_text = app::PredictSpeedText(Speed(pred->Timing(), opts.imgsz));
  return run;
}

void AddModelCommands(CLI::App& app, Context& ctx, int* exit_code) {
  struct PredictState {
    PredictOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto st = std::make_shared<PredictState>();
  st->opts.Bind(st->set);
  CLI::App* cmd =
      app.add_subcommand("predict", "Run a model on images: annotated images, YOLO txt, JSON, speed");
  cmd->add_option("key=value", st->extras, "e.g. model=best.safetensors source=images/ conf=0.25");
  AddOptionFlags(cmd, st->set, &st->flags);
  cmd->callback([&ctx, exit_code, st] {
    Status s = ApplyOptions(st->set, st->flags, st->extras);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    RunPredict(ctx, exit_code, st->opts);
  });

  struct CompareState {
    CompareOptions opts;
    OptionSet set;
    FlagValues flags;
    std::vector<std::string> extras;
  };
  auto cs = std::make_shared<CompareState>();
  cs->opts.Bind(cs->set);
  CLI::App* cmp = app.add_subcommand(
      "compare",
      "Two models on one dataset split: metric deltas, PR curves, confusion matrices, HTML report");
  cmp->add_option("args", cs->extras, "A.safetensors B.safetensors data=NAME[@VERSION] key=value...");
  AddOptionFlags(cmp, cs->set, &cs->flags);
  cmp->callback([&ctx, exit_code, cs] {
    std::vector<std::string> models, kv;
    for (const auto& e : cs->extras) (e.find('=') == std::string::npos ? models : kv).push_back(e);
    Status s = ApplyOptions(cs->set, cs->flags, kv);
    if (!s.IsOk()) {
      *exit_code = Fail(ctx, s);
      return;
    }
    RunCompare(ctx, exit_code, cs->opts, models);
  });
}

}  // namespace kestrel::cli
