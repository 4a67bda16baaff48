#include "data/text_render.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <opencv2/imgproc.hpp>

#ifdef KESTREL_HAVE_FREETYPE
#include <opencv2/freetype.hpp>
#endif

#include "core/thread_annotations.h"

namespace kestrel::data {

namespace {

// DejaVu Sans metrics per em (hhea ascender 1901/2048, descender 483/2048),
// used for both fonts so a fallback keeps every layout in place.
constexpr double kAscent = 0.93;
constexpr double kDescent = 0.24;
// Hershey simplex capitals are ~22 px tall at scale 1; DejaVu's are 0.73 em.
constexpr double kHersheyScalePerPx = 0.73 / 22.0;

struct FontConfig {
  std::string regular = kDefaultFontFile;
  std::string bold = kDefaultBoldFontFile;
  uint64_t generation = 1;
};

Mutex g_mu;
FontConfig g_config GUARDED_BY(g_mu);
bool g_warned GUARDED_BY(g_mu) = false;
std::atomic<int> g_warnings{0};

FontConfig CurrentConfig() EXCLUDES(g_mu) {
  MutexLock lock(g_mu);
  return g_config;
}

void WarnOnce(const std::string& why) EXCLUDES(g_mu) {
  {
    MutexLock lock(g_mu);
    if (g_warned) return;
    g_warned = true;
  }
  g_warnings.fetch_add(1);
  spdlog::warn("text: {}; text falls back to OpenCV's Hershey font (install fonts-dejavu-core)", why);
}

#ifdef KESTREL_HAVE_FREETYPE
bool Readable(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return f.good();
}
#endif

// One thread's fonts, reloaded when the configuration generation changes.
struct ThreadFonts {
  uint64_t generation = 0;
#ifdef KESTREL_HAVE_FREETYPE
  cv::Ptr<cv::freetype::FreeType2> regular, bold;
#endif
  bool truetype = false;

