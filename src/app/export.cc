#include "app/export.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <sstream>

#include "app/export_pt.h"
#include "app/imgsz.h"
#include "app/onnx_runtime.h"
#include "export/onnx_export.h"
#include "export/onnx_quantize.h"
#include "model/pt_checkpoint.h"
#include "model/spec.h"

namespace kestrel::app {

namespace {

static_assert(kExportMinOpset == exporter::kMinOpset && kExportMaxOpset == exporter::kMaxOpset,
              "app/export_keys.h's opset range is the exporter's");
static_assert(kExportMaxDet == exporter::kMaxNmsDetections,
              "app/export_keys.h's max_det bound is the exporter's");

// Where the file goes when output= is empty (ExportRequest::output).
std::string DefaultOutput(Env& env, const std::string& model_arg) {
  namespace fs = std::filesystem;
  if (env.Stat(model_arg).exists) return fs::path(model_arg).replace_extension(".onnx").string();
  std::string stem = model_arg;
  std::replace(stem.begin(), stem.end(), '@', '_');
  std::replace(stem.begin(), stem.end(), '/', '_');
  return stem + ".onnx";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

// int8=true, step 1: the activation ranges of the FP32 graph `fp32_bytes`
// (exporter::CalibrationTensors exposed as outputs, written to `scratch`,
// removed after) in ONNX Runtime over request.data's calibration images;
// `rec` gets where they came from.
Result<std::map<std::string, exporter::TensorRange>> CalibrateInt8(Env& env, const ExportRequest& r,
                                                                   const std::string& fp32_bytes,
                                                                   const std::string& scratch,
                                                                   const ExportCalibrationLoader& calibrate,
                                                                   ExportResult::Int8Calibration* rec) {
  KESTREL_RETURN_IF_ERROR(CheckExportCalibrationData(r));
  // data=, or by default the registered model's own dataset version.
  const std::string& data = r.data.empty() ? r.model_data : r.data;
  if (!calibrate) {
    return Status::InvalidArgument(
        "int8=true needs the dataset registry to read calibration images of " + data,
        {"command line", 0, "data"});
  }
  const OnnxRuntimeLocation ort = LocateOnnxRuntime();
  if (!ort.unavailable.empty()) {
    return Status::FailedPrecondition(
        "int8=true needs ONNX Runtime to calibrate and verify: " + ort.unavailable,
        {"command line", 0, "int8"});
  }
  KESTREL_ASSIGN_OR_RETURN(exporter::CalibMethod method, exporter::ParseCalibMethod(r.calib_method));
  KESTREL_ASSIGN_OR_RETURN(CalibrationSet set, calibrate(data, r.calib, r.fraction, r.imgsz_h, r.imgsz_w));
  if (set.images.empty()) return Status::InvalidArgument("no calibration images", {data, 0, "data"});
  // Fixed batch B: B images per run (the last run filled up from the first
  // images); a dynamic graph runs them one at a time.
  const int b = r.dynamic ? 1 : r.batch;
  const size_t per = static_cast<size_t>(3) * r.imgsz_h * r.imgsz_w;
  std::vector<FloatTensor> inputs;
  for (size_t start = 0; start < set.images.size(); start += static_cast<size_t>(b)) {
    FloatTensor t{{b, 3, r.imgsz_h, r.imgsz_w}, {}};
    t.data.reserve(per * static_cast<size_t>(b));
    for (int k = 0; k < b; ++k) {
      const std::vector<float>& im = set.images[(start + static_cast<size_t>(k)) % set.images.size()];
      t.data.insert(t.data.end(), im.begin(), im.end());
    }
    inputs.push_back(std::move(t));
  }
  KESTREL_ASSIGN_OR_RETURN(std::vector<std::string> tensors, exporter::CalibrationTensors(fp32_bytes));
  KESTREL_ASSIGN_OR_RETURN(std::string calib_bytes, exporter::WithTensorOutputs(fp32_bytes, tensors));
  KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(scratch, calib_bytes));
  auto stats = OnnxRuntimeOutputStats(ort, scratch, inputs, exporter::kCalibHistogramBins, {});
  if (stats.IsOk() && method == exporter::CalibMethod::kPercentile) {
    // A second pass with each tensor's [min, max] known: its histogram.
    std::map<std::string, std::pair<double, double>> spans;
    for (const std::string& t : tensors) {
      auto it = stats->find(t);
      if (it != stats->end()) spans[t] = {it->second.min, it->second.max};
    }
    stats = OnnxRuntimeOutputStats(ort, scratch, inputs, exporter::kCalibHistogramBins, spans);
  }
  (void)env.RemoveFile(scratch);
  if (!stats.IsOk()) return stats.GetStatus();
  std::map<std::string, exporter::TensorRange> ranges;
  for (const std::string& t : tensors) {
    auto it = stats->find(t);
    if (it == stats->end()) return Status::Internal("ONNX Runtime returned no statistics", {scratch, 0, t});
    KESTREL_ASSIGN_OR_RETURN(
        ranges[t], exporter::RangeFromStats(it->second, method, exporter::kDefaultCalibPercentile, t));
  }
  rec->dataset = set.dataset;
  rec->version_id = set.version_id;
  rec->split = set.split;
  rec->split_images = set.split_images;
  rec->candidates = set.candidates;
  rec->images = static_cast<int>(set.images.size());
  rec->method = exporter::CalibMethodName(method);
  rec->percentile = method == exporter::CalibMethod::kPercentile ? exporter::kDefaultCalibPercentile : 0;
  rec->tensors = static_cast<int64_t>(ranges.size());
  return ranges;
}

// int8=true, step 2: `fp32` as the QDQ graph of exporter::QuantizeOnnxModel.
Result<exporter::OnnxModel> ToInt8(exporter::OnnxModel fp32,
                                   const std::map<std::string, exporter::TensorRange>& ranges,
                                   ExportResult::Int8Calibration* rec) {
  exporter::QuantizeOptions q;
  q.method = rec->method == "minmax" ? exporter::CalibMethod::kMinMax : exporter::CalibMethod::kPercentile;
  q.percentile = exporter::kDefaultCalibPercentile;
  q.calib_images = rec->images;
  KESTREL_ASSIGN_OR_RETURN(exporter::QuantizedModel qm, exporter::QuantizeOnnxModel(fp32.bytes, ranges, q));
  rec->quantized_convs = qm.quantized_convs;
  rec->float_convs = qm.float_convs;
  fp32.bytes = std::move(qm.bytes);
  fp32.nodes = qm.nodes;
  fp32.metadata = std::move(qm.metadata);
  return fp32;
}

// simplify=true: exporter::SimplifyOnnxModel over the graph as built (and
// quantized), its counts into *rec; false: the graph as built, counted.
Result<exporter::OnnxModel> Simplify(exporter::OnnxModel m, bool simplify, exporter::SimplifyReport* rec) {
  if (!simplify) {
    KESTREL_ASSIGN_OR_RETURN(*rec, exporter::CountOnnxModel(m.bytes));
    return m;
  }
  KESTREL_ASSIGN_OR_RETURN(exporter::SimplifiedModel sm, exporter::SimplifyOnnxModel(m.bytes));
  *rec = sm.report;
  m.bytes = std::move(sm.bytes);
  m.nodes = sm.report.nodes_after;
  return m;
}

}  // namespace

namespace {

// data='s validation split for the mAP check, refused early when the check
// cannot run on it: no stores, another class count, a non-square fixed input.
Result<LoadedSplit> LoadMapSplit(const ExportRequest& r, int nc, const ExportMapSource& source) {
  if (!source.load || source.blobs == nullptr) {
    return Status::InvalidArgument(
        "data= needs the dataset registry (the mAP check reads its validation split)",
        {"command line", 0, "data"});
  }
  if (!r.dynamic && r.imgsz_h != r.imgsz_w) {
    return Status::InvalidArgument(
        "the mAP check (data=) letterboxes into a square: give a square imgsz or "
        "dynamic=true (imgsz " +
            std::to_string(r.imgsz_h) + "," + std::to_string(r.imgsz_w) + ")",
        {"command line", 0, "imgsz"});
  }
  KESTREL_ASSIGN_OR_RETURN(LoadedSplit loaded, source.load(r.data));
  if (static_cast<int>(loaded.split.names.size()) != nc) {
    return Status::InvalidArgument("class count mismatch: the model has " + std::to_string(nc) +
                                       " classes, " + r.data + " has " +
                                       std::to_string(loaded.split.names.size()),
                                   {"command line", 0, "data"});
  }
  if (loaded.split.images.empty()) {
    return Status::InvalidArgument(r.data + " has no " + loaded.split.split + " images for the mAP check",
                                   {"command line", 0, "data"});
  }
  return loaded;
}

// The file's class names into res->names / names_source / names_dataset
// (ExportModel's comment has the order): nc of them, always.
Status ChooseClassNames(const model::WeightsInfo& info, const ExportRequest& r,
                        const std::optional<LoadedSplit>& data_split, const ExportMapSource& source,
                        ExportResult* res) {
  const int nc = info.spec.nc;
  const auto label = [](const LoadedSplit& s) {
    return s.version.record.dataset + "@v" + std::to_string(s.version.record.seq);
  };
  if (static_cast<int>(info.names.size()) == nc) {
    res->names = info.names;
    res->names_source = "weights";
    return {};
  }
  if (!r.model_data.empty()) {
    DatasetClassNames d;
    if (data_split && r.data == r.model_data) {
      d = {label(*data_split), data_split->split.names};
    } else if (!source.names) {
      return Status::InvalidArgument("the class names of the registered model's dataset version " +
                                         r.model_data + " need the dataset registry",
                                     {"command line", 0, "model"});
    } else {
      KESTREL_ASSIGN_OR_RETURN(d, source.names(r.model_data));
    }
    if (static_cast<int>(d.names.size()) != nc) {
      const std::string msg = "class count mismatch: the weights of " + r.model + " have " +
                              std::to_string(nc) + " classes, the dataset version it is registered with (" +
                              d.dataset + ") has " + std::to_string(d.names.size());
      return Status::InvalidArgument(msg, {"command line", 0, "model"});
    }
    res->names = std::move(d.names);
    res->names_source = "model_dataset";
    res->names_dataset = d.dataset;
    return {};
  }
  if (data_split) {  // its class count was checked with the split (LoadMapSplit)
    res->names = data_split->split.names;
    res->names_source = "data";
    res->names_dataset = label(*data_split);
    return {};
  }
  res->names.clear();
  for (int c = 0; c < nc; ++c) res->names.push_back("class" + std::to_string(c));
  res->names_source = "default";
  return {};
}

}  // namespace

Result<ExportResult> ExportModel(Env& env, const ExportRequest& given, const ExportWeightsResolver& resolve,
                                 const ExportCalibrationLoader& calibrate,
                                 const ExportMapSource& map_source) {
  KESTREL_RETURN_IF_ERROR(ValidateExportRequest(given));
  if (given.format == "pt") return ExportPtModel(env, given, resolve);  // the reference's checkpoint
  KESTREL_RETURN_IF_ERROR(CheckExportCalibrationData(given));
  ExportResult res;
  res.weights = given.model;
  if (resolve) KESTREL_RETURN_IF_ERROR(resolve(&res.weights));
  KESTREL_ASSIGN_OR_RETURN(model::WeightsInfo info, model::ReadWeightsInfo(res.weights));
  // imgsz not given (0): the size the weights were trained at (app/imgsz.h).
  ExportRequest request = given;
  KESTREL_ASSIGN_OR_RETURN(ImgszChoice imgsz, ChooseImgsz(res.weights, request.imgsz_h));
  if (request.imgsz_h == 0) request.imgsz_h = request.imgsz_w = imgsz.imgsz;
  res.imgsz_why = imgsz.why;  // ExportResultText prints it
  exporter::OnnxExportOptions opts;
  opts.imgsz_h = request.imgsz_h;
  opts.imgsz_w = request.imgsz_w;
  opts.batch = request.batch;
  opts.opset = request.opset;
  opts.dynamic = request.dynamic;
  opts.half = request.half;
  opts.nms = request.nms;
  opts.conf = request.conf;
  opts.iou = request.iou;
  opts.max_det = request.max_det;
  KESTREL_RETURN_IF_ERROR(exporter::ValidateOnnxOptions(info.spec, opts));
  // The same tensors, torch-free (a .pt's floats widened to F32).
  KESTREL_ASSIGN_OR_RETURN(SafeTensorFile state, model::ReadWeightsFile(res.weights));
  // data=: the mAP check's split, loaded and checked before anything is written.
  std::optional<LoadedSplit> map_split;
  if (!request.data.empty()) {
    KESTREL_ASSIGN_OR_RETURN(map_split, LoadMapSplit(request, info.spec.nc, map_source));
  }
  // The file's names: the weights', the registered dataset version's, data='s or class<i>.
  KESTREL_RETURN_IF_ERROR(ChooseClassNames(info, request, map_split, map_source, &res));
  opts.names = res.names;
  for (const auto& [key, value] : request.provenance) opts.extra_metadata[key] = value;
  KESTREL_ASSIGN_OR_RETURN(exporter::OnnxModel onnx, exporter::BuildOnnxModel(info.spec, state, opts));

  res.path = request.output.empty() ? DefaultOutput(env, request.model) : request.output;
  std::map<std::string, exporter::TensorRange> int8_ranges;
  if (request.int8) {
    KESTREL_ASSIGN_OR_RETURN(
        int8_ranges,
        CalibrateInt8(env, request, onnx.bytes, res.path + ".calibrating.onnx", calibrate, &res.calibration));
    KESTREL_ASSIGN_OR_RETURN(onnx, ToInt8(std::move(onnx), int8_ranges, &res.calibration));
  }
  KESTREL_ASSIGN_OR_RETURN(onnx, Simplify(std::move(onnx), request.simplify, &res.simplified));
  // The runtime an FP16 or INT8 file, or one OpenCV DNN cannot import, is verified in: ONNX Runtime.
  const size_t required_runtime =
      request.half || request.int8 || !onnx.opencv_dnn_unsupported.empty() ? 1 : 0;
  const std::string tmp = res.path + ".verifying.onnx";
  KESTREL_RETURN_IF_ERROR(exporter::WriteOnnxFile(env, onnx, tmp));
  // nms=true: OpenCV DNN 4.6 cannot import NonMaxSuppression, so the raw
  // checks (and data='s mAP) run the same graph without the NMS tail, and
  // VerifyOnnxNms checks the file's detections in ONNX Runtime.
  std::string raw_path = tmp;
  if (request.nms) {
    exporter::OnnxExportOptions raw_opts = opts;
    raw_opts.nms = false;
    KESTREL_ASSIGN_OR_RETURN(exporter::OnnxModel raw, exporter::BuildOnnxModel(info.spec, state, raw_opts));
    exporter::SimplifyReport raw_simplified;  // the raw graph is simplified as the file is
    KESTREL_ASSIGN_OR_RETURN(raw, Simplify(std::move(raw), request.simplify, &raw_simplified));
    raw_path = res.path + ".verifying.raw.onnx";
    if (Status s = exporter::WriteOnnxFile(env, raw, raw_path); !s.IsOk()) {
      (void)env.RemoveFile(tmp);
      (void)env.RemoveFile(raw_path);
      return s;
    }
  }
  // Removes the raw graph on every way out below.
  struct RemoveRaw {
    Env& env;
    std::string path;
    ~RemoveRaw() {
      if (!path.empty()) (void)env.RemoveFile(path);
    }
  } remove_raw{env, request.nms ? raw_path : std::string()};
  res.verify_shapes = VerifyShapes(request);
  const double tolerance = request.half   ? std::max(request.tolerance, kExportHalfTolerance)
                           : request.int8 ? std::max(request.tolerance, kExportInt8Tolerance)
                                          : request.tolerance;
  Result<std::vector<RuntimeCheck>> checks =
      VerifyOnnxFile(raw_path, res.weights, res.verify_shapes, request.verify_images, tolerance, request.half,
                     request.int8, onnx.opencv_dnn_unsupported);
  if (!checks.IsOk()) {
    (void)env.RemoveFile(tmp);
    return checks.GetStatus();
  }
  res.checks = std::move(*checks);
  bool passed = true;
  std::string failures;
  for (const RuntimeCheck& c : res.checks) {
    if (c.ran && !c.passed) {
      passed = false;
      failures += (failures.empty() ? "" : "; ") + c.runtime + ": " + c.error;
    }
  }
  // The runtime that must have run: OpenCV DNN, or ONNX Runtime for FP16, INT8 and a graph OpenCV cannot
  // import.
  const RuntimeCheck& required = res.checks[required_runtime];
  passed = passed && required.ran;
  if (!required.ran) failures += (failures.empty() ? "" : "; ") + required.error;
  if (request.nms) {
    Result<NmsCheck> nc = VerifyOnnxNms(tmp, res.weights, raw_path, res.verify_shapes, request.verify_images,
                                        request.conf, request.iou, request.max_det, request.half);
    if (!nc.IsOk()) {
      (void)env.RemoveFile(tmp);
      return nc.GetStatus();
    }
    res.nms_check = std::move(*nc);
    if (!res.nms_check.passed) {
      passed = false;
      failures += (failures.empty() ? "" : "; ") +
                  (res.nms_check.ran ? res.nms_check.runtime + ": " + res.nms_check.error
                                     : "nms=true is verified in ONNX Runtime only (OpenCV DNN 4.6 cannot run "
                                       "NonMaxSuppression): " +
                                           res.nms_check.error);
    }
  }
  if (map_split) {
    // The mAP check in every runtime the raw check ran in.
    MapCheckRequest mreq;
    mreq.imgsz = request.imgsz_h;
    mreq.batch = request.batch;
    mreq.rect = request.dynamic;
    mreq.tolerance = map_source.tolerance >= 0 ? map_source.tolerance
                     : request.half            ? kExportHalfMapTolerance
                                               : kExportMapTolerance;
    mreq.report_only = request.int8;
    for (int k = 0; k < kMapRuntimes && k < static_cast<int>(res.checks.size()); ++k) {
      if (!res.checks[k].ran) mreq.skip[k] = res.checks[k].error;
    }
    Result<MapCheck> mc = RunExportMapCheck(*map_source.blobs, *map_split, raw_path, res.weights, mreq);
    if (!mc.IsOk()) {
      (void)env.RemoveFile(tmp);
      return mc.GetStatus();
    }
    res.map = std::move(*mc);
    if (!res.map.passed) {
      passed = false;
      failures += (failures.empty() ? "" : "; ") + res.map.error;
    }
  }
  if (!passed) {
    (void)env.RemoveFile(tmp);
    std::string msg = "export verification failed: " + failures;
    if (!request.force) {
      msg += "; nothing was written (--force keeps the file, marked unverified)";
      return Status::FailedPrecondition(msg, {res.path, 0, ""});
    }
    // --force: the same graph, marked in its metadata, written without the rename dance.
    res.verification_error = msg;
    opts.extra_metadata["kestrel_verification"] = "unverified: " + msg;
    KESTREL_ASSIGN_OR_RETURN(onnx, exporter::BuildOnnxModel(info.spec, state, opts));
    if (request.int8) {
      KESTREL_ASSIGN_OR_RETURN(onnx, ToInt8(std::move(onnx), int8_ranges, &res.calibration));
    }
    KESTREL_ASSIGN_OR_RETURN(onnx, Simplify(std::move(onnx), request.simplify, &res.simplified));
    KESTREL_RETURN_IF_ERROR(exporter::WriteOnnxFile(env, onnx, res.path));
  } else {
    KESTREL_RETURN_IF_ERROR(env.Rename(tmp, res.path));
    KESTREL_RETURN_IF_ERROR(env.SyncDir(std::filesystem::path(res.path).parent_path().empty()
                                            ? std::string(".")
                                            : std::filesystem::path(res.path).parent_path().string()));
  }

  res.format = request.format;
  res.arch = info.spec.Name();
  res.nc = info.spec.nc;
  res.imgsz_h = request.imgsz_h;
  res.imgsz_w = request.imgsz_w;
  res.batch = request.batch;
  res.dynamic = request.dynamic;
  res.half = request.half;
  res.int8 = request.int8;
  res.simplify = request.simplify;
  res.nms = request.nms;
  if (request.nms) {
    res.conf = request.conf;
    res.iou = request.iou;
    res.max_det = request.max_det;
  }
  res.opset = request.opset;
  const int64_t dyn = -1;
  res.input_shape = {request.dynamic ? dyn : request.batch, 3, request.dynamic ? dyn : request.imgsz_h,
                     request.dynamic ? dyn : request.imgsz_w};
  res.output_shape = {request.dynamic ? dyn : request.batch, onnx.output_channels,
                      request.dynamic ? dyn : onnx.anchors};
  if (request.nms) res.output_shape = {request.dynamic ? dyn : request.batch, request.max_det, 6};
  res.bytes = static_cast<int64_t>(onnx.bytes.size());
  res.nodes = onnx.nodes;
  res.parameters = onnx.parameters;
  res.verified = passed;
  for (const auto& shape : res.verify_shapes) {
    res.verify_images += static_cast<int>(((request.verify_images + shape[0] - 1) / shape[0]) * shape[0]);
  }
  res.tolerance = tolerance;
  const RuntimeCheck& reported = res.checks[required_runtime];
  res.max_abs_diff = reported.max_abs_diff;
  res.max_abs_diff_boxes = reported.max_abs_diff_boxes;
  res.max_abs_diff_scores = reported.max_abs_diff_scores;
  res.max_rel_diff_boxes = reported.max_rel_diff_boxes;
  return res;
}

namespace {
nlohmann::json Int8CalibrationJson(const ExportResult& r) {
  if (!r.int8) return nullptr;
  const ExportResult::Int8Calibration& c = r.calibration;
  nlohmann::json j = {{"dataset", c.dataset},
                      {"version_id", c.version_id},
                      {"split", c.split},
                      {"split_images", c.split_images},
                      {"candidates", c.candidates},
                      {"images", c.images},
                      {"method", c.method},
                      {"quantized_convs", c.quantized_convs},
                      {"float_convs", c.float_convs},
                      {"tensors", c.tensors}};
  if (c.method == "percentile") j["percentile"] = c.percentile;
  return j;
}
}  // namespace

namespace {
nlohmann::json NmsCheckJson(const ExportResult& r) {
  if (!r.nms) return nullptr;
  const NmsCheck& c = r.nms_check;
  nlohmann::json j = {
      {"conf", r.conf},           {"iou", r.iou}, {"max_det", r.max_det}, {"runtime", c.runtime},
      {"reference", c.reference}, {"ran", c.ran}, {"passed", c.passed}};
  if (c.ran) {
    j["images"] = c.images;
    j["reference_boxes"] = c.reference_boxes;
    j["file_boxes"] = c.file_boxes;
    j["matched"] = c.matched;
    j["min_iou"] = c.min_iou;
    j["max_score_diff"] = c.max_score_diff;
  }
  if (!c.passed) j["error"] = c.error;
  return j;
}
}  // namespace

namespace {
// {"enabled", "nodes_before", "nodes_after", "initializers_before",
//  "initializers_after", "value_info", "constants", "folded", "kept_large",
//  "removed_noops", "removed_dead", "removed_initializers"}.
nlohmann::json SimplifyJson(const ExportResult& r) {
  const exporter::SimplifyReport& x = r.simplified;
  return {{"enabled", r.simplify},
          {"nodes_before", x.nodes_before},
          {"nodes_after", x.nodes_after},
          {"initializers_before", x.initializers_before},
          {"initializers_after", x.initializers_after},
          {"value_info", x.value_info},
          {"constants", x.constants},
          {"folded", x.folded},
          {"kept_large", x.kept_large},
          {"removed_noops", x.removed_noops},
          {"removed_dead", x.removed_dead},
          {"removed_initializers", x.removed_initializers}};
}
}  // namespace

nlohmann::json ExportVerificationJson(const ExportResult& r) {
  nlohmann::json runtimes = nlohmann::json::array();
  for (const RuntimeCheck& c : r.checks) {
    nlohmann::json rc = {{"runtime", c.runtime}, {"ran", c.ran}, {"passed", c.passed}};
    if (c.ran) {
      rc["max_abs_diff"] = c.max_abs_diff;
      rc["max_abs_diff_boxes"] = c.max_abs_diff_boxes;
      rc["max_abs_diff_scores"] = c.max_abs_diff_scores;
      rc["max_rel_diff_boxes"] = c.max_rel_diff_boxes;
    }
    if (!c.passed) rc["error"] = c.error;
    runtimes.push_back(std::move(rc));
  }
  nlohmann::json v = {
      {"runtime", r.checks.size() < 2 ? std::string() : r.checks[r.half || r.int8 ? 1 : 0].runtime},
      {"reference", "libtorch"},
      {"images", r.verify_images},
      {"shapes", r.verify_shapes},
      {"max_abs_diff", r.max_abs_diff},
      {"max_abs_diff_boxes", r.max_abs_diff_boxes},
      {"max_abs_diff_scores", r.max_abs_diff_scores},
      {"max_rel_diff_boxes", r.max_rel_diff_boxes},
      {"tolerance", r.tolerance},
      {"verified", r.verified},
      {"runtimes", runtimes}};
  if (!r.verified) v["error"] = r.verification_error;
  v["map"] = r.map.ran || !r.map.error.empty() ? MapCheckJson(r.map) : nlohmann::json(nullptr);
  v["nms"] = NmsCheckJson(r);
  return v;
}

nlohmann::json ExportOptionsJson(const ExportResult& r) {
  return {{"imgsz", {r.imgsz_h, r.imgsz_w}},
          {"batch", r.batch},
          {"opset", r.opset},
          {"dynamic", r.dynamic},
          {"half", r.half},
          {"int8", r.int8},
          {"nms", r.nms},
          {"simplify", r.simplify}};
}

nlohmann::json ExportResultJson(const ExportResult& r) {
  return {
      {"path", r.path},
      {"weights", r.weights},
      {"format", r.format},
      {"arch", r.arch},
      {"nc", r.nc},
      {"names", r.names},
      {"names_source", r.names_source},
      {"names_dataset", r.names_dataset.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.names_dataset)},
      {"imgsz", {r.imgsz_h, r.imgsz_w}},
      {"batch", r.batch},
      {"dynamic", r.dynamic},
      {"half", r.half},
      {"int8", r.int8},
      {"simplify", SimplifyJson(r)},
      {"nms", r.nms},
      {"calibration", Int8CalibrationJson(r)},
      {"opset", r.opset},
      {"input", {{"name", "images"}, {"shape", r.input_shape}}},
      {"output", {{"name", "output0"}, {"shape", r.output_shape}}},
      {"bytes", r.bytes},
      {"nodes", r.nodes},
      {"parameters", r.parameters},
      {"verification", ExportVerificationJson(r)}};
}

