// DecodeImage / ProbeImage: every image is generated in memory here.
#include "data/image.h"

#include <gtest/gtest.h>

#include <chrono>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <string>
#include <vector>

namespace kestrel::data {
namespace {

std::string Encode(const cv::Mat& m, const std::string& ext, std::vector<int> params = {}) {
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(ext, m, buf, params));
  return std::string(buf.begin(), buf.end());
}

// Big-endian helpers for hand-made headers.
void Put16BE(std::string* s, size_t at, uint32_t v) {
  (*s)[at] = static_cast<char>(v >> 8);
  (*s)[at + 1] = static_cast<char>(v & 0xFF);
}
void Put32BE(std::string* s, size_t at, uint32_t v) {
  Put16BE(s, at, v >> 16);
  Put16BE(s, at + 2, v & 0xFFFF);
}

// An APP1 Exif segment holding only IFD0 with Orientation (0x0112, SHORT).
std::string ExifApp1(int orientation, bool big_endian) {
  std::string tiff;
  auto u16 = [&](uint32_t v) {
    if (big_endian) {
      tiff += static_cast<char>(v >> 8);
      tiff += static_cast<char>(v & 0xFF);
    } else {
      tiff += static_cast<char>(v & 0xFF);
      tiff += static_cast<char>(v >> 8);
    }
  };
  auto u32 = [&](uint32_t v) {
    if (big_endian) {
      u16(v >> 16);
      u16(v & 0xFFFF);
    } else {
      u16(v & 0xFFFF);
      u16(v >> 16);
    }
  };
  tiff += big_endian ? std::string("MM\0*", 4) : std::string("II*\0", 4);
  u32(8);       // IFD0 offset
  u16(2);       // entries
  u16(0x010F);  // Make, ASCII, count 4 "Kes\0" inline: a tag we must skip
  u16(2);
  u32(4);
  tiff += std::string("Kes\0", 4);
  u16(0x0112);
  u16(3);
  u32(1);
  u16(static_cast<uint32_t>(orientation));
  u16(0);
  u32(0);  // no next IFD
  std::string payload = std::string("Exif\0\0", 6) + tiff;
  std::string seg = "\xFF\xE1";
  seg += static_cast<char>((payload.size() + 2) >> 8);
  seg += static_cast<char>((payload.size() + 2) & 0xFF);
  return seg + payload;
}

std::string WithExif(const std::string& jpeg, int orientation, bool big_endian) {
  return jpeg.substr(0, 2) + ExifApp1(orientation, big_endian) + jpeg.substr(2);
}

cv::Mat Noise(int w, int h) {
  cv::Mat m(h, w, CV_8UC3);
  cv::randu(m, 0, 255);
  return m;
}

// 3x2 blocks of 20x20 pixels, each a distinct BGR colour.
const cv::Vec3b kBlock[2][3] = {{{0, 0, 255}, {0, 255, 0}, {255, 0, 0}},
                                {{0, 255, 255}, {255, 0, 255}, {255, 255, 255}}};
cv::Mat Blocks() {
  cv::Mat m(40, 60, CV_8UC3);
  for (int r = 0; r < 40; ++r) {
    for (int c = 0; c < 60; ++c) m.at<cv::Vec3b>(r, c) = kBlock[r / 20][c / 20];
  }
  return m;
}

void ExpectNear(const cv::Vec3b& got, const cv::Vec3b& want, const std::string& where) {
  for (int k = 0; k < 3; ++k) {
    EXPECT_NEAR(got[k], want[k], 40) << where << " channel " << k;
  }
}

TEST(ImageTest, IsImageExtensionIsCaseInsensitive) {
  for (const char* e : {"jpg", "JPEG", ".png", "Bmp", "webp", "tif", "TIFF"}) {
    EXPECT_TRUE(IsImageExtension(e)) << e;
  }
  for (const char* e : {"txt", "gif", "", "jpgx", "xml"}) EXPECT_FALSE(IsImageExtension(e)) << e;
}

TEST(ImageTest, ProbeJpegReadsSofWithoutDecoding) {
  auto info = ProbeImage(Encode(Noise(40, 20), ".jpg"), "a.jpg");
  ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  EXPECT_EQ(info->format, "jpeg");
  EXPECT_EQ(info->width, 40);
  EXPECT_EQ(info->height, 20);
  EXPECT_EQ(info->channels, 3);
  EXPECT_EQ(info->bit_depth, 8);
  EXPECT_EQ(info->exif_orientation, 1);
  EXPECT_FALSE(info->is_gray);
}

TEST(ImageTest, ProgressiveJpegProbesAndDecodes) {
  std::string jpg = Encode(Noise(48, 32), ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1});
  ASSERT_NE(jpg.find("\xFF\xC2"), std::string::npos) << "encoder did not write SOF2";
  ImageInfo info;
  auto img = DecodeImage(jpg, "p.jpg", {}, &info);
  ASSERT_TRUE(img.IsOk()) << img.GetStatus().ToString();
  EXPECT_EQ(info.width, 48);
  EXPECT_EQ(img->cols, 48);
  EXPECT_EQ(img->rows, 32);
}

