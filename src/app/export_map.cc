// The mAP check of an export: LibTorch and the ONNX file (in OpenCV DNN and
// in ONNX Runtime), each loaded by the program's backends (LoadDetector of
// app/backends.h) and scored on the same split exactly as `kestrel val
// model=` scores (score_split.h), with the same shapes and NMS.
#include "app/export_map.h"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <utility>

#include "app/backends.h"
#include "app/score_split.h"

namespace kestrel::app {
namespace {

ModelRunOptions RunOptions(const MapCheckRequest& r, const char* runtime) {
  ModelRunOptions o{r.imgsz, r.batch, r.conf, r.iou, r.max_det};
  o.rect = r.rect;
  o.runtime = runtime;
  return o;
}

// mAP50 / mAP50-95 of one runtime on the split, loaded through `load` and
// scored as `val model=` scores (score_split.h), and its wall time per
// image (decode, letterbox and NMS included, the load not).
Status Score(const DetectorLoader& load, const std::string& file, const char* runtime,
             store::ArtifactStore& blobs, const eval::EvalSplit& split, const MapCheckRequest& req,
             MapRuntime* out) {
  const ModelRunOptions opts = RunOptions(req, runtime);
  KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<Detector> detector,
                           load(file, ModelRunInference(opts), DetectorPlacement{opts.device, opts.runtime}));
  if (const std::string name = detector->RuntimeName(); !name.empty()) out->runtime = name;
  const auto t0 = std::chrono::steady_clock::now();
  KESTREL_ASSIGN_OR_RETURN(ScoredSplit scored, ScoreLoadedModelOnSplit(*detector, blobs, file, split, opts));
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out->map50 = scored.result.map50;
  out->map50_95 = scored.result.map5095;
  out->ms_per_image = split.images.empty() ? 0 : ms / static_cast<double>(split.images.size());
  out->scored = true;
  return {};
}

std::string Fixed(double v, int digits = 4) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << v;
  return s.str();
}
std::string Signed(double v) { return (v >= 0 ? "+" : "") + Fixed(v, 6); }

}  // namespace

Result<MapCheck> RunExportMapCheck(store::ArtifactStore& blobs, const LoadedSplit& loaded,
                                   const std::string& onnx_path, const std::string& weights,
                                   const MapCheckRequest& request) {
  const eval::EvalSplit& split = loaded.split;
  const auto& rec = loaded.version.record;
  MapCheck check;
  check.ran = true;
  check.data = rec.dataset + "@" + rec.version_id;
  check.dataset = rec.dataset + "@v" + std::to_string(rec.seq);
  check.version_id = rec.version_id;
  check.split = split.split;
  check.images = static_cast<int>(split.images.size());
  check.imgsz = request.imgsz;
  check.batch = request.batch;
  check.rect = request.rect;
  check.conf = request.conf;
  check.iou = request.iou;
  check.tolerance = request.tolerance;
  check.report_only = request.report_only;

  // The reference: the LibTorch model as `kestrel val` runs it.
  check.libtorch.runtime = "libtorch";
  KESTREL_RETURN_IF_ERROR(
      Score(LoadDetector, weights, "opencv", blobs, split, request, &check.libtorch).WithContext("LibTorch"));
  check.libtorch.ran = check.libtorch.passed = true;  // scored by Score

  const char* runtimes[kMapRuntimes] = {"opencv", "onnxruntime"};
  const char* names[kMapRuntimes] = {"opencv-dnn", "onnxruntime"};
  bool any_ran = false;
  std::string failures;
  for (int k = 0; k < kMapRuntimes; ++k) {
    MapRuntime rt;
    rt.runtime = names[k];
    if (!request.skip[k].empty()) {
      rt.error = request.skip[k];
      check.runtimes.push_back(std::move(rt));
      continue;
    }
    rt.ran = true;
    any_ran = true;
    const Status scored = Score(LoadDetector, onnx_path, runtimes[k], blobs, split, request, &rt);
    if (!scored.IsOk()) {
      rt.error = scored.ToString();
    } else {
      rt.diff_map50 = rt.map50 - check.libtorch.map50;
      rt.diff_map50_95 = rt.map50_95 - check.libtorch.map50_95;
      const bool within =
          std::fabs(rt.diff_map50) <= request.tolerance && std::fabs(rt.diff_map50_95) <= request.tolerance;
      rt.passed = within || request.report_only;
      if (!within && !request.report_only) {
        rt.error = rt.runtime + " mAP50 " + Fixed(rt.map50, 6) + ", mAP50-95 " + Fixed(rt.map50_95, 6) +
                   " vs LibTorch " + Fixed(check.libtorch.map50, 6) + ", " +
                   Fixed(check.libtorch.map50_95, 6) + " (|diff| " + Fixed(std::fabs(rt.diff_map50), 6) +
                   ", " + Fixed(std::fabs(rt.diff_map50_95), 6) + "; tolerance " +
                   Fixed(request.tolerance, 6) + ")";
      }
    }
    if (!rt.passed) failures += (failures.empty() ? "" : "; ") + rt.error;
    check.runtimes.push_back(std::move(rt));
  }
  check.passed = any_ran && failures.empty();
  if (!any_ran) check.error = "mAP check: no ONNX runtime ran";
  if (!failures.empty()) check.error = "mAP check on " + check.dataset + " " + check.split + ": " + failures;
  return check;
}

