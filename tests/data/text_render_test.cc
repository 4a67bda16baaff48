// The shared text renderer (data/text_render.h) as the pictures outside
// src/eval use it: anti-aliased glyphs and the filled box caption that the
// dataset preview, the training batch mosaics and `kestrel predict` draw.
#include "data/text_render.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <opencv2/core.hpp>
#include <set>

namespace kestrel::data {
namespace {

bool DefaultFontUsable() {
  SetFontFilesForTesting(kDefaultFontFile, kDefaultBoldFontFile);
  return TrueTypeBuiltIn() && std::filesystem::exists(kDefaultFontFile) && UsingTrueTypeFont();
}

// Distinct values of channel 0 inside `r`.
std::set<int> Levels(const cv::Mat& img, cv::Rect r) {
  std::set<int> out;
  r &= cv::Rect(0, 0, img.cols, img.rows);
  for (int y = r.y; y < r.y + r.height; ++y) {
    for (int x = r.x; x < r.x + r.width; ++x) out.insert(img.at<cv::Vec3b>(y, x)[0]);
  }
  return out;
}

TEST(SharedTextRender, CaptionTextIsAntiAliased) {
  if (!DefaultFontUsable()) GTEST_SKIP() << "no freetype module or no " << kDefaultFontFile;
  cv::Mat img(60, 200, CV_8UC3, cv::Scalar::all(255));
  // A dark caption colour, so the text is white on it: a binary (aliased)
  // renderer would leave exactly two levels in the tab.
  const cv::Scalar blue(160, 40, 20);
  const cv::Rect tab = DrawBoxLabel(img, "person 0.87", cv::Point(10, 40), 14, blue);
  EXPECT_EQ(tab.y + tab.height, 40);  // bottom-left of the tab on the box corner
  EXPECT_EQ(tab.height, LineHeight(14));
  EXPECT_EQ(tab.width, TextSize("person 0.87", 14).width + 6);
  const std::set<int> levels = Levels(img, tab);
  EXPECT_TRUE(levels.count(160)) << "tab not filled with the caption colour";
  EXPECT_TRUE(levels.count(255)) << "no white text";
  EXPECT_GT(levels.size(), 4u) << "caption text is not anti-aliased";
  // Nothing drawn outside the tab.
  EXPECT_EQ(Levels(img, cv::Rect(0, 41, 200, 19)), std::set<int>{255});
}

TEST(SharedTextRender, CaptionMovesInsideWhenNoRoomAbove) {
  if (!DefaultFontUsable()) GTEST_SKIP() << "no freetype module or no " << kDefaultFontFile;
  cv::Mat img(80, 120, CV_8UC3, cv::Scalar::all(0));
  // Light colour: dark text on it.
  const cv::Rect tab = DrawBoxLabel(img, "dog", cv::Point(4, 6), 12, cv::Scalar(200, 230, 250), 2);
  EXPECT_EQ(tab.y, 2);
  const std::set<int> levels = Levels(img, tab);
  EXPECT_LT(*levels.begin(), 100) << "light caption colours get dark text";
  EXPECT_GT(levels.size(), 4u);
}

TEST(SharedTextRender, PlainTextIsAntiAliasedOnColourImages) {
  if (!DefaultFontUsable()) GTEST_SKIP() << "no freetype module or no " << kDefaultFontFile;
  cv::Mat img(40, 160, CV_8UC3, cv::Scalar::all(255));
  PutText(img, "images/0001.jpg", cv::Point(2, 2), 11, cv::Scalar::all(0));
  EXPECT_GT(Levels(img, cv::Rect(0, 0, 160, 40)).size(), 4u);
}

}  // namespace
}  // namespace kestrel::data
