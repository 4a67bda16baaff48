// data/codec.h against OpenCV's imgcodecs, pixel for pixel: the decoders
// must give what cv::imdecode(IMREAD_UNCHANGED) gives for every kind of JPEG
// and PNG (the training loader's pixels, and so the reference's loader
// statistics, depend on it), and the encoders OpenCV's bytes. Files are made
// here: by OpenCV, or by libpng/libjpeg for the kinds OpenCV cannot write
// (palettes, tRNS, 2- and 4-bit gray, gray + alpha, interlacing, CMYK).
#include "data/codec.h"

#include <gtest/gtest.h>

#include "data/image.h"

// jpeglib.h needs <cstdio> first.
// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on
#include <png.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

namespace kestrel::data {
namespace {

// Smooth gradients with noise: DCT blocks with both low and high frequencies.
cv::Mat Pattern(int rows, int cols, int type, uint64_t seed) {
  cv::Mat m(rows, cols, type);
  cv::RNG rng(seed);
  rng.fill(m, cv::RNG::UNIFORM, 0, CV_MAT_DEPTH(type) == CV_16U ? 65536 : 256);
  cv::Mat ramp(rows, cols, type);
  const double top = CV_MAT_DEPTH(type) == CV_16U ? 65535 : 255;
  for (int y = 0; y < rows; ++y) {
    for (int x = 0; x < cols; ++x) {
      const double v = top * (x + y) / (rows + cols);
      for (int c = 0; c < m.channels(); ++c) {
        if (CV_MAT_DEPTH(type) == CV_16U) {
          ramp.ptr<uint16_t>(y)[x * m.channels() + c] = static_cast<uint16_t>(v);
        } else {
          ramp.ptr<uint8_t>(y)[x * m.channels() + c] = static_cast<uint8_t>(v);
        }
      }
    }
  }
  cv::addWeighted(m, 0.3, ramp, 0.7, 0, m);
  return m;
}

std::string CvEncode(const cv::Mat& m, const std::string& ext, const std::vector<int>& params = {}) {
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(ext, m, buf, params));
  return {buf.begin(), buf.end()};
}

cv::Mat CvDecode(const std::string& bytes) {
  return cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8UC1, const_cast<char*>(bytes.data())),
                      cv::IMREAD_UNCHANGED);
}

// Ours equals OpenCV's: type, size and every pixel.
void ExpectSameDecode(const std::string& bytes, bool png, const std::string& what) {
  SCOPED_TRACE(what);
  const cv::Mat want = CvDecode(bytes);
  ASSERT_FALSE(want.empty());
  Result<cv::Mat> got = png ? DecodePng(bytes) : DecodeJpeg(bytes);
  ASSERT_TRUE(got.IsOk()) << got.GetStatus().ToString();
  ASSERT_EQ(got->type(), want.type());
  ASSERT_EQ(got->size(), want.size());
  EXPECT_EQ(cv::norm(*got, want, cv::NORM_INF), 0);
}

// A PNG written by libpng: `rows` holds packed rows as the file stores them.
void PngSink(png_structp png, png_bytep p, png_size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(p), n);
}
std::string WritePng(int width, int height, int depth, int color_type, const std::vector<std::string>& rows,
                     bool interlace = false, const std::vector<png_color>& palette = {},
                     const std::vector<png_byte>& trns_alpha = {}, const png_color_16* trns_color = nullptr) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, PngSink, nullptr);
  png_set_IHDR(png, info, width, height, depth, color_type,
               interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!palette.empty()) png_set_PLTE(png, info, palette.data(), static_cast<int>(palette.size()));
  if (!trns_alpha.empty() || trns_color != nullptr) {
    png_set_tRNS(png, info, trns_alpha.empty() ? nullptr : trns_alpha.data(),
                 static_cast<int>(trns_alpha.size()), trns_color);
  }
  png_write_info(png, info);
  std::vector<png_bytep> ptrs;
  for (const std::string& r : rows) ptrs.push_back(reinterpret_cast<png_bytep>(const_cast<char*>(r.data())));
  png_write_image(png, ptrs.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

// Rows of `bytes_per_row` pseudo-random bytes.
std::vector<std::string> RandomRows(int height, int bytes_per_row, uint64_t seed) {
  cv::RNG rng(seed);
  std::vector<std::string> rows(static_cast<size_t>(height),
                                std::string(static_cast<size_t>(bytes_per_row), '\0'));
  for (std::string& r : rows) {
    for (char& c : r) c = static_cast<char>(rng.uniform(0, 256));
  }
  return rows;
}

TEST(CodecTest, JpegDecodesAsOpenCvDoes) {
  for (int type : {CV_8UC1, CV_8UC3}) {
    const cv::Mat m = Pattern(37, 53, type, 7);
    for (int quality : {30, 75, 95, 100}) {
      ExpectSameDecode(CvEncode(m, ".jpg", {cv::IMWRITE_JPEG_QUALITY, quality}), false,
                       "baseline channels=" + std::to_string(m.channels()) + " q=" + std::to_string(quality));
    }
    ExpectSameDecode(CvEncode(m, ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1}), false, "progressive");
    ExpectSameDecode(CvEncode(m, ".jpg", {cv::IMWRITE_JPEG_OPTIMIZE, 1, cv::IMWRITE_JPEG_RST_INTERVAL, 2}),
                     false, "optimized, restart markers");
  }
}

