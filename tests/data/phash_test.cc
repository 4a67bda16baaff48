#include "data/phash.h"

#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "data/synth.h"

namespace kestrel::data {
namespace {

// Textured test pictures: synthetic scenes (noise background, lines, shapes).
std::vector<cv::Mat> Pictures(int count, uint64_t seed) {
  SynthOptions o;
  o.images = count;
  o.imgsz = 256;
  o.classes = 8;
  o.seed = seed;
  o.background_fraction = 0.25;
  std::vector<cv::Mat> out;
  for (int i = 0; i < count; ++i) {
    auto s = RenderSynthSample(o, i);
    EXPECT_TRUE(s.IsOk()) << s.GetStatus().ToString();
    out.push_back(s->image);
  }
  return out;
}

cv::Mat JpegRoundTrip(const cv::Mat& img, int quality) {
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(".jpg", img, buf, {cv::IMWRITE_JPEG_QUALITY, quality}));
  return cv::imdecode(buf, cv::IMREAD_COLOR);
}

TEST(HammingDistanceTest, CountsDifferingBits) {
  EXPECT_EQ(HammingDistance(0, 0), 0);
  EXPECT_EQ(HammingDistance(0, ~uint64_t{0}), 64);
  EXPECT_EQ(HammingDistance(0b1011, 0b0001), 2);
  EXPECT_EQ(HammingDistance(uint64_t{1} << 63, 0), 1);
}

TEST(PerceptualHashTest, EmptyImageHashesToZero) { EXPECT_EQ(PerceptualHash(cv::Mat()), 0u); }

TEST(PerceptualHashTest, DcBitIsMostSignificantAndSetForNonBlackImages) {
  for (const cv::Mat& img : Pictures(5, 3)) {
    EXPECT_NE(PerceptualHash(img) & (uint64_t{1} << 63), 0u);
  }
}

TEST(PerceptualHashTest, Deterministic) {
  const cv::Mat img = Pictures(1, 4)[0];
  EXPECT_EQ(PerceptualHash(img), PerceptualHash(img.clone()));
}

TEST(PerceptualHashTest, ChannelOrderAndAlphaDoNotMatter) {
  for (const cv::Mat& bgr : Pictures(5, 5)) {
    cv::Mat rgb, bgra;
    cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
    cv::cvtColor(bgr, bgra, cv::COLOR_BGR2BGRA);
    EXPECT_EQ(PerceptualHash(bgr), PerceptualHash(rgb));
    EXPECT_EQ(PerceptualHash(bgr), PerceptualHash(bgra));
  }
}

TEST(PerceptualHashTest, GrayInputMatchesEqualWeightGray) {
  const cv::Mat bgr = Pictures(1, 6)[0];
  cv::Mat f;
  bgr.convertTo(f, CV_32FC3);
  cv::Mat gray;
  cv::transform(f, gray, cv::Matx13f(1.f / 3, 1.f / 3, 1.f / 3));
  EXPECT_LE(HammingDistance(PerceptualHash(bgr), PerceptualHash(gray)), 1);
}

// The properties near-duplicate detection relies on; the thresholds in
// docs/datasets-extra.md come from here.
TEST(PerceptualHashTest, RobustToReencodeResizeAndBrightness) {
  const std::vector<cv::Mat> pics = Pictures(24, 7);
  int worst_jpeg = 0, worst_resize = 0, worst_bright = 0;
  for (const cv::Mat& img : pics) {
    const uint64_t h = PerceptualHash(img);
    cv::Mat half, bright;
    cv::resize(img, half, cv::Size(), 0.5, 0.5, cv::INTER_AREA);
    img.convertTo(bright, -1, 1.0, 12.0);
    worst_jpeg = std::max(worst_jpeg, HammingDistance(h, PerceptualHash(JpegRoundTrip(img, 70))));
    worst_resize = std::max(worst_resize, HammingDistance(h, PerceptualHash(half)));
    worst_bright = std::max(worst_bright, HammingDistance(h, PerceptualHash(bright)));
  }
  EXPECT_LE(worst_jpeg, 6);
  EXPECT_LE(worst_resize, 6);
  EXPECT_LE(worst_bright, 6);
  RecordProperty("worst_jpeg70", worst_jpeg);
  RecordProperty("worst_resize_half", worst_resize);
  RecordProperty("worst_brighten12", worst_bright);
}

TEST(PerceptualHashTest, UnrelatedImagesAreFarApart) {
  const std::vector<cv::Mat> pics = Pictures(24, 8);
  std::vector<uint64_t> h;
  for (const cv::Mat& img : pics) h.push_back(PerceptualHash(img));
  int closest = 64;
  double sum = 0;
  int pairs = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    for (size_t j = i + 1; j < h.size(); ++j) {
      const int d = HammingDistance(h[i], h[j]);
      closest = std::min(closest, d);
      sum += d;
      ++pairs;
    }
  }
  EXPECT_GE(closest, 14);
  EXPECT_GE(sum / pairs, 24.0);
  RecordProperty("closest_unrelated", closest);
  RecordProperty("mean_unrelated_x10", static_cast<int>(10 * sum / pairs));
}

}  // namespace
}  // namespace kestrel::data