TEST(ImageTest, HandMadeCmykAndProgressiveHeaders) {
  // SOI, SOF2 (progressive) with 4 components, then a cut: the probe needs
  // headers only.
  std::string h("\xFF\xD8\xFF\xC2\x00\x14\x08\x00\x10\x00\x20\x04", 12);
  for (int c = 1; c <= 4; ++c) h += std::string{static_cast<char>(c), 0x11, 0x00};
  auto info = ProbeImage(h, "cmyk.jpg");
  ASSERT_TRUE(info.IsOk()) << info.GetStatus().ToString();
  EXPECT_TRUE(info->is_cmyk);
  EXPECT_EQ(info->channels, 4);
  EXPECT_EQ(info->width, 32);
  EXPECT_EQ(info->height, 16);
  auto findings = ImageInfoFindings(*info, "cmyk.jpg");
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].check, "image.cmyk");
  EXPECT_EQ(findings[0].action, "normalized to RGB");
  // ...and decoding it is refused as truncated, not attempted.
  auto img = DecodeImage(h, "cmyk.jpg");
  ASSERT_FALSE(img.IsOk());
  EXPECT_NE(img.GetStatus().Message().find("truncated JPEG"), std::string::npos);
}

TEST(ImageTest, DecodeReturnsRgbNotBgr) {
  cv::Mat bgr(8, 8, CV_8UC3, cv::Scalar(255, 0, 0));  // pure blue in BGR
  auto img = DecodeImage(Encode(bgr, ".png"), "blue.png");
  ASSERT_TRUE(img.IsOk());
  EXPECT_EQ(img->type(), CV_8UC3);
  EXPECT_EQ(img->at<cv::Vec3b>(0, 0), cv::Vec3b(0, 0, 255));
}

TEST(ImageTest, TruncatedJpegRejectedThoughImdecodeAcceptsIt) {
  std::string jpg = Encode(Noise(128, 128), ".jpg", {cv::IMWRITE_JPEG_QUALITY, 95});
  std::string cut = jpg.substr(0, jpg.size() / 2);
  // The reason for our own check: OpenCV returns a full-size image here.
  QuietImageCodecLogs();
  cv::Mat raw = cv::imdecode(std::vector<uchar>(cut.begin(), cut.end()), cv::IMREAD_COLOR);
  EXPECT_FALSE(raw.empty());
  auto img = DecodeImage(cut, "data/cut.jpg");
  ASSERT_FALSE(img.IsOk());
  EXPECT_EQ(img.GetStatus().Code(), StatusCode::kCorruption);
  EXPECT_EQ(img.GetStatus().Where().file, "data/cut.jpg");
  EXPECT_EQ(img.GetStatus().Message(), "truncated JPEG: no end-of-image marker");
}

TEST(ImageTest, JpegWithPaddingAfterEoiIsAccepted) {
  std::string jpg = Encode(Noise(32, 32), ".jpg") + std::string(100, '\0') + "trailing junk";
  auto img = DecodeImage(jpg, "pad.jpg");
  EXPECT_TRUE(img.IsOk()) << img.GetStatus().ToString();
}

