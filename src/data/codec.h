// JPEG and PNG through libjpeg-turbo and libpng themselves, without OpenCV's
// imgcodecs module (docs/gpu.md "The travelling trainer"): Debian's
// libopencv-imgcodecs needs GDAL, and with it poppler, HDF5, NetCDF, ICU and
// some hundred other libraries, into every process that links it (DecodeImage
// loads it only for BMP, WebP and TIFF). These are the codecs of every JPEG
// and PNG Kestrel reads (data/image.h's DecodeImage) and writes (plots,
// mosaics, previews, predict drawings, synthetic datasets).
//
// The decoders give what cv::imdecode(bytes, IMREAD_UNCHANGED) gives for the
// same file with the same libraries (OpenCV 4.6 sets the same decoder
// options): JPEG 1 component -> CV_8UC1, 3 -> CV_8UC3 BGR, 4 (CMYK/YCCK) ->
// CV_8UC3 BGR through the inverted-CMYK formula; PNG gray (1, 2, 4, 8, 16
// bits) -> C1, RGB/palette -> C3 BGR, or C4 BGRA when the file has alpha or
// tRNS (gray + alpha becomes gray replicated + alpha), 16-bit files keep 16
// bits (CV_16U). tests/data/codec_test.cc checks them pixel for pixel
// against OpenCV. The encoders take OpenCV's default settings (JPEG baseline,
// 4:2:0, no optimized Huffman tables; PNG sub filter, zlib level 1, RLE).
//
// Thread-safety: reentrant (no shared state).
#pragma once

#include <opencv2/core/mat.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kestrel::data {

// The decoders: kCorruption with the library's own message for bytes it
// refuses, kResourceExhausted when the pixels cannot be allocated. They
// check no size limit and no truncation (DecodeImage does both first).
Result<cv::Mat> DecodeJpeg(std::string_view bytes);
Result<cv::Mat> DecodePng(std::string_view bytes);

// The encoders: 8-bit images, 1 channel (gray) or 3 (BGR); EncodePng also
// takes 4 (BGRA). Anything else is kInvalidArgument; a library failure
// kInternal with its message. quality is 1..100 (OpenCV's default is 95).
Result<std::string> EncodeJpeg(const cv::Mat& image, int quality = 95);
Result<std::string> EncodePng(const cv::Mat& image);

}  // namespace kestrel::data