nlohmann::json MapCheckJson(const MapCheck& c) {
  if (!c.ran) return {{"ran", false}, {"error", c.error}};
  nlohmann::json runtimes = nlohmann::json::array();
  for (const MapRuntime& r : c.runtimes) {
    nlohmann::json j = {{"runtime", r.runtime}, {"ran", r.ran}, {"passed", r.passed}};
    if (r.scored) {
      j["map50"] = r.map50;
      j["map50_95"] = r.map50_95;
      j["diff_map50"] = r.diff_map50;
      j["diff_map50_95"] = r.diff_map50_95;
      j["ms_per_image"] = r.ms_per_image;
    }
    if (!r.passed) j["error"] = r.error;
    runtimes.push_back(std::move(j));
  }
  nlohmann::json j = {{"ran", true},
                      {"data", c.data},
                      {"dataset", c.dataset},
                      {"version_id", c.version_id},
                      {"split", c.split},
                      {"images", c.images},
                      {"imgsz", c.imgsz},
                      {"batch", c.batch},
                      {"rect", c.rect},
                      {"conf", c.conf},
                      {"iou", c.iou},
                      {"tolerance", c.tolerance},
                      {"report_only", c.report_only},
                      {"passed", c.passed},
                      {"libtorch",
                       {{"runtime", c.libtorch.runtime},
                        {"map50", c.libtorch.map50},
                        {"map50_95", c.libtorch.map50_95},
                        {"ms_per_image", c.libtorch.ms_per_image}}},
                      {"runtimes", runtimes}};
  if (!c.passed) j["error"] = c.error;
  return j;
}

std::string MapCheckText(const MapCheck& c) {
  if (!c.ran) return c.error.empty() ? "" : "  " + c.error + "\n";
  std::ostringstream s;
  s << "mAP on " << c.dataset << " " << c.split << " (" << c.images << " images, imgsz " << c.imgsz
    << (c.rect ? " rect" : "") << "): LibTorch mAP50 " << Fixed(c.libtorch.map50) << ", mAP50-95 "
    << Fixed(c.libtorch.map50_95) << "; "
    << (c.report_only ? "drop reported, not held (INT8)" : "tolerance " + Fixed(c.tolerance, 3) + " on each")
    << ":\n";
  for (const MapRuntime& r : c.runtimes) {
    s << "  " << r.runtime << ": ";
    if (!r.ran) {
      s << "mAP not computed: " << r.error << "\n";
      continue;
    }
    if (!r.scored) {
      s << "FAILED: " << r.error << "\n";
      continue;
    }
    s << "mAP50 " << Fixed(r.map50) << " (" << Signed(r.diff_map50) << "), mAP50-95 " << Fixed(r.map50_95)
      << " (" << Signed(r.diff_map50_95) << ")" << (r.passed ? "" : " FAILED") << "\n";
  }
  return s.str();
}

}  // namespace kestrel::app
