// kestrel::Detector (include/kestrel/detector.h): an exported ONNX detector
// in OpenCV DNN around eval::BatchInference, the letterbox / decode / NMS /
// mapping back that `kestrel predict model=*.onnx` runs, so the installed
// library and the CLI give the same boxes. Internal Status values become
// the public API's messages here; nothing throws out of this file.
#include "kestrel/detector.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <fstream>
#include <iterator>
#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>
#include <sstream>
#include <utility>

#include "core/status.h"
#include "eval/inference.h"
#include "export/onnx_info.h"

#ifndef KESTREL_EMBED_VERSION
#define KESTREL_EMBED_VERSION "0.0.0"
#endif

namespace kestrel {
namespace {

void SetError(std::string* error, const std::string& message) {
  if (error != nullptr) *error = message;
}

// The recorded training size: metadata imgsz "[h, w]" or "s" (the exporter
// writes the pair); the long side, 0 when absent or unreadable.
int RecordedImgsz(const exporter::OnnxDetectorInfo& info) {
  auto it = info.metadata.find("imgsz");
  if (it == info.metadata.end()) return 0;
  int best = 0, cur = 0;
  bool in_number = false;
  for (char c : it->second + " ") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      cur = std::min(cur * 10 + (c - '0'), 1 << 20);
      in_number = true;
    } else if (in_number) {
      best = std::max(best, cur);
      cur = 0;
      in_number = false;
    }
  }
  return best;
}

size_t BytesPerPixel(PixelFormat f) { return f == PixelFormat::kGray ? 1 : 3; }

}  // namespace

const char* Version() { return KESTREL_EMBED_VERSION; }

struct Detector::Impl {
  std::string path;
  exporter::OnnxDetectorInfo info;
  cv::dnn::Net net;
  std::unique_ptr<eval::BatchInference> run;
  std::vector<float> output;  // the last forward's output0, [n, 4 + nc, anchors]
  std::vector<uint8_t> rgb;   // the image converted to packed RGB

  Result<eval::DecodedOutput> Forward(const float* input, int n, int height, int width) {
    if (info.FixedSize() && (height != info.height || width != info.width)) {
      return Status::InvalidArgument("input " + std::to_string(height) + "x" + std::to_string(width) +
                                         " is not the file's " + std::to_string(info.height) + "x" +
                                         std::to_string(info.width),
                                     {path, 0, "imgsz"});
    }
    const int sizes[4] = {n, 3, height, width};
    // Wraps without copying; the net never writes its input.
    const cv::Mat blob(4, sizes, CV_32F, const_cast<float*>(input));
    net.setInput(blob, info.input.name);
    const cv::Mat out = net.forward(info.output.name);
    if (out.type() != CV_32F || out.dims != 3 || out.size[0] != n || out.size[1] != 4 + info.nc ||
        !out.isContinuous()) {
      return Status::Internal("OpenCV DNN returned output0 of another shape than the file declares",
                              {path, 0, "model"});
    }
    const auto* o = reinterpret_cast<const float*>(out.data);
    output.assign(o, o + out.total());
    return eval::DecodedOutput{output.data(), out.size[2]};
  }
};

Detector::Detector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Detector::~Detector() = default;