namespace {
// "class names: a, b, c (from ...)\n"; the default says why there are none.
std::string ClassNamesText(const ExportResult& r) {
  std::string list;
  for (size_t k = 0; k < r.names.size() && k < 8; ++k) list += (k ? ", " : "") + r.names[k];
  if (r.names.size() > 8) list += ", ... (" + std::to_string(r.names.size()) + ")";
  if (r.names_source == "weights") return "class names: " + list + " (from the weights)\n";
  if (r.names_source == "model_dataset")
    return "class names: " + list + " (from " + r.names_dataset +
           ", the registered model's dataset version)\n";
  if (r.names_source == "data") return "class names: " + list + " (from data=" + r.names_dataset + ")\n";
  return "class names: " + list +
         " (default: the weights record no class names, the model is not registered with a dataset version "
         "and no data= was given)\n";
}
}  // namespace

namespace {
// "simplify: 236 -> 234 nodes (2 folded, ...), 412 value_info" or "simplify=false: ...".
std::string SimplifyText(const ExportResult& r) {
  const exporter::SimplifyReport& x = r.simplified;
  std::ostringstream s;
  if (!r.simplify) {
    s << "simplify=false: the graph as built (" << x.nodes_after << " nodes, " << x.initializers_after
      << " initializers, " << x.value_info << " value_info)\n";
    return s.str();
  }
  s << "simplify: " << x.nodes_before << " -> " << x.nodes_after << " nodes (" << x.folded << " folded, "
    << x.removed_noops << " no-op, " << x.removed_dead << " dead removed";
  if (x.kept_large > 0)
    s << ", " << x.kept_large << " left unfolded: over " << exporter::kMaxFoldBytes << " bytes";
  s << "), " << x.initializers_before << " -> " << x.initializers_after << " initializers, " << x.value_info
    << " value_info from shape inference\n";
  return s.str();
}
}  // namespace