// A 4-component (CMYK) JPEG as cameras and print tools write them.
std::string CmykJpeg(int width, int height) {
  jpeg_compress_struct cinfo;
  jpeg_error_mgr err;
  cinfo.err = jpeg_std_error(&err);
  jpeg_create_compress(&cinfo);
  unsigned char* buf = nullptr;
  unsigned long size = 0;  // NOLINT(google-runtime-int): libjpeg's type
  jpeg_mem_dest(&cinfo, &buf, &size);
  cinfo.image_width = width;
  cinfo.image_height = height;
  cinfo.input_components = 4;
  cinfo.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&cinfo);
  jpeg_start_compress(&cinfo, TRUE);
  const std::vector<std::string> rows = RandomRows(height, width * 4, 11);
  for (const std::string& r : rows) {
    JSAMPROW p = reinterpret_cast<JSAMPROW>(const_cast<char*>(r.data()));
    jpeg_write_scanlines(&cinfo, &p, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  std::string out(reinterpret_cast<const char*>(buf), size);
  std::free(buf);  // NOLINT(cppcoreguidelines-no-malloc)
  return out;
}

TEST(CodecTest, CmykJpegBecomesBgrAsInOpenCv) {
  const std::string bytes = CmykJpeg(21, 13);
  ExpectSameDecode(bytes, false, "cmyk");
  EXPECT_EQ(DecodeJpeg(bytes)->type(), CV_8UC3);
}

TEST(CodecTest, PngDecodesAsOpenCvDoes) {
  for (int type : {CV_8UC1, CV_8UC3, CV_8UC4, CV_16UC1, CV_16UC3, CV_16UC4}) {
    const cv::Mat m = Pattern(19, 31, type, 3);
    ExpectSameDecode(CvEncode(m, ".png"), true, "opencv type " + std::to_string(type));
  }
  ExpectSameDecode(CvEncode(Pattern(9, 17, CV_8UC1, 5) > 128, ".png", {cv::IMWRITE_PNG_BILEVEL, 1}), true,
                   "1-bit gray");
  const int w = 23, h = 11;
  for (int depth : {2, 4}) {
    ExpectSameDecode(WritePng(w, h, depth, PNG_COLOR_TYPE_GRAY, RandomRows(h, (w * depth + 7) / 8, depth)),
                     true, "gray depth " + std::to_string(depth));
  }
  ExpectSameDecode(WritePng(w, h, 8, PNG_COLOR_TYPE_GRAY_ALPHA, RandomRows(h, w * 2, 1)), true,
                   "gray+alpha 8");
  ExpectSameDecode(WritePng(w, h, 16, PNG_COLOR_TYPE_GRAY_ALPHA, RandomRows(h, w * 4, 2)), true,
                   "gray+alpha 16");
  ExpectSameDecode(WritePng(w, h, 8, PNG_COLOR_TYPE_RGB, RandomRows(h, w * 3, 4), true), true,
                   "interlaced RGB");
  std::vector<png_color> palette;
  for (int i = 0; i < 16; ++i) {
    palette.push_back(
        {static_cast<png_byte>(i * 16), static_cast<png_byte>(255 - i * 9), static_cast<png_byte>(i * 5)});
  }
  std::vector<std::string> idx = RandomRows(h, (w * 4 + 7) / 8, 6);  // 4-bit indices: all < 16
  ExpectSameDecode(WritePng(w, h, 4, PNG_COLOR_TYPE_PALETTE, idx, false, palette), true, "palette");
  ExpectSameDecode(WritePng(w, h, 4, PNG_COLOR_TYPE_PALETTE, idx, false, palette, {0, 128, 255}), true,
                   "palette + tRNS");
  EXPECT_EQ(DecodePng(WritePng(w, h, 4, PNG_COLOR_TYPE_PALETTE, idx, false, palette, {0, 128}))->channels(),
            4);
  png_color_16 key{};
  key.red = 10;
  key.green = 20;
  key.blue = 30;
  ExpectSameDecode(WritePng(w, h, 8, PNG_COLOR_TYPE_RGB, RandomRows(h, w * 3, 8), false, {}, {}, &key), true,
                   "RGB + tRNS");
  key.gray = 7;
  ExpectSameDecode(WritePng(w, h, 8, PNG_COLOR_TYPE_GRAY, RandomRows(h, w, 9), false, {}, {}, &key), true,
                   "gray + tRNS");
}

TEST(CodecTest, EncodersWriteOpenCvsBytes) {
  for (int type : {CV_8UC1, CV_8UC3}) {
    const cv::Mat m = Pattern(45, 67, type, 9);
    for (int quality : {90, 95}) {
      Result<std::string> jpeg = EncodeJpeg(m, quality);
      ASSERT_TRUE(jpeg.IsOk()) << jpeg.GetStatus().ToString();
      EXPECT_EQ(*jpeg, CvEncode(m, ".jpg", {cv::IMWRITE_JPEG_QUALITY, quality})) << type << " q" << quality;
    }
  }
  for (int type : {CV_8UC1, CV_8UC3, CV_8UC4}) {
    const cv::Mat m = Pattern(33, 41, type, 10);
    Result<std::string> png = EncodePng(m);
    ASSERT_TRUE(png.IsOk()) << png.GetStatus().ToString();
    EXPECT_EQ(*png, CvEncode(m, ".png")) << type;
    EXPECT_EQ(cv::norm(*DecodePng(*png), m, cv::NORM_INF), 0);
  }
  // A region of interest (rows not contiguous) encodes as its copy does.
  const cv::Mat big = Pattern(40, 60, CV_8UC3, 12);
  const cv::Mat roi = big(cv::Rect(5, 7, 31, 19));
  EXPECT_EQ(*EncodeJpeg(roi), *EncodeJpeg(roi.clone()));
  EXPECT_EQ(*EncodePng(roi), *EncodePng(roi.clone()));
}

TEST(CodecTest, BadInputIsAnErrorNotACrash) {
  const std::string jpeg = CvEncode(Pattern(16, 16, CV_8UC3, 1), ".jpg");
  Result<cv::Mat> r = DecodeJpeg(jpeg.substr(0, 2) + std::string(200, '\x55'));
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kCorruption);
  EXPECT_NE(r.GetStatus().Message().find("JPEG decoder: "), std::string::npos) << r.GetStatus().ToString();
  EXPECT_FALSE(DecodeJpeg("").IsOk());
  const std::string png = CvEncode(Pattern(16, 16, CV_8UC3, 1), ".png");
  r = DecodePng(png.substr(0, png.size() / 2));
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kCorruption);
  EXPECT_NE(r.GetStatus().Message().find("PNG decoder: "), std::string::npos) << r.GetStatus().ToString();
  std::string flipped = png;
  flipped[40] = static_cast<char>(flipped[40] ^ 0x5A);  // inside IDAT: a CRC or zlib error
  EXPECT_FALSE(DecodePng(flipped).IsOk());
  EXPECT_FALSE(DecodePng("\x89PNG\r\n\x1a\n").IsOk());

  EXPECT_EQ(EncodeJpeg(cv::Mat(4, 4, CV_8UC4)).GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeJpeg(cv::Mat(4, 4, CV_16UC3)).GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeJpeg(cv::Mat()).GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodeJpeg(cv::Mat(4, 4, CV_8UC3), 0).GetStatus().Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(EncodePng(cv::Mat(4, 4, CV_8UC2)).GetStatus().Code(), StatusCode::kInvalidArgument);
}

// Real photos: every coco128 image (skipped without ../shared).
TEST(CodecTest, Coco128PhotosDecodeAsOpenCvDoes) {
  const std::filesystem::path dir = std::filesystem::path(KESTREL_SHARED_DIR) / "datasets/coco128/images";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is absent";
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ExpectSameDecode(bytes, false, e.path().filename().string());
    ++n;
  }
  EXPECT_EQ(n, 128);
}

TEST(CodecTest, ThisBuildDecodesEveryFormat) { EXPECT_TRUE(DecodesEveryFormat()); }

}  // namespace
}  // namespace kestrel::data
