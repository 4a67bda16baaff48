#include "app/export_keys.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <vector>

#include "model/spec.h"

namespace kestrel::app {

namespace {

Status KeyError(const std::string& msg, const std::string& key) {
  return Status::InvalidArgument(msg, {"command line", 0, key});
}

}  // namespace

Result<std::pair<int, int>> ParseExportImgsz(std::string_view text) {
  std::string t;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) t += c;
  }
  if (t.size() >= 2 && t.front() == '[' && t.back() == ']') t = t.substr(1, t.size() - 2);
  std::vector<int> v;
  std::stringstream parts(t);
  std::string part;
  while (std::getline(parts, part, ',')) {
    if (part.empty() || part.size() > 6 ||
        !std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      v.clear();
      break;
    }
    v.push_back(std::stoi(part));
  }
  if (v.empty() || v.size() > 2 || (!t.empty() && t.back() == ',')) {
    return KeyError("imgsz '" + std::string(text) + "' is not a side (640) or a height,width pair (320,256)",
                    "imgsz");
  }
  return std::pair<int, int>{v[0], v.size() == 2 ? v[1] : v[0]};
}

Status ValidateExportRequest(const ExportRequest& r) {
  if (r.model.empty()) return KeyError("model=WEIGHTS_OR_REFERENCE is required", "model");
  if (r.format != "onnx" && r.format != "pt")
    return KeyError("unknown format '" + r.format + "'; supported: onnx, pt", "format");
  const bool imgsz_from_weights = r.imgsz_h == 0 && r.imgsz_w == 0;  // ExportModel resolves it
  for (int v : {r.imgsz_h, r.imgsz_w}) {
    if (imgsz_from_weights) break;
    if (v < model::kMaxStride || v % model::kMaxStride != 0 || v > 8192) {
      return KeyError("imgsz " + std::to_string(v) + " must be a multiple of the max stride " +
                          std::to_string(model::kMaxStride) + " in [32, 8192]",
                      "imgsz");
    }
  }
  if (r.batch < 1 || r.batch > 1024) return KeyError("batch must be in [1, 1024]", "batch");
  if (r.opset < kExportMinOpset || r.opset > kExportMaxOpset) {
    return KeyError("opset " + std::to_string(r.opset) + " is not supported; use " +
                        std::to_string(kExportMinOpset) + ".." + std::to_string(kExportMaxOpset),
                    "opset");
  }
  if (r.verify_images < 1 || r.verify_images > 64)
    return KeyError("verify_images must be in [1, 64]", "verify_images");
  if (!(r.tolerance >= 0)) return KeyError("tolerance must be >= 0", "tolerance");
  // Negated comparisons so NaN fails too (nms=true's thresholds).
  if (!(r.conf >= 0 && r.conf < 1)) return KeyError("conf must be in [0, 1)", "conf");
  if (!(r.iou >= 0 && r.iou <= 1)) return KeyError("iou must be in [0, 1]", "iou");
  if (r.max_det < 1 || r.max_det > kExportMaxDet)
    return KeyError("max_det must be in [1, " + std::to_string(kExportMaxDet) + "]", "max_det");
  if (r.nms && r.int8) return KeyError("nms=true is not implemented with int8=true", "nms");
  if (r.int8 && r.half) return KeyError("int8=true and half=true exclude each other", "int8");
  if (r.calib < 1 || r.calib > 1024) return KeyError("calib must be in [1, 1024]", "calib");
  if (!(r.fraction > 0 && r.fraction <= 1)) return KeyError("fraction must be in (0, 1]", "fraction");
  if (r.calib_method != "minmax" && r.calib_method != "percentile")
    return KeyError("calib_method '" + r.calib_method + "' is not minmax or percentile", "calib_method");
  return {};
}

Status CheckExportCalibrationData(const ExportRequest& r) {
  if (r.int8 && r.data.empty() && r.model_data.empty()) {
    return KeyError(
        "int8=true calibrates on a dataset: give data=NAME[@VERSION] (or a data.yaml); only a registered "
        "model (model=NAME@vN) trained on a dataset version calibrates on that version by default",
        "data");
  }
  return {};
}

void ExportKeys::Bind(OptionSet& s) {
  s.String("model", &r.model, "weights file (.safetensors, .pt) or a registered model NAME[@vN|@TAG]");
  s.String("format", &r.format, "export format: onnx");
  s.String("imgsz", &imgsz,
           "input side (640) or height,width (320,256 or [320,256]), multiples of 32; default: the size the "
           "weights were trained at (640 when they record none)");
  s.Int("batch", &r.batch, "batch dimension of the exported graph (the nominal one when dynamic)");
  s.Int("opset", &r.opset, "ONNX opset, 13..17");
  s.Bool("dynamic", &r.dynamic, "dynamic batch, height and width axes");
  s.Bool("half", &r.half, "FP16 weights and compute, float32 input/output (verified in ONNX Runtime)");
  s.Bool("simplify", &r.simplify, "fold constants, drop no-op nodes, infer shapes (value_info) first");
  s.String("output", &r.output, "where to write (default: beside the weights, <stem>.onnx)");
  s.Int("verify_images", &r.verify_images, "synthetic images the verification runs, 1..64");
  s.Bool("force", &r.force, "keep a file that failed verification, marked unverified in its metadata");
  s.Bool("int8", &r.int8, "INT8 QDQ graph calibrated on data='s train split (verified in ONNX Runtime)");
  s.Int("calib", &r.calib, "int8: calibration images, 1..1024");
  s.Float("fraction", &r.fraction, "int8: share of the split calibration images are drawn from, (0, 1]");
  s.String("calib_method", &r.calib_method, "int8: activation ranges: minmax or percentile (99.99th)");
  s.Bool("nms", &r.nms, "NonMaxSuppression in the graph: output0 = [batch, max_det, 6] detections");
  s.Float("conf", &r.conf, "nms: keep detections with score > conf, [0, 1)");
  s.Float("iou", &r.iou, "nms: suppress a box at IoU > iou with a better one of its class, [0, 1]");
  s.Int("max_det", &r.max_det, "nms: detections per image (rows of output0), 1..10000");
  s.String("data", &r.data, "dataset NAME[@VERSION] or data.yaml: int8 calibration, the mAP check");
}

Result<ExportRequest> ExportKeys::Request() const {
  ExportRequest req = r;
  if (imgsz.empty()) {  // not given: ExportModel takes the weights' training size
    req.imgsz_h = req.imgsz_w = 0;
  } else {
    KESTREL_ASSIGN_OR_RETURN(auto hw, ParseExportImgsz(imgsz));
    req.imgsz_h = hw.first;
    req.imgsz_w = hw.second;
  }
  KESTREL_RETURN_IF_ERROR(ValidateExportRequest(req));
  return req;
}

}  // namespace kestrel::app