TEST(ImageTest, ExifThumbnailEoiDoesNotHideTruncation) {
  // An APP1 segment containing FFD9 (like an embedded thumbnail) before the
  // scan: the main image is still cut.
  std::string jpg = Encode(Noise(64, 64), ".jpg");
  std::string app1 = "\xFF\xE1";
  std::string payload = std::string("Exif\0\0", 6) + "\xFF\xD8\xFF\xD9";
  app1 += static_cast<char>(0);
  app1 += static_cast<char>(payload.size() + 2);
  std::string with = jpg.substr(0, 2) + app1 + payload + jpg.substr(2);
  EXPECT_TRUE(DecodeImage(with, "t.jpg").IsOk());
  EXPECT_FALSE(DecodeImage(with.substr(0, with.size() - 200), "t.jpg").IsOk());
}

TEST(ImageTest, TruncatedPngRejected) {
  std::string png = Encode(Noise(64, 64), ".png");
  auto img = DecodeImage(png.substr(0, png.size() - 30), "cut.png");
  ASSERT_FALSE(img.IsOk());
  EXPECT_EQ(img.GetStatus().Message(), "truncated PNG: no IEND chunk");
}

TEST(ImageTest, DecompressionBombRejectedFromHeaderFast) {
  std::string png = Encode(Noise(4, 4), ".png");
  Put32BE(&png, 16, 60000);  // IHDR width
  Put32BE(&png, 20, 60000);  // IHDR height
  std::string jpg = Encode(Noise(8, 8), ".jpg");
  size_t sof = jpg.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  Put16BE(&jpg, sof + 5, 60000);  // height
  Put16BE(&jpg, sof + 7, 60000);  // width
  for (const auto& [bytes, name] : {std::pair{png, "bomb.png"}, std::pair{jpg, "bomb.jpg"}}) {
    auto t0 = std::chrono::steady_clock::now();
    auto img = DecodeImage(bytes, name);
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_FALSE(img.IsOk()) << name;
    EXPECT_EQ(img.GetStatus().Code(), StatusCode::kResourceExhausted);
    EXPECT_EQ(img.GetStatus().Message(),
              "image is 60000x60000 = 3.6e9 pixels, over the limit of 1e8 (decompression bomb)");
    EXPECT_EQ(img.GetStatus().Where().file, name);
    std::printf("[ bomb ] %s refused in %.2f ms\n", name, ms);  // a figure, not an assert (docs/testing.md)
  }
  // The probe itself still reports the claimed size.
  auto info = ProbeImage(png, "bomb.png");
  ASSERT_TRUE(info.IsOk());
  EXPECT_EQ(info->width, 60000);
}

TEST(ImageTest, MaxPixelsIsConfigurable) {
  std::string png = Encode(Noise(20, 10), ".png");
  EXPECT_FALSE(DecodeImage(png, "x.png", DecodeOptions{199}).IsOk());
  EXPECT_TRUE(DecodeImage(png, "x.png", DecodeOptions{200}).IsOk());
}

TEST(ImageTest, ZeroSizeRejected) {
  std::string png = Encode(Noise(4, 4), ".png");
  Put32BE(&png, 16, 0);
  auto img = DecodeImage(png, "zero.png");
  ASSERT_FALSE(img.IsOk());
  EXPECT_NE(img.GetStatus().Message().find("zero size"), std::string::npos);
}

TEST(ImageTest, UnknownFormatAndEmptyRejected) {
  auto a = DecodeImage("GIF89a......", "x.gif");
  ASSERT_FALSE(a.IsOk());
  EXPECT_NE(a.GetStatus().Message().find("unknown image format"), std::string::npos);
  EXPECT_FALSE(ProbeImage("", "e.jpg").IsOk());
}

