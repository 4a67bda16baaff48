// ProbeImage + DecodeImage on arbitrary bytes: the hand-written header
// walkers (JPEG markers, PNG chunks, TIFF IFDs, WebP RIFF) must never read
// out of bounds, and a decoded image is always 8-bit RGB of the probed size.
#include <opencv2/core.hpp>

#include "data/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static bool quiet = [] {
    kestrel::data::QuietImageCodecLogs();
    cv::setNumThreads(1);
    return true;
  }();
  (void)quiet;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto info = kestrel::data::ProbeImage(bytes, "fuzz");
  kestrel::data::DecodeOptions opts;
  opts.max_pixels = 1 << 20;  // keep the fuzzer's memory bounded
  kestrel::data::ImageInfo got;
  auto img = kestrel::data::DecodeImage(bytes, "fuzz", opts, &got);
  if (img.IsOk()) {
    if (!info.IsOk() || img->type() != CV_8UC3 || img->cols != got.width || img->rows != got.height) {
      __builtin_trap();
    }
  }
  return 0;
}
