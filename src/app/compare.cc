// `kestrel compare` (compare.h): both models scored, the side-by-side images
// drawn (OpenCV only for the colour conversion of a decoded image).
#include "app/compare.h"

#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <utility>
#include <vector>

#include "app/backends.h"
#include "app/score_split.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/staged_dir.h"
#include "data/image.h"
#include "data/version_files.h"
#include "eval/compare_plots.h"
#include "eval/plots.h"

namespace kestrel::app {
namespace {

inline constexpr size_t kMaxDiffImages = 8;

// Image i of the split with A's detections (left) and B's (right), labels drawn.
Result<std::string> RenderSideBySide(store::ArtifactStore& blobs, const eval::EvalSplit& split, size_t i,
                                     const ScoredSplit& a, const ScoredSplit& b) {
  const eval::SplitImage& im = split.images[i];
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, data::ReadImageBytes(im.path, im.image_sha, im.file,
                                                                   split.version, blobs, Env::Default()));
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
    KESTREL_ASSIGN_OR_RETURN(ScoredSplit s, ScoreModelOnSplit(blobs, m, split, mo, LoadDetector));
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
      {"right_rule", eval::kRightRule},
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