std::string ExportResultText(const ExportResult& r) {
  if (r.format == "pt") return ExportPtText(r);
  std::ostringstream s;
  s << "exported " << r.arch << (r.half ? " FP16" : "") << (r.int8 ? " INT8" : "") << " (" << r.nc
    << " classes) to " << r.path << " (" << r.bytes << " bytes, opset " << r.opset << ", " << r.nodes
    << " nodes)\n";
  s << "input images " << ShapeText(r.input_shape) << ", output output0 " << ShapeText(r.output_shape)
    << (r.dynamic ? " (-1: dynamic axis)" : "") << "\n";
  if (!r.imgsz_why.empty()) {
    s << "imgsz=" << r.imgsz_h;
    if (r.imgsz_w != r.imgsz_h) s << "," << r.imgsz_w;
    s << " " << r.imgsz_why << "\n";
  }
  s << SimplifyText(r);
  s << ClassNamesText(r);
  if (!r.verified) {
    s << "UNVERIFIED (kept by --force): " << r.verification_error << "\n" << MapCheckText(r.map);
    return s.str();
  }
  if (r.int8) {
    const ExportResult::Int8Calibration& c = r.calibration;
    s << "INT8: " << c.quantized_convs << " convs quantized (" << c.float_convs << " left float), "
      << c.tensors << " activation ranges (" << c.method;
    if (c.method == "percentile") s << " " << c.percentile;
    s << ") from " << c.images << " images of " << c.dataset << " " << c.split << "\n";
  }
  s << "verified against LibTorch on " << r.verify_images << " images at " << r.verify_shapes.size()
    << " input shape(s), tolerance " << r.tolerance << ":\n";
  for (const RuntimeCheck& c : r.checks) {
    if (!c.ran) {
      s << "  " << c.error << "\n";
      continue;
    }
    s << "  " << c.runtime << ": max |diff| " << c.max_abs_diff << " (class scores " << c.max_abs_diff_scores
      << ", box pixels " << c.max_abs_diff_boxes << " = " << c.max_rel_diff_boxes << " relative)\n";
  }
  if (r.nms) {
    const NmsCheck& c = r.nms_check;
    s << "  NMS in the graph (conf " << r.conf << ", iou " << r.iou << ", max_det " << r.max_det << "), "
      << c.runtime << " vs " << c.reference << " + eval NMS: " << c.matched << " of " << c.reference_boxes
      << " detections matched on " << c.images << " images, min IoU " << c.min_iou << ", max |score diff| "
      << c.max_score_diff << "\n";
  }
  s << MapCheckText(r.map);
  return s.str();
}

}  // namespace kestrel::app