std::unique_ptr<Detector> Detector::Open(const std::string& path, const DetectorOptions& options,
                                         std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    SetError(error, path + ": model: file not found or not readable");
    return nullptr;
  }
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  Result<exporter::OnnxDetectorInfo> info = exporter::ReadOnnxDetectorInfo(bytes, path);
  if (!info.IsOk()) {
    SetError(error, info.GetStatus().ToString());
    return nullptr;
  }
  impl->info = std::move(info).Value();
  const exporter::OnnxDetectorInfo& fi = impl->info;
  if (fi.nms) {
    SetError(error, path +
                        ": model: exported with nms=true (final detections in the graph), which OpenCV "
                        "DNN cannot import; export again with nms=false");
    return nullptr;
  }
  if (fi.FixedSize() && fi.height != fi.width) {
    SetError(error, path + ": imgsz: the file's input is " + std::to_string(fi.height) + "x" +
                        std::to_string(fi.width) + "; only square inputs are run");
    return nullptr;
  }
  eval::InferenceOptions io;
  io.batch = 1;
  io.warmup_batches = 0;
  io.nms.conf = options.conf;
  io.nms.iou = options.iou;
  io.nms.max_det = options.max_det;
  io.nms.agnostic = options.agnostic_nms;
  const int recorded = RecordedImgsz(fi);
  io.imgsz = options.imgsz > 0 ? options.imgsz : recorded > 0 ? recorded : 640;
  if (fi.FixedSize()) {
    if (options.imgsz > 0 && options.imgsz != fi.width) {
      SetError(error, path + ": imgsz: the file's input is fixed at " + std::to_string(fi.width) +
                          "; imgsz " + std::to_string(options.imgsz) +
                          " cannot run (export with dynamic=true)");
      return nullptr;
    }
    io.imgsz = fi.width;
  }
  if (Status valid = io.Validate(); !valid.IsOk()) {
    SetError(error, path + ": " + valid.Where().field + ": " + valid.Message());
    return nullptr;
  }
  try {
    impl->net = cv::dnn::readNetFromONNX(bytes.data(), bytes.size());
    impl->net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    impl->net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  } catch (const std::exception& e) {
    SetError(error, path + ": model: OpenCV DNN cannot load it: " + e.what());
    return nullptr;
  }
  if (impl->net.empty()) {
    SetError(error, path + ": model: OpenCV DNN cannot load it");
    return nullptr;
  }
  impl->run = std::make_unique<eval::BatchInference>(fi.nc, io);
  return std::unique_ptr<Detector>(new Detector(std::move(impl)));
}

bool Detector::Detect(const ImageView& image, std::vector<Detection>* out, std::string* error) {
  if (out == nullptr) {
    SetError(error, "Detect: out must not be null");
    return false;
  }
  out->clear();
  const size_t bpp = BytesPerPixel(image.format);
  const size_t row = static_cast<size_t>(std::max(0, image.width)) * bpp;
  const size_t stride = image.stride == 0 ? row : image.stride;
  if (image.data == nullptr || image.width <= 0 || image.height <= 0 || stride < row) {
    SetError(error, "image: empty view or stride below width x bytes per pixel");
    return false;
  }
  Impl& d = *impl_;
  // BatchInference takes packed RGB.
  d.rgb.resize(row / bpp * 3 * static_cast<size_t>(image.height));
  for (int y = 0; y < image.height; ++y) {
    const uint8_t* src = image.data + static_cast<size_t>(y) * stride;
    uint8_t* dst = d.rgb.data() + static_cast<size_t>(y) * image.width * 3;
    const size_t width = static_cast<size_t>(image.width);
    for (size_t x = 0; x < width; ++x, dst += 3) {
      if (image.format == PixelFormat::kGray) {
        dst[0] = dst[1] = dst[2] = src[x];
      } else if (image.format == PixelFormat::kBgr) {
        dst[0] = src[3 * x + 2];
        dst[1] = src[3 * x + 1];
        dst[2] = src[3 * x];
      } else {
        dst[0] = src[3 * x];
        dst[1] = src[3 * x + 1];
        dst[2] = src[3 * x + 2];
      }
    }
  }
  const eval::ImageView view{d.rgb.data(), image.width, image.height, 3,
                             static_cast<size_t>(image.width) * 3};
  Result<std::vector<eval::ImagePrediction>> preds = [&]() -> Result<std::vector<eval::ImagePrediction>> {
    try {
      return d.run->Predict({view}, [&d](const float* input, int n, int height, int width) {
        return d.Forward(input, n, height, width);
      });
    } catch (const std::exception& e) {
      return Status::Internal(std::string("OpenCV DNN: ") + e.what(), {d.path, 0, "model"});
    }
  }();
  if (!preds.IsOk()) {
    SetError(error, preds.GetStatus().ToString());
    return false;
  }
  for (const eval::Detection& det : preds->front().detections) {
    Detection o;
    o.x1 = det.box.x1;
    o.y1 = det.box.y1;
    o.x2 = det.box.x2;
    o.y2 = det.box.y2;
    o.score = det.score;
    o.class_id = det.class_id;
    if (det.class_id >= 0 && static_cast<size_t>(det.class_id) < d.info.names.size()) {
      o.class_name = d.info.names[static_cast<size_t>(det.class_id)];
    }
    out->push_back(std::move(o));
  }
  return true;
}

const std::vector<std::string>& Detector::ClassNames() const { return impl_->info.names; }

int Detector::InputSize() const { return impl_->run->Options().imgsz; }

}  // namespace kestrel
