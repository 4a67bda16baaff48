// The one text renderer behind every picture Kestrel draws: the eval plots
// and grids, the dataset preview (preview.cc), the training batch mosaics
// (train/progress.cc) and `kestrel predict`'s annotated images. It lives in
// src/data, the lowest module that may use OpenCV, so all of them can reach
// it; it is a pixel-level header (it exposes cv::Mat).
//
// Text is anti-aliased DejaVu Sans (Debian fonts-dejavu-core) drawn through
// OpenCV's freetype module (HarfBuzz shaping, so UTF-8 class names render).
// When the module is not built in or the font file cannot be loaded, text
// falls back to OpenCV's Hershey simplex font with the same metrics, and one
// spdlog warning is logged per process (never an error: pictures stay usable).
// Nothing is ever downloaded.
//
// Sizes: `px` is the font size in pixels (the em square; capitals are about
// 0.73 px tall). Every text occupies a box TextSize(text, px) =
// (advance width, LineHeight(px)) whose top-left is the anchor point moved
// by the alignment, so layouts do not depend on which glyphs a string has.
//
// Thread-safe: each thread keeps its own font objects.
#pragma once

#include <opencv2/core.hpp>
#include <string>

namespace kestrel::data {

enum class FontWeight { kRegular, kBold };
enum class HAlign { kLeft, kCenter, kRight };
enum class VAlign { kTop, kMiddle, kBottom };

// Line height in pixels for size `px`: ascent + descent of the font.
int LineHeight(double px);

// (width, LineHeight(px)) of `text` in pixels.
cv::Size TextSize(const std::string& text, double px, FontWeight weight = FontWeight::kRegular);

// Draws `text` on `img` (8-bit, 1 or 3 channels) so that its box is aligned
// to `anchor` (kLeft/kTop: the anchor is the box's top-left corner). Pixels
// outside the image are skipped.
void PutText(cv::Mat& img, const std::string& text, cv::Point anchor, double px, const cv::Scalar& color,
             FontWeight weight = FontWeight::kRegular, HAlign h = HAlign::kLeft, VAlign v = VAlign::kTop);

// Same, rotated 90 degrees counter-clockwise (reads bottom to top). The
// alignment applies to the rotated box (TextSize transposed).
void PutTextVertical(cv::Mat& img, const std::string& text, cv::Point anchor, double px,
                     const cv::Scalar& color, FontWeight weight = FontWeight::kRegular,
                     HAlign h = HAlign::kLeft, VAlign v = VAlign::kTop);

// A box's caption as detection pictures show it: `text` on a filled tab of
// `color` (TextSize plus 3 px each side) whose bottom-left corner is the box's
// top-left `corner`, moved down to `min_top` when there is no room above (the
// tab then covers the box's top edge). The text is dark on light colours and
// white on dark ones (BT.601 luma > 160). Returns the tab's rectangle.
cv::Rect DrawBoxLabel(cv::Mat& img, const std::string& text, cv::Point corner, double px,
                      const cv::Scalar& color, int min_top = 0);

// True when text is currently drawn with the TrueType font (false: Hershey).
bool UsingTrueTypeFont();
// True when this build has OpenCV's freetype module.
bool TrueTypeBuiltIn();

// Tests only: use these font files from now on (every thread reloads) and
// forget an earlier warning. Empty `bold` = use `regular` for bold too.
// FontWarningCount() counts fallback warnings since the last call.
void SetFontFilesForTesting(const std::string& regular, const std::string& bold);
int FontWarningCount();

// The default font files (Debian fonts-dejavu-core).
inline constexpr const char* kDefaultFontFile = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
inline constexpr const char* kDefaultBoldFontFile = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf";

}  // namespace kestrel::data
