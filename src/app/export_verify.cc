// `kestrel export`'s verification (export.h: VerifyShapes, VerifyOnnxFile,
// VerifyOnnxNms): a written ONNX file run in OpenCV DNN and ONNX Runtime
// (app/onnx_runtime.h) on synthetic images and compared with the LibTorch
// model (the program's reference_forward, app/backends.h) or, for nms=true,
// with Kestrel's own post-processing. Writing the file is export.cc's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>

#include "app/backends.h"
#include "app/export.h"
#include "app/onnx_runtime.h"
#include "eval/box.h"
#include "eval/postprocess.h"

namespace kestrel::app {

namespace {

// `count` deterministic RGB images in 0..1, [count, 3, h, w]: the letterbox
// grey (114/255) around a content band of random height, holding noise and
// a few flat rectangles, so every head level sees structure.
std::vector<float> SyntheticImages(int count, int h, int w, uint32_t seed) {
  const size_t plane = static_cast<size_t>(h) * w;
  std::vector<float> px(static_cast<size_t>(count) * 3 * plane, 114.0F / 255.0F);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0F, 1.0F);
  for (int b = 0; b < count; ++b) {
    float* img = px.data() + static_cast<size_t>(b) * 3 * plane;
    const int half_h = h / 2;  // whole pixels, as are the box bounds below
    const int band = half_h + static_cast<int>(u(rng) * static_cast<float>(half_h));
    const int top = (h - band) / 2;
    for (int c = 0; c < 3; ++c) {
      for (int y = top; y < top + band; ++y) {
        for (int x = 0; x < w; ++x) img[c * plane + static_cast<size_t>(y) * w + x] = u(rng);
      }
    }
    for (int k = 0; k < 4; ++k) {
      const int max_bw = w / 3, max_bh = band / 3;
      const int bw = 4 + static_cast<int>(u(rng) * static_cast<float>(max_bw));
      const int bh = 4 + static_cast<int>(u(rng) * static_cast<float>(max_bh));
      const int x0 = static_cast<int>(u(rng) * static_cast<float>(w - bw));
      const int y0 = top + static_cast<int>(u(rng) * static_cast<float>(std::max(1, band - bh)));
      for (int c = 0; c < 3; ++c) {
        const float v = u(rng);
        for (int y = y0; y < std::min(y0 + bh, h); ++y) {
          for (int x = x0; x < x0 + bw; ++x) img[c * plane + static_cast<size_t>(y) * w + x] = v;
        }
      }
    }
  }
  return px;
}

// The verification inputs: for each shape [b, 3, h, w], SyntheticImages
// (seed, seed + 1, ... per shape) cut into batches of b, at least
// `images_per_shape` images per shape.
std::vector<FloatTensor> SyntheticBatches(const std::vector<std::vector<int64_t>>& shapes,
                                          int images_per_shape, uint32_t seed) {
  std::vector<FloatTensor> inputs;
  for (const std::vector<int64_t>& shape : shapes) {
    const int b = static_cast<int>(shape[0]), h = static_cast<int>(shape[2]), w = static_cast<int>(shape[3]);
    const int n = ((images_per_shape + b - 1) / b) * b;
    const std::vector<float> images = SyntheticImages(n, h, w, seed++);
    const size_t per_batch = static_cast<size_t>(b) * 3 * h * w;
    for (int start = 0; start < n; start += b) {
      const auto first = images.begin() + static_cast<std::ptrdiff_t>(start / b * per_batch);
      inputs.push_back(
          FloatTensor{shape, std::vector<float>(first, first + static_cast<std::ptrdiff_t>(per_batch))});
    }
  }
  return inputs;
}

// The reference outputs of `inputs`: the LibTorch model as trained (eval
// mode, BN unfused), decoded output0 per batch — the program's
// reference_forward (app/backends.h). Without LibTorch: kFailedPrecondition
// naming `model`.
Result<std::vector<FloatTensor>> LibTorchReferences(const std::string& weights,
                                                    const std::vector<FloatTensor>& inputs) {
  const Backends& backends = ProgramBackends();
  if (!backends.reference_forward) {
    return Status::FailedPrecondition("an export is verified against LibTorch, which " + backends.program +
                                          " lacks (kestrel-torch has it; `kestrel export` starts it)",
                                      {weights, 0, "model"});
  }
  return backends.reference_forward(weights, inputs);
}

// Folds one output0 comparison into `check` (box rows relative, scores
// absolute; a NaN on either side never verifies).
// `box_min_score` > 0 (INT8): box rows count only at anchors whose
// reference max class score reaches it (the boxes that can become
// detections); max_abs_diff still covers every value.
void Accumulate(const FloatTensor& ref, const FloatTensor& got, RuntimeCheck& check,
                double box_min_score = 0) {
  const int64_t channels = ref.shape[1], anchors = ref.shape[2];
  auto scored = [&](size_t i) {
    if (box_min_score <= 0) return true;
    const int64_t image = static_cast<int64_t>(i) / (anchors * channels),
                  a = static_cast<int64_t>(i) % anchors;
    float best = 0;
    for (int64_t c = 4; c < channels; ++c)
      best = std::max(best, ref.data[static_cast<size_t>((image * channels + c) * anchors + a)]);
    return best >= box_min_score;
  };
  for (size_t i = 0; i < ref.data.size(); ++i) {
    const double r = ref.data[i];
    double d = std::fabs(r - static_cast<double>(got.data[i]));
    if (std::isnan(d)) d = INFINITY;
    check.max_abs_diff = std::max(check.max_abs_diff, d);
    if ((static_cast<int64_t>(i) / anchors) % channels < 4) {
      if (!scored(i)) continue;
      check.max_abs_diff_boxes = std::max(check.max_abs_diff_boxes, d);
      check.max_rel_diff_boxes = std::max(check.max_rel_diff_boxes, d / std::max(1.0, std::fabs(r)));
    } else {
      check.max_abs_diff_scores = std::max(check.max_abs_diff_scores, d);
    }
  }
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : ", ") + std::to_string(d);
  return "[" + s + "]";
}

}  // namespace

