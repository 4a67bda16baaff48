// Pixel/label alignment of augmented train samples: every source image holds
// one sharp-edged rectangle whose label is exact, so after resize-on-load,
// letterbox or mosaic, random affine and flips the rectangle found in the
// output pixels must sit where the output label says. Loader statistics
// (LoaderStatsTest) cannot see a 1-2 px shift or a stretch between pixels and
// labels; box, cls (IoU-aware targets) and DFL losses all pay for one. See
// docs/training.md, "Closed-mosaic phase: what was checked and ruled out".
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <utility>
#include <vector>

#include "core/hash.h"
#include "data/augment.h"
#include "data/loader.h"

namespace kestrel::data {
namespace {

// Background equals the letterbox/affine pad gray, so only the rectangle
// differs from it, and only in the red channel: red - 114 is, after any
// bilinear resampling, proportional to how much of a pixel the rectangle
// covers.
constexpr int kBackground = kPadGray;
constexpr int kRed = 250;

struct RectData {
  Manifest manifest;
  std::map<std::string, std::string> bytes;
  ImageSource Source() const {
    return [this](const ManifestEntry& e) -> Result<std::string> {
      auto it = bytes.find(e.path);
      if (it == bytes.end()) return Status::NotFound("no such image", {e.path});
      return it->second;
    };
  }
};

// `n` images of independent widths and heights in [180, 1400] px (shrunk
// up to 4.4x and enlarged up to 1.8x at imgsz 320), each with one rectangle
// at integer pixel edges, 30-80% of each side, at least 8% from the borders.
RectData MakeRects(int n) {
  RectData d;
  d.manifest.names = {"rect"};
  Rng rng(SeedFrom({7, 0xA119}));
  for (int i = 0; i < n; ++i) {
    const int w = 180 + static_cast<int>(rng.Below(1221)), h = 180 + static_cast<int>(rng.Below(1221));
    const int rw = static_cast<int>(w * rng.Uniform(0.3, 0.8)),
              rh = static_cast<int>(h * rng.Uniform(0.3, 0.8));
    const int mx = static_cast<int>(std::ceil(0.08 * w)), my = static_cast<int>(std::ceil(0.08 * h));
    const int x0 = mx + static_cast<int>(rng.Below(static_cast<uint64_t>(std::max(1, w - rw - 2 * mx))));
    const int y0 = my + static_cast<int>(rng.Below(static_cast<uint64_t>(std::max(1, h - rh - 2 * my))));
    cv::Mat bgr(h, w, CV_8UC3, cv::Scalar(kBackground, kBackground, kBackground));
    bgr(cv::Rect(x0, y0, rw, rh)).setTo(cv::Scalar(kBackground, kBackground, kRed));
    std::vector<uint8_t> buf;
    cv::imencode(".png", bgr, buf);
    ManifestEntry e;
    e.path = "rect" + std::to_string(i) + ".png";
    e.image_sha = Sha256Hex(std::string(buf.begin(), buf.end()));
    e.width = w;
    e.height = h;
    e.boxes = {Box{0, (x0 + rw / 2.0) / w, (y0 + rh / 2.0) / h, static_cast<double>(rw) / w,
                   static_cast<double>(rh) / h}};
    d.bytes[e.path] = std::string(buf.begin(), buf.end());
    d.manifest.entries.push_back(std::move(e));
  }
  return d;
}

// Signed edge errors (found in pixels - label), in output pixels.
struct EdgeErrors {
  std::vector<double> x1, y1, x2, y2;
  int boxes = 0;
};

// Finds the rectangle inside the label box grown by 3 px: its centroid, and
// its width/height as the median of the full row/column coverage sums (rows
// crossing a partial top or bottom edge are left out by the median).
void MeasureBox(const Batch& b, int i, float cx, float cy, float bw, float bh, EdgeErrors& err) {
  const int W = b.width, H = b.height;
  const double lx1 = (cx - bw / 2) * W, lx2 = (cx + bw / 2) * W;
  const double ly1 = (cy - bh / 2) * H, ly2 = (cy + bh / 2) * H;
  const int wx1 = std::max(0, static_cast<int>(std::floor(lx1)) - 3);
  const int wx2 = std::min(W, static_cast<int>(std::ceil(lx2)) + 3);
  const int wy1 = std::max(0, static_cast<int>(std::floor(ly1)) - 3);
  const int wy2 = std::min(H, static_cast<int>(std::ceil(ly2)) + 3);
  const float* red = b.images.data() + static_cast<size_t>(i) * 3 * H * W;
  std::vector<double> rows(static_cast<size_t>(wy2 - wy1), 0.0), cols(static_cast<size_t>(wx2 - wx1), 0.0);
  double sum = 0, sx = 0, sy = 0;
  for (int y = wy1; y < wy2; ++y) {
    for (int x = wx1; x < wx2; ++x) {
      const double c =
          std::max(0.0, (red[static_cast<size_t>(y) * W + x] * 255.0 - kBackground) / (kRed - kBackground));
      rows[y - wy1] += c;
      cols[x - wx1] += c;
      sum += c;
      sx += c * (x + 0.5);
      sy += c * (y + 0.5);
    }
  }
  if (sum < 1) return;
  auto full_median = [](std::vector<double> v) {
    const double top = *std::max_element(v.begin(), v.end());
    std::erase_if(v, [&](double s) { return s < 0.5 * top; });
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double fw = full_median(rows), fh = full_median(cols);
  const double fcx = sx / sum, fcy = sy / sum;
  err.x1.push_back((fcx - fw / 2) - lx1);
  err.x2.push_back((fcx + fw / 2) - lx2);
  err.y1.push_back((fcy - fh / 2) - ly1);
  err.y2.push_back((fcy + fh / 2) - ly2);
  ++err.boxes;
}

EdgeErrors Measure(const RectData& d, int imgsz, const AugmentOptions& aug, int epochs, int first_epoch) {
  LoaderOptions o;
  o.imgsz = imgsz;
  o.batch = 8;
  o.workers = 2;
  o.prefetch = 2;
  o.epochs = epochs;
  auto loader = Loader::Create(d.manifest, Split::kTrain, d.Source(), o, aug);
  EXPECT_TRUE(loader.IsOk()) << loader.GetStatus().ToString();
  EdgeErrors err;
  if (!loader.IsOk()) return err;
  for (int ep = first_epoch; ep < epochs; ++ep) {
    EXPECT_TRUE((*loader)->StartEpoch(ep).IsOk());
    for (;;) {
      auto next = (*loader)->Next();
      EXPECT_TRUE(next.IsOk()) << next.GetStatus().ToString();
      if (!next.IsOk() || !next->has_value()) break;
      const Batch& b = **next;
      for (size_t r = 0; r + 6 <= b.targets.size(); r += 6) {
        const float* t = b.targets.data() + r;
        // Boxes of a few pixels say nothing about sub-pixel alignment.
        if (t[4] * b.width < 12 || t[5] * b.height < 12) continue;
        MeasureBox(b, static_cast<int>(t[0]), t[2], t[3], t[4], t[5], err);
      }
    }
  }
  return err;
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}
double MeanAbs(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += std::abs(x);
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}
double MaxAbs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

void Report(const char* name, const EdgeErrors& e) {
  std::printf("%s: %d boxes\n  edge  mean(found-label)  mean|.|   max|.|  (px)\n", name, e.boxes);
  const std::pair<const char*, const std::vector<double>*> edges[] = {
      {"x1", &e.x1}, {"y1", &e.y1}, {"x2", &e.x2}, {"y2", &e.y2}};
  for (const auto& [n, v] : edges) {
    std::printf("  %-4s  %+10.3f  %10.3f  %8.3f\n", n, Mean(*v), MeanAbs(*v), MaxAbs(*v));
  }
}

// Bilinear resampling of a 4.4x shrink aliases a sharp edge by up to half an
// output pixel per sample, so single boxes get a 1 px allowance; a systematic
// shift or stretch shows in the means, which must stay near zero.
void ExpectAligned(const EdgeErrors& e) {
  ASSERT_GT(e.boxes, 50);
  for (const auto* v : {&e.x1, &e.y1, &e.x2, &e.y2}) {
    EXPECT_LT(std::abs(Mean(*v)), 0.1);
    EXPECT_LT(MeanAbs(*v), 0.3);
    EXPECT_LT(MaxAbs(*v), 1.0);
  }
}

AugmentOptions NoColor() {
  AugmentOptions a;  // reference defaults: translate 0.1, scale 0.5, fliplr 0.5
  a.hsv_h = a.hsv_s = a.hsv_v = 0;
  return a;
}

TEST(LoaderAlignmentTest, ClosedMosaicSamplesKeepPixelsAndLabelsTogether) {
  const RectData d = MakeRects(24);
  AugmentOptions a = NoColor();
  a.close_mosaic = 4;  // every epoch below is a closed-mosaic one
  const EdgeErrors e = Measure(d, 320, a, 4, 0);
  Report("closed mosaic (letterbox + affine)", e);
  ExpectAligned(e);
}

TEST(LoaderAlignmentTest, MosaicSamplesKeepPixelsAndLabelsTogether) {
  const RectData d = MakeRects(24);
  AugmentOptions a = NoColor();
  a.close_mosaic = 0;
  const EdgeErrors e = Measure(d, 320, a, 3, 0);
  Report("mosaic", e);
  ExpectAligned(e);
}

}  // namespace
}  // namespace kestrel::data