  void Refresh() {
    const FontConfig cfg = CurrentConfig();
    if (cfg.generation == generation) return;
    generation = cfg.generation;
    truetype = false;
#ifdef KESTREL_HAVE_FREETYPE
    regular.release();
    bold.release();
    auto load = [](const std::string& path) -> cv::Ptr<cv::freetype::FreeType2> {
      if (path.empty() || !Readable(path)) return {};
      try {
        cv::Ptr<cv::freetype::FreeType2> f = cv::freetype::createFreeType2();
        f->loadFontData(path, 0);
        return f;
      } catch (const cv::Exception&) {
        return {};  // not a font FreeType can read
      }
    };
    regular = load(cfg.regular);
    if (!regular) {
      WarnOnce("cannot load font file " + cfg.regular);
      return;
    }
    if (!cfg.bold.empty()) bold = load(cfg.bold);
    if (!bold) bold = regular;  // bold is a nicety, regular is enough
    truetype = true;
#else
    WarnOnce("OpenCV was built without the freetype module");
#endif
  }
};

ThreadFonts& Fonts() {
  thread_local ThreadFonts fonts;
  fonts.Refresh();
  return fonts;
}

int Ascent(double px) { return int(std::lround(kAscent * px)); }
#ifdef KESTREL_HAVE_FREETYPE
int FontPx(double px) { return std::max(1, int(std::lround(px))); }
#endif

cv::Point AlignedTopLeft(cv::Point anchor, cv::Size box, HAlign h, VAlign v) {
  const int dx = h == HAlign::kLeft ? 0 : h == HAlign::kCenter ? box.width / 2 : box.width;
  const int dy = v == VAlign::kTop ? 0 : v == VAlign::kMiddle ? box.height / 2 : box.height;
  return anchor - cv::Point(dx, dy);
}

// Draws with the baseline at top_left.y + Ascent(px); `img` is 8-bit BGR.
void DrawBgr(cv::Mat& img, const std::string& text, cv::Point top_left, double px, const cv::Scalar& color,
             FontWeight weight) {
  ThreadFonts& f = Fonts();
  const cv::Point baseline(top_left.x, top_left.y + Ascent(px));
#ifdef KESTREL_HAVE_FREETYPE
  if (f.truetype) {
    cv::freetype::FreeType2& font = weight == FontWeight::kBold ? *f.bold : *f.regular;
    font.putText(img, text, baseline, FontPx(px), color, -1, cv::LINE_AA, true);
    return;
  }
#endif
  (void)f;
  cv::putText(img, text, baseline, cv::FONT_HERSHEY_SIMPLEX, px * kHersheyScalePerPx, color,
              weight == FontWeight::kBold ? 2 : 1, cv::LINE_AA);
}

// White-on-black coverage of `text` (its TextSize box), 8-bit BGR.
cv::Mat Coverage(const std::string& text, double px, FontWeight weight, cv::Size box) {
  cv::Mat m(std::max(1, box.height), std::max(1, box.width + 2), CV_8UC3, cv::Scalar::all(0));
  DrawBgr(m, text, cv::Point(1, 0), px, cv::Scalar::all(255), weight);
  return m;
}

// img = img * (1 - a) + color * a over `mask` (8-bit, 1 channel) placed at `at`.
void BlendMask(cv::Mat& img, const cv::Mat& mask, cv::Point at, const cv::Scalar& color) {
  const cv::Rect dst = cv::Rect(at, mask.size()) & cv::Rect(0, 0, img.cols, img.rows);
  if (dst.empty()) return;
  const int ch = img.channels();
  for (int y = dst.y; y < dst.y + dst.height; ++y) {
    uint8_t* row = img.ptr<uint8_t>(y);
    const uint8_t* m = mask.ptr<uint8_t>(y - at.y);
    for (int x = dst.x; x < dst.x + dst.width; ++x) {
      const int a = m[x - at.x];
      if (a == 0) continue;
      for (int c = 0; c < ch; ++c) {
        uint8_t& p = row[x * ch + c];
        p = uint8_t((p * (255 - a) + int(color[c]) * a + 127) / 255);
      }
    }
  }
}

}  // namespace

int LineHeight(double px) { return Ascent(px) + int(std::lround(kDescent * px)); }

cv::Size TextSize(const std::string& text, double px, FontWeight weight) {
  if (text.empty()) return cv::Size(0, LineHeight(px));
  ThreadFonts& f = Fonts();
  int width = 0;
#ifdef KESTREL_HAVE_FREETYPE
  if (f.truetype) {
    int base = 0;
    cv::freetype::FreeType2& font = weight == FontWeight::kBold ? *f.bold : *f.regular;
    width = font.getTextSize(text, FontPx(px), -1, &base).width;
  }
#endif
  if (!f.truetype) {
    int base = 0;
    width = cv::getTextSize(text, cv::FONT_HERSHEY_SIMPLEX, px * kHersheyScalePerPx,
                            weight == FontWeight::kBold ? 2 : 1, &base)
                .width;
  }
  return cv::Size(width, LineHeight(px));
}

void PutText(cv::Mat& img, const std::string& text, cv::Point anchor, double px, const cv::Scalar& color,
             FontWeight weight, HAlign h, VAlign v) {
  if (text.empty() || img.empty()) return;
  const cv::Size box = TextSize(text, px, weight);
  const cv::Point tl = AlignedTopLeft(anchor, box, h, v);
  if (img.type() == CV_8UC3) {
    DrawBgr(img, text, tl, px, color, weight);
    return;
  }
  cv::Mat mask;
  cv::extractChannel(Coverage(text, px, weight, box), mask, 0);
  BlendMask(img, mask, tl - cv::Point(1, 0), color);
}

void PutTextVertical(cv::Mat& img, const std::string& text, cv::Point anchor, double px,
                     const cv::Scalar& color, FontWeight weight, HAlign h, VAlign v) {
  if (text.empty() || img.empty()) return;
  const cv::Size box = TextSize(text, px, weight);
  cv::Mat mask, rotated;
  cv::extractChannel(Coverage(text, px, weight, box), mask, 0);
  cv::rotate(mask, rotated, cv::ROTATE_90_COUNTERCLOCKWISE);
  const cv::Point tl = AlignedTopLeft(anchor, cv::Size(box.height, box.width), h, v);
  BlendMask(img, rotated, tl - cv::Point(0, 1), color);
}

cv::Rect DrawBoxLabel(cv::Mat& img, const std::string& text, cv::Point corner, double px,
                      const cv::Scalar& color, int min_top) {
  const cv::Size sz = TextSize(text, px);
  const cv::Rect tab(corner.x, std::max(min_top, corner.y - sz.height), sz.width + 6, sz.height);
  cv::rectangle(img, tab, color, cv::FILLED);
  const double luma = 0.114 * color[0] + 0.587 * color[1] + 0.299 * color[2];
  PutText(img, text, cv::Point(tab.x + 3, tab.y), px, luma > 160 ? cv::Scalar::all(0) : cv::Scalar::all(255));
  return tab;
}

bool UsingTrueTypeFont() { return Fonts().truetype; }

bool TrueTypeBuiltIn() {
#ifdef KESTREL_HAVE_FREETYPE
  return true;
#else
  return false;
#endif
}

void SetFontFilesForTesting(const std::string& regular, const std::string& bold) {
  MutexLock lock(g_mu);
  g_config.regular = regular;
  g_config.bold = bold;
  ++g_config.generation;
  g_warned = false;
  g_warnings.store(0);
}

int FontWarningCount() { return g_warnings.load(); }

}  // namespace kestrel::data