TEST(ImageTest, ExifOrientation6RotatesNonSquareImage) {
  // Stored 60x40; the top-left block (red) must land top-right, the image
  // becomes 40 wide and 60 high.
  for (bool be : {true, false}) {
    std::string jpg = WithExif(Encode(Blocks(), ".jpg", {cv::IMWRITE_JPEG_QUALITY, 100}), 6, be);
    ImageInfo info;
    auto img = DecodeImage(jpg, "rot.jpg", {}, &info);
    ASSERT_TRUE(img.IsOk()) << img.GetStatus().ToString();
    EXPECT_EQ(info.exif_orientation, 6) << (be ? "MM" : "II");
    EXPECT_EQ(info.stored_width, 60);
    EXPECT_EQ(info.width, 40);
    EXPECT_EQ(info.height, 60);
    ASSERT_EQ(img->cols, 40);
    ASSERT_EQ(img->rows, 60);
    ExpectNear(img->at<cv::Vec3b>(10, 30), cv::Vec3b(255, 0, 0), "top-right is red (RGB)");
    ExpectNear(img->at<cv::Vec3b>(10, 10), cv::Vec3b(255, 255, 0), "top-left is yellow");
    auto findings = ImageInfoFindings(info, "rot.jpg");
    ASSERT_EQ(findings.size(), 1u);
    EXPECT_EQ(findings[0].check, "image.exif_orientation");
    EXPECT_EQ(findings[0].action, "rotated per EXIF");
    EXPECT_EQ(findings[0].file, "rot.jpg");
  }
}

TEST(ImageTest, AllEightExifOrientations) {
  std::string base = Encode(Blocks(), ".jpg", {cv::IMWRITE_JPEG_QUALITY, 100});
  const int W = 60, H = 40;
  for (int o = 1; o <= 8; ++o) {
    auto img = DecodeImage(WithExif(base, o, o % 2 == 0), "o.jpg");
    ASSERT_TRUE(img.IsOk()) << o;
    bool swap = o >= 5;
    ASSERT_EQ(img->cols, swap ? H : W) << o;
    ASSERT_EQ(img->rows, swap ? W : H) << o;
    // EXIF 2.32 meaning of each value, as "displayed (r, c) comes from stored (sr, sc)".
    for (int r = 10; r < img->rows; r += 20) {
      for (int c = 10; c < img->cols; c += 20) {
        int sr = r, sc = c;
        switch (o) {
          case 2:
            sc = W - 1 - c;
            break;
          case 3:
            sr = H - 1 - r, sc = W - 1 - c;
            break;
          case 4:
            sr = H - 1 - r;
            break;
          case 5:
            sr = c, sc = r;
            break;
          case 6:
            sr = H - 1 - c, sc = r;
            break;
          case 7:
            sr = H - 1 - c, sc = W - 1 - r;
            break;
          case 8:
            sr = c, sc = W - 1 - r;
            break;
          default:
            break;
        }
        cv::Vec3b bgr = kBlock[sr / 20][sc / 20];
        ExpectNear(img->at<cv::Vec3b>(r, c), cv::Vec3b(bgr[2], bgr[1], bgr[0]),
                   "orientation " + std::to_string(o) + " at " + std::to_string(r) + "," + std::to_string(c));
      }
    }
  }
}

TEST(ImageTest, SixteenBitPngBecomesEightBitRgb) {
  cv::Mat m(6, 6, CV_16UC3, cv::Scalar(257 * 10, 257 * 20, 257 * 200));  // BGR
  ImageInfo info;
  auto img = DecodeImage(Encode(m, ".png"), "deep.png", {}, &info);
  ASSERT_TRUE(img.IsOk());
  EXPECT_EQ(info.bit_depth, 16);
  EXPECT_EQ(img->type(), CV_8UC3);
  EXPECT_EQ(img->at<cv::Vec3b>(3, 3), cv::Vec3b(200, 20, 10));
  auto f = ImageInfoFindings(info, "deep.png");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, "image.16bit");
  EXPECT_EQ(f[0].severity, Severity::kInfo);
  EXPECT_EQ(f[0].action, "normalized to RGB");
}