std::vector<std::vector<int64_t>> VerifyShapes(const ExportRequest& r) {
  if (!r.dynamic) return {{r.batch, 3, r.imgsz_h, r.imgsz_w}};
  const int64_t h2 = r.imgsz_h == 32 ? 64 : r.imgsz_h - 32, w2 = r.imgsz_w + 32;
  std::vector<std::vector<int64_t>> shapes;
  for (int64_t b : {int64_t{r.batch}, int64_t{r.batch} + 1}) {
    shapes.push_back({b, 3, r.imgsz_h, r.imgsz_w});
    shapes.push_back({b, 3, h2, w2});
  }
  return shapes;
}

Result<std::vector<RuntimeCheck>> VerifyOnnxFile(const std::string& onnx_path, const std::string& weights,
                                                 const std::vector<std::vector<int64_t>>& shapes,
                                                 int images_per_shape, double tolerance, bool half, bool int8,
                                                 const std::string& opencv_unsupported) {
  const std::vector<FloatTensor> inputs = SyntheticBatches(shapes, images_per_shape, 20240514);
  KESTREL_ASSIGN_OR_RETURN(const std::vector<FloatTensor> refs, LibTorchReferences(weights, inputs));

  std::vector<RuntimeCheck> checks(2);
  std::vector<std::unique_ptr<OnnxRuntime>> runtimes;
  runtimes.push_back(MakeOpenCvDnnRuntime());
  const OnnxRuntimeLocation ort = LocateOnnxRuntime();
  if (ort.unavailable.empty()) {
    runtimes.push_back(MakeOnnxRuntimeNode(ort));
  } else {
    checks[1].runtime = "onnxruntime";
    checks[1].error = "ONNX Runtime check did not run: " + ort.unavailable;
  }
  for (size_t k = 0; k < runtimes.size(); ++k) {
    RuntimeCheck& c = checks[k];
    c.runtime = runtimes[k]->Name();
    if (half && k == 0) {
      c.error = c.runtime + " check did not run: it cannot load FLOAT16 initializers (half=true)";
      continue;
    }
    if (!opencv_unsupported.empty() && k == 0) {
      c.error = c.runtime + " check did not run: " + opencv_unsupported;
      continue;
    }
    c.ran = true;
    Result<std::vector<FloatTensor>> outs = runtimes[k]->Run(onnx_path, inputs);
    if (!outs.IsOk() && int8 && k == 0) {
      c.ran = false;
      c.error = c.runtime + " check did not run: it cannot run the INT8 QDQ file (" +
                outs.GetStatus().Message() + ")";
      continue;
    }
    if (!outs.IsOk()) {
      c.error = outs.GetStatus().ToString();
      continue;
    }
    for (size_t i = 0; i < refs.size() && c.error.empty(); ++i) {
      if ((*outs)[i].shape != refs[i].shape) {
        c.error = c.runtime + " returned output0 of shape " + ShapeText((*outs)[i].shape) + " for input " +
                  ShapeText(inputs[i].shape) + ", LibTorch " + ShapeText(refs[i].shape);
        break;
      }
      Accumulate(refs[i], (*outs)[i], c, int8 ? kExportInt8BoxMinScore : 0);
    }
    if (!c.error.empty()) continue;
    c.passed = c.max_abs_diff_scores <= tolerance && c.max_rel_diff_boxes <= tolerance;
    if (!c.passed) {
      std::ostringstream msg;
      msg << "max |" << c.runtime << " - LibTorch| = " << c.max_abs_diff_scores << " on class scores, "
          << c.max_rel_diff_boxes << " relative on box pixels (tolerance " << tolerance << " each)";
      c.error = msg.str();
    }
  }
  return checks;
}

