// Kestrel's embedding API: run a detector exported by `kestrel export
// format=onnx` inside a C++ program. Installed with the library
// (`find_package(Kestrel)`, target Kestrel::kestrel); docs/cpp-api.md.
//
// The surface is deliberately small and stable: plain structs and one class
// behind a pointer to its implementation, no OpenCV, LibTorch or Kestrel
// internal types. The network runs on the CPU through OpenCV DNN; the
// letterbox, decode, NMS and mapping back to image pixels are the ones
// `kestrel predict model=FILE.onnx` uses, so the boxes are the same.
//
// Errors are values, never exceptions: Open returns nullptr and Detect
// false, with a message naming the file and the field in `*error`.
// Thread-safety: a Detector is not thread-safe; use one per thread (they
// share nothing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#if defined(_WIN32)
#define KESTREL_API __declspec(dllexport)
#else
#define KESTREL_API __attribute__((visibility("default")))
#endif

namespace kestrel {

// The library's version, "MAJOR.MINOR.PATCH" (the Kestrel release it was
// built from; the package config's version).
KESTREL_API const char* Version();

// The byte order of a pixel.
enum class PixelFormat {
  kRgb,   // 3 bytes per pixel, R G B
  kBgr,   // 3 bytes per pixel, B G R (OpenCV's cv::Mat order)
  kGray,  // 1 byte per pixel
};

// A borrowed 8-bit image: `height` rows of `stride` bytes (stride >= width
// times the bytes per pixel), rows top to bottom. Must stay alive during
// the call that takes it; never written to.
struct ImageView {
  const uint8_t* data = nullptr;
  int width = 0;
  int height = 0;
  size_t stride = 0;  // 0 = tightly packed (width times the bytes per pixel)
  PixelFormat format = PixelFormat::kRgb;
};

// One detected object.
struct Detection {
  // Box corners in pixels of the image passed to Detect (x right, y down),
  // clipped to the image.
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  float score = 0;         // confidence in [0, 1]
  int class_id = 0;        // index into Detector::ClassNames()
  std::string class_name;  // ClassNames()[class_id]
};

struct DetectorOptions {
  // Network input side in pixels, a multiple of 32. 0: the file's (a fixed
  // -size export), or its recorded imgsz, else 640. A fixed-size file only
  // runs at its own size.
  int imgsz = 0;
  float conf = 0.25f;         // detections with a lower score are dropped, [0, 1)
  float iou = 0.7f;           // NMS IoU threshold, (0, 1]
  int max_det = 300;          // at most this many detections per image, >= 1
  bool agnostic_nms = false;  // NMS across classes instead of per class
};

class KESTREL_API Detector {
 public:
  // Loads an exported detector (`kestrel export format=onnx`; fixed or
  // dynamic input size; not an nms=true or FP16 export, which OpenCV DNN
  // cannot run). nullptr and *error (when given) on failure: a missing or
  // unreadable file, a file that is not such a graph, options out of range.
  static std::unique_ptr<Detector> Open(const std::string& path, const DetectorOptions& options = {},
                                        std::string* error = nullptr);
  ~Detector();
  Detector(const Detector&) = delete;
  Detector& operator=(const Detector&) = delete;

  // Detects objects in `image` (any size; letterboxed into the input).
  // Replaces *out with the detections, best score first. false and *error
  // (when given) for an empty or malformed view or a failed forward; *out
  // is then empty.
  bool Detect(const ImageView& image, std::vector<Detection>* out, std::string* error = nullptr);

  // The class names recorded in the file (`names` metadata), else
  // "class0", "class1", ...
  const std::vector<std::string>& ClassNames() const;
  int InputSize() const;  // the network input side used, pixels

 private:
  struct Impl;
  explicit Detector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kestrel