TEST(ImageTest, GrayPngBecomesThreeChannels) {
  cv::Mat m(5, 7, CV_8UC1, cv::Scalar(77));
  ImageInfo info;
  auto img = DecodeImage(Encode(m, ".png"), "g.png", {}, &info);
  ASSERT_TRUE(img.IsOk());
  EXPECT_TRUE(info.is_gray);
  EXPECT_EQ(info.channels, 1);
  EXPECT_EQ(img->type(), CV_8UC3);
  EXPECT_EQ(img->at<cv::Vec3b>(2, 2), cv::Vec3b(77, 77, 77));
  auto f = ImageInfoFindings(info, "g.png");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, "image.grayscale");
}

TEST(ImageTest, GrayJpegBecomesThreeChannels) {
  cv::Mat m(16, 16, CV_8UC1, cv::Scalar(128));
  ImageInfo info;
  auto img = DecodeImage(Encode(m, ".jpg"), "g.jpg", {}, &info);
  ASSERT_TRUE(img.IsOk());
  EXPECT_TRUE(info.is_gray);
  EXPECT_EQ(img->channels(), 3);
}

TEST(ImageTest, RgbaPngDropsAlpha) {
  cv::Mat m(4, 4, CV_8UC4, cv::Scalar(10, 20, 30, 0));  // BGRA, fully transparent
  ImageInfo info;
  auto img = DecodeImage(Encode(m, ".png"), "a.png", {}, &info);
  ASSERT_TRUE(img.IsOk());
  EXPECT_TRUE(info.has_alpha);
  EXPECT_EQ(img->type(), CV_8UC3);
  EXPECT_EQ(img->at<cv::Vec3b>(0, 0), cv::Vec3b(30, 20, 10));
  auto f = ImageInfoFindings(info, "a.png");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].check, "image.alpha");
}

TEST(ImageTest, BmpProbeAndDecode) {
  ImageInfo info;
  auto img = DecodeImage(Encode(Noise(9, 5), ".bmp"), "x.bmp", {}, &info);
  ASSERT_TRUE(img.IsOk()) << img.GetStatus().ToString();
  EXPECT_EQ(info.format, "bmp");
  EXPECT_EQ(info.width, 9);
  EXPECT_EQ(info.height, 5);
}

TEST(ImageTest, WebpLossyAndLosslessProbe) {
  if (!cv::haveImageWriter(".webp")) GTEST_SKIP() << "OpenCV built without WebP";
  for (int q : {80, 101}) {  // 101 = lossless (VP8L)
    ImageInfo info;
    auto img =
        DecodeImage(Encode(Noise(30, 14), ".webp", {cv::IMWRITE_WEBP_QUALITY, q}), "x.webp", {}, &info);
    ASSERT_TRUE(img.IsOk()) << q << ": " << img.GetStatus().ToString();
    EXPECT_EQ(info.format, "webp");
    EXPECT_EQ(info.width, 30) << q;
    EXPECT_EQ(info.height, 14) << q;
  }
}

TEST(ImageTest, TiffProbeAndDecode) {
  if (!cv::haveImageWriter(".tiff")) GTEST_SKIP() << "OpenCV built without TIFF";
  ImageInfo info;
  auto img = DecodeImage(Encode(Noise(11, 7), ".tiff"), "x.tiff", {}, &info);
  ASSERT_TRUE(img.IsOk()) << img.GetStatus().ToString();
  EXPECT_EQ(info.format, "tiff");
  EXPECT_EQ(info.width, 11);
  EXPECT_EQ(info.height, 7);
}

TEST(ImageTest, GarbageAfterHeadersIsAnErrorNotACrash) {
  std::string jpg = Encode(Noise(32, 32), ".jpg");
  size_t sos = jpg.find("\xFF\xDA");
  ASSERT_NE(sos, std::string::npos);
  std::string broken = jpg;
  for (size_t i = sos + 20; i < broken.size() - 2; i += 7) broken[i] = '\xFF';
  auto img = DecodeImage(broken, "broken.jpg");  // any answer is fine; no crash, no throw
  (void)img;
  SUCCEED();
}

}  // namespace
}  // namespace kestrel::data
