// The one image decode entry point. Import, the training loader and predict
// all go through DecodeImage, so every stage sees the same pixels: 8-bit,
// 3-channel RGB, rotated per EXIF orientation.
//
// Sizes are in pixels. "Stored" sizes are what the file header says; the
// plain width/height are after EXIF orientation (swapped for orientations
// 5..8). Label coordinates always refer to the oriented image.
//
// Thread-safety: all functions are reentrant (no shared state).
#pragma once

#include <cstdint>
#include <opencv2/core/mat.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "data/dataset.h"

namespace kestrel::data {

struct ImageInfo {
  std::string format;  // "jpeg", "png", "bmp", "webp", "tiff"
  int width = 0;       // pixels, after EXIF orientation
  int height = 0;
  int stored_width = 0;  // pixels, as stored in the file
  int stored_height = 0;
  int channels = 0;          // stored colour channels incl. alpha (1..4)
  int bit_depth = 8;         // bits per channel (8 or 16; 1..8 for palettes)
  int exif_orientation = 1;  // EXIF tag 0x0112, 1..8; 1 = as stored
  bool has_alpha = false;
  bool is_gray = false;
  bool is_cmyk = false;  // JPEG with 4 components (CMYK/YCCK), TIFF separated
};

// Reads headers only (never allocates pixels). Recognizes JPEG (baseline,
// extended, progressive, lossless SOFn; APP1 Exif orientation in either byte
// order), PNG (IHDR, tRNS, eXIf), BMP, WebP (VP8, VP8L, VP8X) and TIFF.
// `origin` names the file in errors. Unknown formats are an error.
Result<ImageInfo> ProbeImage(std::string_view bytes, const std::string& origin);

struct DecodeOptions {
  // Largest stored width*height accepted; bigger headers are refused as
  // decompression bombs before any pixel is allocated.
  int64_t max_pixels = 100'000'000;
};

// Why DecodeImage refused an image: the typed cause behind its Status, for
// callers that branch on it (the importer's check ids), never on the message.
enum class DecodeFailure {
  kNone,
  kEmpty,          // no bytes
  kUnknownFormat,  // not a JPEG, PNG, BMP, WebP or TIFF signature
  kZeroSize,       // the header says 0 pixels wide or high
  kTooLarge,       // over DecodeOptions::max_pixels (decompression bomb), a file over 2 GiB,
                   // or out of memory while decoding
  kTruncated,      // JPEG without a frame header or end-of-image marker, PNG without IEND
  kCorrupt,        // another malformed header, or bytes the codec refuses
  kUnsupported,    // well-formed but not decodable here (WebP chunk, pixel depth, channels)
};
// The importer's check id for a refused image: "image.too_large",
// "image.truncated", "image.zero_size", "image.empty", else "image.decode".
const char* DecodeFailureCheck(DecodeFailure f);

// Decodes to an 8-bit, 3-channel RGB image (CV_8UC3), EXIF-oriented:
// 16-bit is scaled to 8-bit, gray is replicated, alpha is dropped.
// Rejects, with a Status whose location file is `origin`: unknown formats,
// zero sizes, decompression bombs (checked from the header, before
// decoding), truncated JPEG (no EOI after the last scan) and PNG (no IEND),
// and anything the codec refuses. `info`, when given, receives the probe
// result; `failure`, when given, why it refused (kNone on success). Both
// are nullable borrows.
Result<cv::Mat> DecodeImage(std::string_view bytes, const std::string& origin, const DecodeOptions& opts = {},
                            ImageInfo* info = nullptr, DecodeFailure* failure = nullptr);

// Info-level findings describing what DecodeImage normalizes for this image:
// "image.grayscale", "image.cmyk", "image.16bit", "image.alpha",
// "image.exif_orientation". `file` is copied into each finding.
std::vector<Finding> ImageInfoFindings(const ImageInfo& info, const std::string& file);

// Whether BMP, WebP and TIFF decode here too: OpenCV's imgcodecs, which
// DecodeImage loads on the first such image (not at start: its GDAL
// libraries cost every process ~0.1 s), is there. False in the travelling
// trainer's build (docs/gpu.md), which decodes JPEG and PNG only.
bool DecodesEveryFormat();

// True for jpg jpeg png bmp webp tif tiff, any case, with or without the dot.
bool IsImageExtension(const std::string& ext);

// Turns OpenCV's own stderr logging down to errors-only. Process-wide: call
// from main() (and test setup), never from library code.
void QuietImageCodecLogs();

// Sets OpenCV's own worker-thread count (0 = run OpenCV calls sequentially).
// Kestrel parallelizes over images itself; OpenCV's pool on top of that
// oversubscribes the cores and spins (measured: import 2x slower). Process-
// wide: call from main() only.
void SetImageCodecThreads(int threads);

}  // namespace kestrel::data
