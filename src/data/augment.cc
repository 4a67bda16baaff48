#include "data/augment.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>

namespace kestrel::data {

// ---------------------------------------------------------------------------
// Options

void AugmentOptions::Bind(OptionSet& s) {
  s.Float("hsv_h", &hsv_h, "image HSV-Hue augmentation (fraction)", Range::Closed(0, 1));
  s.Float("hsv_s", &hsv_s, "image HSV-Saturation augmentation (fraction)", Range::Closed(0, 1));
  s.Float("hsv_v", &hsv_v, "image HSV-Value augmentation (fraction)", Range::Closed(0, 1));
  s.Float("degrees", &degrees, "image rotation (+/- deg)", Range::Closed(0, 180));
  // Open ends: a translation of half the image or a zoom of 1 +- 1 can move
  // every box out of (or shrink it to nothing in) the output; tan(90 deg)
  // is infinite.
  s.Float("translate", &translate, "image translation (+/- fraction)", Range::ClosedOpen(0, 0.5));
  s.Float("scale", &scale, "image scale (+/- gain)", Range::ClosedOpen(0, 1));
  s.Float("shear", &shear, "image shear (+/- deg)", Range::ClosedOpen(0, 90));
  s.Float("perspective", &perspective, "image perspective (+/- fraction)", Range::Closed(0, 0.001));
  s.Float("flipud", &flipud, "image flip up-down (probability)", Range::Closed(0, 1));
  s.Float("fliplr", &fliplr, "image flip left-right (probability)", Range::Closed(0, 1));
  s.Float("mosaic", &mosaic, "image mosaic (probability)", Range::Closed(0, 1));
  s.Float("mixup", &mixup, "image mixup (probability)", Range::Closed(0, 1));
  s.Int("close_mosaic", &close_mosaic,
        "disable mosaic for the final N epochs (a run of fewer than N epochs keeps mosaic throughout, as the "
        "reference)",
        0);
  s.Bool("multi_scale", &multi_scale, "vary the train image size +/- 50% per batch");
}

Status AugmentOptions::Validate() const { return CheckBoundValues(*this); }

// ---------------------------------------------------------------------------
// Randomness

namespace {
constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
uint64_t Finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
}  // namespace

uint64_t Mix64(uint64_t x) { return Finalize(x + kGolden); }

uint64_t SeedFrom(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x6B657374'72656C00ULL;  // "kestrel\0"
  uint64_t i = 0;
  for (uint64_t p : parts) h = Mix64(h ^ Mix64(p + kGolden * ++i));
  return h;
}

uint64_t Rng::NextU64() {
  state_ += kGolden;
  return Finalize(state_);
}

double Rng::Uniform() { return static_cast<double>(NextU64() >> 11) * 0x1.0p-53; }

uint64_t Rng::Below(uint64_t n) {
  unsigned __int128 m = static_cast<unsigned __int128>(NextU64()) * n;
  auto low = static_cast<uint64_t>(m);
  if (low < n) {
    uint64_t threshold = (0 - n) % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(NextU64()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double Rng::Normal() {
  double u1 = 1.0 - Uniform();  // (0, 1]
  double u2 = Uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double Rng::Gamma(double shape) {
  if (shape < 1.0) {
    double u = 1.0 - Uniform();
    return Gamma(shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x = Normal();
    double v = 1.0 + c * x;
    if (v <= 0) continue;
    v = v * v * v;
    double u = 1.0 - Uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

double Rng::Beta(double a, double b) {
  double x = Gamma(a);
  double y = Gamma(b);
  return x / (x + y);
}

// ---------------------------------------------------------------------------
// Boxes

std::vector<PixelBox> BoxesToPixels(const std::vector<Box>& boxes, int w, int h) {
  std::vector<PixelBox> out;
  out.reserve(boxes.size());
  for (const Box& b : boxes) {
    PixelBox p;
    p.cls = b.cls;
    p.x1 = (b.cx - b.w / 2) * w;
    p.y1 = (b.cy - b.h / 2) * h;
    p.x2 = (b.cx + b.w / 2) * w;
    p.y2 = (b.cy + b.h / 2) * h;
    out.push_back(p);
  }
  return out;
}

std::vector<Box> BoxesToNormalized(const std::vector<PixelBox>& boxes, int w, int h) {
  std::vector<Box> out;
  out.reserve(boxes.size());
  for (const PixelBox& p : boxes) {
    Box b;
    b.cls = p.cls;
    b.cx = (p.x1 + p.x2) / 2 / w;
    b.cy = (p.y1 + p.y2) / 2 / h;
    b.w = (p.x2 - p.x1) / w;
    b.h = (p.y2 - p.y1) / h;
    out.push_back(b);
  }
  return out;
}

// ---------------------------------------------------------------------------
// Geometry

void ResizeLongSide(AugSample& s, int imgsz) {
  const int w = s.image.cols, h = s.image.rows;
  const double r = static_cast<double>(imgsz) / std::max(w, h);
  if (r == 1.0) return;
  // The reference trainer's load rule: ceil of the scaled size, capped at
  // imgsz, and bilinear both ways. INTER_AREA (used here before) low-passes
  // big photos (2000 px -> 320 px averages 6x6 blocks) that the reference
  // trains on aliased-sharp; see docs/training.md, "Resize on load".
  const int nw = std::clamp(static_cast<int>(std::ceil(w * r)), 1, imgsz);
  const int nh = std::clamp(static_cast<int>(std::ceil(h * r)), 1, imgsz);
  cv::Mat out;
  cv::resize(s.image, out, cv::Size(nw, nh), 0, 0, cv::INTER_LINEAR);
  s.image = out;
  const double sx = static_cast<double>(nw) / w, sy = static_cast<double>(nh) / h;
  for (PixelBox& b : s.boxes) {
    b.x1 *= sx;
    b.x2 *= sx;
    b.y1 *= sy;
    b.y2 *= sy;
  }
}

LetterboxInfo Letterbox(AugSample& s, int out_w, int out_h) {
  const int w = s.image.cols, h = s.image.rows;
  LetterboxInfo info;
  info.scale = std::min(static_cast<double>(out_w) / w, static_cast<double>(out_h) / h);
  const int nw = std::clamp(static_cast<int>(std::lround(w * info.scale)), 1, out_w);
  const int nh = std::clamp(static_cast<int>(std::lround(h * info.scale)), 1, out_h);
  info.pad_x = (out_w - nw) / 2;
  info.pad_y = (out_h - nh) / 2;
  cv::Mat out(out_h, out_w, CV_8UC3, cv::Scalar(kPadGray, kPadGray, kPadGray));
  cv::Mat roi = out(cv::Rect(info.pad_x, info.pad_y, nw, nh));
  if (nw == w && nh == h) {
    s.image.copyTo(roi);
  } else {
    cv::resize(s.image, roi, cv::Size(nw, nh), 0, 0, info.scale < 1 ? cv::INTER_AREA : cv::INTER_LINEAR);
  }
  s.image = out;
  for (PixelBox& b : s.boxes) {
    b.x1 = b.x1 * info.scale + info.pad_x;
    b.x2 = b.x2 * info.scale + info.pad_x;
    b.y1 = b.y1 * info.scale + info.pad_y;
    b.y2 = b.y2 * info.scale + info.pad_y;
  }
  return info;
}

AugSample Mosaic4(const std::array<const AugSample*, 4>& parts, int imgsz, Rng& rng) {
  const int s = imgsz, S = 2 * imgsz;
  // Center in [s/2, 3s/2), integer so pixels and boxes shift by the same amount.
  const int xc = static_cast<int>(rng.Uniform(s / 2.0, 1.5 * s));
  const int yc = static_cast<int>(rng.Uniform(s / 2.0, 1.5 * s));
  AugSample out;
  out.image = cv::Mat(S, S, CV_8UC3, cv::Scalar(kPadGray, kPadGray, kPadGray));
  for (int i = 0; i < 4; ++i) {
    const AugSample& p = *parts[i];
    const int w = p.image.cols, h = p.image.rows;
    int x1a, y1a, x2a, y2a, x1b, y1b, x2b, y2b;  // a: canvas, b: part
    if (i == 0) {
      x1a = std::max(xc - w, 0), y1a = std::max(yc - h, 0), x2a = xc, y2a = yc;
      x1b = w - (x2a - x1a), y1b = h - (y2a - y1a), x2b = w, y2b = h;
    } else if (i == 1) {
      x1a = xc, y1a = std::max(yc - h, 0), x2a = std::min(xc + w, S), y2a = yc;
      x1b = 0, y1b = h - (y2a - y1a), x2b = std::min(w, x2a - x1a), y2b = h;
    } else if (i == 2) {
      x1a = std::max(xc - w, 0), y1a = yc, x2a = xc, y2a = std::min(S, yc + h);
      x1b = w - (x2a - x1a), y1b = 0, x2b = w, y2b = std::min(y2a - y1a, h);
    } else {
      x1a = xc, y1a = yc, x2a = std::min(xc + w, S), y2a = std::min(S, yc + h);
      x1b = 0, y1b = 0, x2b = std::min(w, x2a - x1a), y2b = std::min(y2a - y1a, h);
    }
    if (x2a > x1a && y2a > y1a) {
      p.image(cv::Rect(x1b, y1b, x2b - x1b, y2b - y1b))
          .copyTo(out.image(cv::Rect(x1a, y1a, x2a - x1a, y2a - y1a)));
    }
    const double padw = x1a - x1b, padh = y1a - y1b;
    // Boxes keep only what is visible in this quadrant's pasted region.
    for (PixelBox b : p.boxes) {
      b.x1 = std::clamp(b.x1 + padw, static_cast<double>(x1a), static_cast<double>(x2a));
      b.x2 = std::clamp(b.x2 + padw, static_cast<double>(x1a), static_cast<double>(x2a));
      b.y1 = std::clamp(b.y1 + padh, static_cast<double>(y1a), static_cast<double>(y2a));
      b.y2 = std::clamp(b.y2 + padh, static_cast<double>(y1a), static_cast<double>(y2a));
      if (b.x2 > b.x1 && b.y2 > b.y1) out.boxes.push_back(b);
    }
  }
  return out;
}

namespace {
using Mat3 = Homography;
Mat3 Mul(const Mat3& a, const Mat3& b) {
  Mat3 c{};
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) c[i * 3 + j] += a[i * 3 + k] * b[k * 3 + j];
  return c;
}
Mat3 Translation(double tx, double ty) { return {1, 0, tx, 0, 1, ty, 0, 0, 1}; }
bool IsAffine(const Mat3& m) { return m[6] == 0 && m[7] == 0 && m[8] == 1; }
}  // namespace

Homography RandomPerspectiveMatrix(const AugmentOptions& o, int in_w, int in_h, int out_w, int out_h,
                                   Rng& rng, double* zoom) {
  const double deg2rad = std::numbers::pi / 180.0;
  Mat3 C = Translation(-in_w / 2.0, -in_h / 2.0);
  Mat3 P = Translation(0, 0);
  P[6] = rng.Uniform(-o.perspective, o.perspective);
  P[7] = rng.Uniform(-o.perspective, o.perspective);
  const double a = rng.Uniform(-o.degrees, o.degrees) * deg2rad;
  const double s = rng.Uniform(1 - o.scale, 1 + o.scale);
  // Same orientation as cv::getRotationMatrix2D (positive angle = counter-clockwise on screen).
  Mat3 R = {s * std::cos(a), s * std::sin(a), 0, -s * std::sin(a), s * std::cos(a), 0, 0, 0, 1};
  Mat3 S = Translation(0, 0);
  S[1] = std::tan(rng.Uniform(-o.shear, o.shear) * deg2rad);
  S[3] = std::tan(rng.Uniform(-o.shear, o.shear) * deg2rad);
  Mat3 T = Translation(rng.Uniform(0.5 - o.translate, 0.5 + o.translate) * out_w,
                       rng.Uniform(0.5 - o.translate, 0.5 + o.translate) * out_h);
  if (zoom != nullptr) *zoom = s;
  return Mul(T, Mul(S, Mul(R, Mul(P, C))));
}

bool BoxSurvives(const PixelBox& before, const PixelBox& after, double zoom) {
  constexpr double kEps = 1e-16;
  const double w1 = (before.x2 - before.x1) * zoom, h1 = (before.y2 - before.y1) * zoom;
  const double w2 = after.x2 - after.x1, h2 = after.y2 - after.y1;
  const double ar = std::max(w2 / (h2 + kEps), h2 / (w2 + kEps));
  return w2 > 2 && h2 > 2 && w2 * h2 / (w1 * h1 + kEps) > 0.1 && ar < 100;
}

namespace {
struct Pt {
  double x, y;
};
// Sutherland-Hodgman: keeps the part of convex polygon `in` where
// sign * (coord - limit) <= 0 on axis `axis` (0 = x, 1 = y).
std::vector<Pt> ClipHalfPlane(const std::vector<Pt>& in, int axis, double limit, double sign) {
  std::vector<Pt> out;
  auto value = [&](const Pt& p) { return sign * ((axis == 0 ? p.x : p.y) - limit); };
  for (size_t i = 0; i < in.size(); ++i) {
    const Pt& a = in[i];
    const Pt& b = in[(i + 1) % in.size()];
    const double va = value(a), vb = value(b);
    if (va <= 0) out.push_back(a);
    if ((va < 0 && vb > 0) || (va > 0 && vb < 0)) {
      const double t = va / (va - vb);
      out.push_back({a.x + t * (b.x - a.x), a.y + t * (b.y - a.y)});
    }
  }
  return out;
}
}  // namespace

std::vector<PixelBox> TransformBoxes(const std::vector<PixelBox>& boxes, const Homography& m, int out_w,
                                     int out_h, double zoom) {
  std::vector<PixelBox> out;
  out.reserve(boxes.size());
  for (const PixelBox& b : boxes) {
    const double xs[4] = {b.x1, b.x2, b.x2, b.x1};  // polygon order
    const double ys[4] = {b.y1, b.y1, b.y2, b.y2};
    std::vector<Pt> poly(4);
    for (int i = 0; i < 4; ++i) {
      const double z = m[6] * xs[i] + m[7] * ys[i] + m[8];
      poly[i] = {(m[0] * xs[i] + m[1] * ys[i] + m[2]) / z, (m[3] * xs[i] + m[4] * ys[i] + m[5]) / z};
    }
    // Clip the quadrilateral, not its enclosing box, so a rotated object that
    // is partly outside keeps a box tight around its visible part.
    poly = ClipHalfPlane(poly, 0, 0.0, -1.0);
    poly = ClipHalfPlane(poly, 0, out_w, 1.0);
    poly = ClipHalfPlane(poly, 1, 0.0, -1.0);
    poly = ClipHalfPlane(poly, 1, out_h, 1.0);
    if (poly.empty()) continue;
    double lx = INFINITY, ly = INFINITY, hx = -INFINITY, hy = -INFINITY;
    for (const Pt& p : poly)
      lx = std::min(lx, p.x), hx = std::max(hx, p.x), ly = std::min(ly, p.y), hy = std::max(hy, p.y);
    PixelBox t = b;
    t.x1 = std::clamp(lx, 0.0, static_cast<double>(out_w));
    t.x2 = std::clamp(hx, 0.0, static_cast<double>(out_w));
    t.y1 = std::clamp(ly, 0.0, static_cast<double>(out_h));
    t.y2 = std::clamp(hy, 0.0, static_cast<double>(out_h));
    if (BoxSurvives(b, t, zoom)) out.push_back(t);
  }
  return out;
}

void WarpSample(AugSample& s, const Homography& m, int out_w, int out_h, double zoom) {
  const bool identity = m == Homography{1, 0, 0, 0, 1, 0, 0, 0, 1};
  if (!(identity && s.image.cols == out_w && s.image.rows == out_h)) {
    // OpenCV warps pixel centers (integer coordinates); our boxes use
    // continuous coordinates where pixel i spans [i, i+1). Conjugating by a
    // half-pixel shift makes pixels and boxes move exactly together.
    Mat3 mp = Mul(Translation(-0.5, -0.5), Mul(m, Translation(0.5, 0.5)));
    cv::Mat out;
    const cv::Scalar gray(kPadGray, kPadGray, kPadGray);
    if (IsAffine(mp)) {
      cv::Mat a = (cv::Mat_<double>(2, 3) << mp[0], mp[1], mp[2], mp[3], mp[4], mp[5]);
      cv::warpAffine(s.image, out, a, cv::Size(out_w, out_h), cv::INTER_LINEAR, cv::BORDER_CONSTANT, gray);
    } else {
      cv::Mat p(3, 3, CV_64F, mp.data());
      cv::warpPerspective(s.image, out, p, cv::Size(out_w, out_h), cv::INTER_LINEAR, cv::BORDER_CONSTANT,
                          gray);
    }
    s.image = out;
  }
  s.boxes = TransformBoxes(s.boxes, m, out_w, out_h, zoom);
}

void RandomPerspective(AugSample& s, const AugmentOptions& o, int out_w, int out_h, Rng& rng) {
  double zoom = 1;
  Homography m = RandomPerspectiveMatrix(o, s.image.cols, s.image.rows, out_w, out_h, rng, &zoom);
  WarpSample(s, m, out_w, out_h, zoom);
}

// ---------------------------------------------------------------------------
// Photometric and flips

void RandomHsv(cv::Mat& rgb, double hgain, double sgain, double vgain, Rng& rng) {
  // Drawn even when unused so the gains do not shift later random draws.
  const double g[3] = {rng.Uniform(-1, 1) * hgain + 1, rng.Uniform(-1, 1) * sgain + 1,
                       rng.Uniform(-1, 1) * vgain + 1};
  if (hgain == 0 && sgain == 0 && vgain == 0) return;
  cv::Mat lut(1, 256, CV_8UC3);
  auto* l = lut.ptr<cv::Vec3b>();
  for (int x = 0; x < 256; ++x) {
    l[x][0] = static_cast<uint8_t>(std::fmod(x * g[0], 180.0));  // g > 0, so no negative remainder
    l[x][1] = static_cast<uint8_t>(std::clamp(x * g[1], 0.0, 255.0));
    l[x][2] = static_cast<uint8_t>(std::clamp(x * g[2], 0.0, 255.0));
  }
  cv::Mat hsv;
  cv::cvtColor(rgb, hsv, cv::COLOR_RGB2HSV);
  cv::LUT(hsv, lut, hsv);
  cv::cvtColor(hsv, rgb, cv::COLOR_HSV2RGB);
}

void FlipLr(AugSample& s) {
  cv::flip(s.image, s.image, 1);
  const double w = s.image.cols;
  for (PixelBox& b : s.boxes) {
    double x1 = w - b.x2, x2 = w - b.x1;
    b.x1 = x1, b.x2 = x2;
  }
}

void FlipUd(AugSample& s) {
  cv::flip(s.image, s.image, 0);
  const double h = s.image.rows;
  for (PixelBox& b : s.boxes) {
    double y1 = h - b.y2, y2 = h - b.y1;
    b.y1 = y1, b.y2 = y2;
  }
}

void MixUp(AugSample& a, const AugSample& b, Rng& rng) {
  const double r = rng.Beta(32.0, 32.0);
  cv::addWeighted(a.image, r, b.image, 1 - r, 0, a.image);
  a.boxes.insert(a.boxes.end(), b.boxes.begin(), b.boxes.end());
}

}  // namespace kestrel::data