Result<NmsCheck> VerifyOnnxNms(const std::string& nms_path, const std::string& weights,
                               const std::string& raw_path, const std::vector<std::vector<int64_t>>& shapes,
                               int images_per_shape, double conf, double iou, int max_det, bool half) {
  NmsCheck check;
  check.reference = half ? "onnxruntime raw0 (FP16)" : "libtorch";
  const OnnxRuntimeLocation ort = LocateOnnxRuntime();
  if (!ort.unavailable.empty()) {
    check.runtime = "onnxruntime";
    check.error = "ONNX Runtime check did not run: " + ort.unavailable;
    return check;
  }
  const std::vector<FloatTensor> inputs = SyntheticBatches(shapes, images_per_shape, 20240607);
  std::unique_ptr<OnnxRuntime> runtime = MakeOnnxRuntimeNode(ort);
  check.runtime = runtime->Name();
  std::vector<FloatTensor> refs;
  if (half) {
    KESTREL_ASSIGN_OR_RETURN(refs, runtime->Run(raw_path, inputs));
  } else {
    KESTREL_ASSIGN_OR_RETURN(refs, LibTorchReferences(weights, inputs));
  }
  check.ran = true;
  Result<std::vector<FloatTensor>> outs = runtime->Run(nms_path, inputs);
  if (!outs.IsOk()) {
    check.error = outs.GetStatus().ToString();
    return check;
  }
  eval::NmsOptions nms;  // predict's: best class per anchor, per class
  nms.conf = static_cast<float>(conf);
  nms.iou = static_cast<float>(iou);
  nms.max_det = max_det;
  std::ostringstream why;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const FloatTensor& ref = refs[i];
    const FloatTensor& got = (*outs)[i];
    const int64_t batch = inputs[i].shape[0];
    if (ref.shape.size() != 3 || ref.shape[0] != batch || ref.shape[1] < 5) {
      return Status::Internal("reference raw output of shape " + ShapeText(ref.shape));
    }
    if (got.shape != std::vector<int64_t>{batch, max_det, 6}) {
      check.error = check.runtime + " returned output0 of shape " + ShapeText(got.shape) + " for input " +
                    ShapeText(inputs[i].shape) + ", expected [" + std::to_string(batch) + ", " +
                    std::to_string(max_det) + ", 6]";
      return check;
    }
    const int nc = static_cast<int>(ref.shape[1]) - 4;
    const auto anchors = static_cast<int>(ref.shape[2]);
    for (int64_t b = 0; b < batch; ++b) {
      const int image = check.images++;
      const std::vector<eval::Detection> want = eval::PostprocessYolo(
          ref.data.data() + static_cast<size_t>(b) * ref.shape[1] * ref.shape[2], nc, anchors, nms);
      std::vector<eval::Detection> have;
      bool padding = false;
      for (int64_t r = 0; r < max_det; ++r) {
        const float* row = got.data.data() + (static_cast<size_t>(b) * max_det + r) * 6;
        if (row[4] <= 0) {
          padding = true;
          continue;
        }
        if (padding && why.str().empty()) why << "image " << image << ": a detection after a padding row";
        have.push_back(eval::Detection{eval::Box{row[0], row[1], row[2], row[3]}, row[4],
                                       static_cast<int>(std::lround(row[5]))});
      }
      check.reference_boxes += static_cast<int64_t>(want.size());
      check.file_boxes += static_cast<int64_t>(have.size());
      if (want.size() != have.size() && why.str().empty()) {
        why << "image " << image << ": " << have.size() << " detections, " << check.reference
            << " + eval NMS " << want.size();
      }
      std::vector<bool> used(have.size(), false);
      for (const eval::Detection& d : want) {
        int best = -1;
        double best_iou = -1;
        for (size_t k = 0; k < have.size(); ++k) {
          if (used[k] || have[k].class_id != d.class_id) continue;
          const double v = eval::Iou(d.box, have[k].box);
          if (v > best_iou) best_iou = v, best = static_cast<int>(k);
        }
        if (best < 0) {
          if (why.str().empty())
            why << "image " << image << ": no class " << d.class_id << " detection left to match";
          continue;
        }
        used[static_cast<size_t>(best)] = true;
        const double score_diff =
            std::fabs(static_cast<double>(d.score) - have[static_cast<size_t>(best)].score);
        ++check.matched;
        check.min_iou = std::min(check.min_iou, best_iou);
        check.max_score_diff = std::max(check.max_score_diff, score_diff);
        if ((best_iou < kExportNmsMinIou || score_diff > kExportNmsScoreTolerance) && why.str().empty()) {
          why << "image " << image << ": class " << d.class_id << " detection matched at IoU " << best_iou
              << ", |score diff| " << score_diff;
        }
      }
    }
  }
  check.passed = why.str().empty();
  if (!check.passed) {
    check.error = "NMS output differs from " + check.reference + " + eval NMS (" + why.str() +
                  "; IoU >= " + std::to_string(kExportNmsMinIou) + " and |score diff| <= 1e-4 required)";
  }
  return check;
}

}  // namespace kestrel::app
