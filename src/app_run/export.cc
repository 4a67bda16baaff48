#include "app_run/export.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#include <random>
#include <sstream>

#include "export/onnx_export.h"
#include "model/predictor.h"
#include "model/pt_checkpoint.h"
#include "model/spec.h"

namespace kestrel::app {

namespace {

Status KeyError(const std::string& msg, const std::string& key) {
  return Status::InvalidArgument(msg, {"command line", 0, key});
}

Status ValidateRequest(const ExportRequest& r) {
  if (r.model.empty()) return KeyError("model=WEIGHTS_OR_REFERENCE is required", "model");
  if (r.format != "onnx") return KeyError("unknown format '" + r.format + "'; supported: onnx", "format");
  if (r.dynamic) {
    return KeyError(
        "dynamic=true is not supported yet: exports have a fixed batch and imgsz (docs/export.md)",
        "dynamic");
  }
  if (r.verify_images < 1 || r.verify_images > 64)
    return KeyError("verify_images must be in [1, 64]", "verify_images");
  if (!(r.tolerance >= 0)) return KeyError("tolerance must be >= 0", "tolerance");
  return {};
}

// Where the file goes when output= is empty (ExportRequest::output).
std::string DefaultOutput(Env& env, const std::string& model_arg) {
  namespace fs = std::filesystem;
  if (env.Stat(model_arg).exists) return fs::path(model_arg).replace_extension(".onnx").string();
  std::string stem = model_arg;
  std::replace(stem.begin(), stem.end(), '@', '_');
  std::replace(stem.begin(), stem.end(), '/', '_');
  return stem + ".onnx";
}

// `count` deterministic RGB images in 0..1, [count, 3, side, side]: the
// letterbox grey (114/255) around a content band of random height, holding
// noise and a few flat rectangles, so every head level sees structure.
std::vector<float> SyntheticImages(int count, int side) {
  const size_t plane = static_cast<size_t>(side) * side;
  std::vector<float> px(static_cast<size_t>(count) * 3 * plane, 114.0F / 255.0F);
  std::mt19937 rng(20240514);
  std::uniform_real_distribution<float> u(0.0F, 1.0F);
  for (int b = 0; b < count; ++b) {
    float* img = px.data() + static_cast<size_t>(b) * 3 * plane;
    const int band = side / 2 + static_cast<int>(u(rng) * static_cast<float>(side / 2));
    const int top = (side - band) / 2;
    for (int c = 0; c < 3; ++c) {
      for (int y = top; y < top + band; ++y) {
        for (int x = 0; x < side; ++x) img[c * plane + static_cast<size_t>(y) * side + x] = u(rng);
      }
    }
    for (int k = 0; k < 4; ++k) {
      const int w = 4 + static_cast<int>(u(rng) * static_cast<float>(side / 3));
      const int h = 4 + static_cast<int>(u(rng) * static_cast<float>(band / 3));
      const int x0 = static_cast<int>(u(rng) * static_cast<float>(side - w));
      const int y0 = top + static_cast<int>(u(rng) * static_cast<float>(std::max(1, band - h)));
      for (int c = 0; c < 3; ++c) {
        const float v = u(rng);
        for (int y = y0; y < std::min(y0 + h, side); ++y) {
          for (int x = x0; x < x0 + w; ++x) img[c * plane + static_cast<size_t>(y) * side + x] = v;
        }
      }
    }
  }
  return px;
}

struct Diff {
  double all = 0, boxes = 0, scores = 0, boxes_rel = 0;  // ExportResult's max_* fields
};

// Runs `images` ([n, 3, side, side], n a multiple of batch) through the ONNX
// file in OpenCV DNN and through `model`, `batch` at a time; the largest
// differences over every output0 value, or an error when a runtime fails or
// the shapes differ.
Result<Diff> CompareRuntimes(const std::string& onnx_path, model::Predictor& model,
                             const std::vector<float>& images, int n, int batch, int side,
                             const std::vector<int64_t>& out_shape) {
  Diff diff;
  try {
    cv::dnn::Net net = cv::dnn::readNetFromONNX(onnx_path);
    net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
    const size_t per_image = static_cast<size_t>(3) * side * side;
    for (int start = 0; start < n; start += batch) {
      // cv::Mat wraps without copying and never writes its input.
      auto* data = const_cast<float*>(images.data() + static_cast<size_t>(start) * per_image);
      const int sizes[4] = {batch, 3, side, side};
      cv::Mat blob(4, sizes, CV_32F, data);
      net.setInput(blob, "images");
      cv::Mat cv_out = net.forward("output0");
      if (cv_out.dims != 3 || cv_out.size[0] != out_shape[0] || cv_out.size[1] != out_shape[1] ||
          cv_out.size[2] != out_shape[2]) {
        std::ostringstream got;
        for (int d = 0; d < cv_out.dims; ++d) got << (d ? ", " : "") << cv_out.size[d];
        return Status::FailedPrecondition("OpenCV DNN returned output0 of shape [" + got.str() + "]",
                                          {onnx_path, 0, "output0"});
      }
      SafeTensor in{"F32",
                    {batch, 3, side, side},
                    std::string(reinterpret_cast<const char*>(data), per_image * batch * sizeof(float))};
      KESTREL_ASSIGN_OR_RETURN(SafeTensor ref, model.ForwardDecoded(in));
      if (ref.shape != out_shape) return Status::Internal("LibTorch decoded output has an unexpected shape");
      const auto* r = reinterpret_cast<const float*>(ref.data.data());
      const auto* o = reinterpret_cast<const float*>(cv_out.data);
      const auto count = static_cast<int64_t>(ref.data.size() / sizeof(float));
      const int64_t channels = out_shape[1], anchors = out_shape[2];
      for (int64_t i = 0; i < count; ++i) {
        double d = std::fabs(static_cast<double>(r[i]) - static_cast<double>(o[i]));
        if (std::isnan(d)) d = INFINITY;  // a NaN on either side never verifies
        diff.all = std::max(diff.all, d);
        if ((i / anchors) % channels < 4) {
          diff.boxes = std::max(diff.boxes, d);
          diff.boxes_rel = std::max(diff.boxes_rel, d / std::max(1.0, std::fabs(static_cast<double>(r[i]))));
        } else {
          diff.scores = std::max(diff.scores, d);
        }
      }
    }
  } catch (const cv::Exception& e) {
    return Status::FailedPrecondition(std::string("OpenCV DNN could not run the export: ") + e.what(),
                                      {onnx_path, 0, ""});
  }
  return diff;
}

}  // namespace

Result<ExportResult> ExportModel(Env& env, const ExportRequest& request,
                                 const ExportWeightsResolver& resolve) {
  KESTREL_RETURN_IF_ERROR(ValidateRequest(request));
  ExportResult res;
  res.weights = request.model;
  if (resolve) KESTREL_RETURN_IF_ERROR(resolve(&res.weights));
  KESTREL_ASSIGN_OR_RETURN(model::WeightsInfo info, model::ReadWeightsInfo(res.weights));
  exporter::OnnxExportOptions opts;
  opts.imgsz_h = opts.imgsz_w = request.imgsz;
  opts.batch = request.batch;
  opts.opset = request.opset;
  KESTREL_RETURN_IF_ERROR(exporter::ValidateOnnxOptions(info.spec, opts));

  // The reference: the LibTorch model as trained (eval mode, BN unfused).
  model::PredictorOptions popts;
  popts.imgsz = request.imgsz;
  popts.batch = request.batch;
  popts.fuse = false;
  KESTREL_ASSIGN_OR_RETURN(std::unique_ptr<model::Predictor> net, model::Predictor::Load(res.weights, popts));
  // The same tensors, torch-free (a .pt's floats widened to F32).
  KESTREL_ASSIGN_OR_RETURN(SafeTensorFile state, model::ReadWeightsFile(res.weights));
  opts.names = net->Names();
  KESTREL_ASSIGN_OR_RETURN(exporter::OnnxModel onnx, exporter::BuildOnnxModel(info.spec, state, opts));

  res.path = request.output.empty() ? DefaultOutput(env, request.model) : request.output;
  const std::string tmp = res.path + ".verifying.onnx";
  KESTREL_RETURN_IF_ERROR(exporter::WriteOnnxFile(env, onnx, tmp));
  const int n = ((request.verify_images + request.batch - 1) / request.batch) * request.batch;
  const std::vector<float> images = SyntheticImages(n, request.imgsz);
  const std::vector<int64_t> out_shape{request.batch, onnx.output_channels, onnx.anchors};
  Result<Diff> diff = CompareRuntimes(tmp, *net, images, n, request.batch, request.imgsz, out_shape);
  const bool passed =
      diff.IsOk() && diff->scores <= request.tolerance && diff->boxes_rel <= request.tolerance;
  if (!passed) {
    (void)env.RemoveFile(tmp);
    std::ostringstream msg;
    if (diff.IsOk()) {
      msg << "export verification failed over " << n
          << " images: max |OpenCV DNN - LibTorch| = " << diff->scores << " on class scores, "
          << diff->boxes_rel << " relative on box pixels (tolerance " << request.tolerance << " each)";
    } else {
      msg << "export verification failed: " << diff.GetStatus().ToString();
    }
    if (!request.force) {
      msg << "; nothing was written (--force keeps the file, marked unverified)";
      return Status::FailedPrecondition(msg.str(), {res.path, 0, ""});
    }
    // --force: the same graph, marked in its metadata, written without the rename dance.
    res.verification_error = msg.str();
    opts.extra_metadata["kestrel_verification"] = "unverified: " + msg.str();
    KESTREL_ASSIGN_OR_RETURN(onnx, exporter::BuildOnnxModel(info.spec, state, opts));
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
  res.names = net->Names();
  res.imgsz = request.imgsz;
  res.batch = request.batch;
  res.opset = request.opset;
  res.input_shape = {request.batch, 3, request.imgsz, request.imgsz};
  res.output_shape = out_shape;
  res.bytes = static_cast<int64_t>(onnx.bytes.size());
  res.nodes = onnx.nodes;
  res.parameters = onnx.parameters;
  res.verified = passed;
  res.verify_images = n;
  res.tolerance = request.tolerance;
  if (diff.IsOk()) {
    res.max_abs_diff = diff->all;
    res.max_abs_diff_boxes = diff->boxes;
    res.max_abs_diff_scores = diff->scores;
    res.max_rel_diff_boxes = diff->boxes_rel;
  }
  return res;
}

nlohmann::json ExportResultJson(const ExportResult& r) {
  nlohmann::json j = {{"path", r.path},
                      {"weights", r.weights},
                      {"format", r.format},
                      {"arch", r.arch},
                      {"nc", r.nc},
                      {"names", r.names},
                      {"imgsz", r.imgsz},
                      {"batch", r.batch},
                      {"opset", r.opset},
                      {"input", {{"name", "images"}, {"shape", r.input_shape}}},
                      {"output", {{"name", "output0"}, {"shape", r.output_shape}}},
                      {"bytes", r.bytes},
                      {"nodes", r.nodes},
                      {"parameters", r.parameters},
                      {"verification",
                       {{"runtime", "opencv-dnn " CV_VERSION},
                        {"reference", "libtorch"},
                        {"images", r.verify_images},
                        {"max_abs_diff", r.max_abs_diff},
                        {"max_abs_diff_boxes", r.max_abs_diff_boxes},
                        {"max_abs_diff_scores", r.max_abs_diff_scores},
                        {"max_rel_diff_boxes", r.max_rel_diff_boxes},
                        {"tolerance", r.tolerance},
                        {"verified", r.verified}}}};
  if (!r.verified) j["verification"]["error"] = r.verification_error;
  return j;
}

std::string ExportResultText(const ExportResult& r) {
  std::ostringstream s;
  s << "exported " << r.arch << " (" << r.nc << " classes) to " << r.path << " (" << r.bytes
    << " bytes, opset " << r.opset << ", " << r.nodes << " nodes)\n";
  s << "input images [" << r.batch << ", 3, " << r.imgsz << ", " << r.imgsz << "], output output0 ["
    << r.output_shape.at(0) << ", " << r.output_shape.at(1) << ", " << r.output_shape.at(2) << "]\n";
  if (!r.verified) {
    s << "UNVERIFIED (kept by --force): " << r.verification_error << "\n";
    return s.str();
  }
  s << "verified: OpenCV DNN vs LibTorch on " << r.verify_images << " images: max |diff| " << r.max_abs_diff
    << " (class scores " << r.max_abs_diff_scores << ", box pixels " << r.max_abs_diff_boxes << " = "
    << r.max_rel_diff_boxes << " relative; tolerance " << r.tolerance << ")\n";
  return s.str();
}

}  // namespace kestrel::app
