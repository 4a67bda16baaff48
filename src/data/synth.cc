#include "data/synth.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <opencv2/core.hpp>
#include <opencv2/imgproc.hpp>
#include <thread>
#include <utility>

#include "core/staged_dir.h"
#include "data/codec.h"

namespace kestrel::data {
namespace {

constexpr const char* kShapeNames[kSynthShapeCount] = {"circle", "rectangle", "triangle", "ellipse",
                                                       "star",   "cross",     "ring",     "diamond"};
constexpr int kMaxClasses = 64;
constexpr int kMaxObjects = 32;
constexpr int kMaxSide = 4096;
constexpr double kMinVisibleFraction = 0.70;
constexpr int kPlacementAttempts = 30;
constexpr int kJpegQuality = 90;
constexpr int kWriteBatchFiles = 64;  // bounds memory held for pending writes

// SplitMix64: tiny, fully specified, identical on every platform. Hand-rolled
// distributions on top of it because std ones are implementation-defined.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Inclusive range; modulo bias is irrelevant at these sizes.
  int Int(int lo, int hi) { return lo + static_cast<int>(Next() % static_cast<uint64_t>(hi - lo + 1)); }

 private:
  uint64_t state_;
};

// Independent streams per image, so image i does not depend on the others.
uint64_t StreamSeed(uint64_t seed, uint64_t stream) {
  Rng r(seed ^ (stream * 0xD1B54A32D192ED03ull + 0x2545F4914F6CDD1Dull));
  r.Next();
  return r.Next();
}
constexpr uint64_t kSplitStream = ~uint64_t{0};
constexpr uint64_t kBackgroundStream = ~uint64_t{1};

// Which images are val and which are background: the first llround(n * f)
// entries of a seeded permutation.
struct Layout {
  std::vector<Split> split;
  std::vector<bool> background;
};

std::vector<int> Permutation(int n, Rng& rng) {
  std::vector<int> p(n);
  for (int i = 0; i < n; ++i) p[i] = i;
  for (int k = n - 1; k > 0; --k) std::swap(p[k], p[rng.Int(0, k)]);
  return p;
}

Layout MakeLayout(const SynthOptions& o) {
  Layout l;
  l.split.assign(o.images, Split::kTrain);
  l.background.assign(o.images, false);
  Rng split_rng(StreamSeed(o.seed, kSplitStream));
  const std::vector<int> ps = Permutation(o.images, split_rng);
  const auto n_val = static_cast<int>(std::llround(o.images * o.val_fraction));
  for (int k = 0; k < n_val; ++k) l.split[ps[k]] = Split::kVal;
  Rng bg_rng(StreamSeed(o.seed, kBackgroundStream));
  const std::vector<int> pb = Permutation(o.images, bg_rng);
  const auto n_bg = static_cast<int>(std::llround(o.images * o.background_fraction));
  for (int k = 0; k < n_bg; ++k) l.background[pb[k]] = true;
  return l;
}

// h in degrees [0, 360), s and v in [0, 1] -> B, G, R in [0, 255].
cv::Vec3d HsvToBgr(double h, double s, double v) {
  const double c = v * s;
  const double hp = std::fmod(h, 360.0) / 60.0;
  const double x = c * (1 - std::fabs(std::fmod(hp, 2.0) - 1));
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(hp)) {
    case 0:
      r = c;
      g = x;
      break;
    case 1:
      r = x;
      g = c;
      break;
    case 2:
      g = c;
      b = x;
      break;
    case 3:
      g = x;
      b = c;
      break;
    case 4:
      r = x;
      b = c;
      break;
    default:
      r = c;
      b = x;
      break;
  }
  const double m = v - c;
  return {255 * (b + m), 255 * (g + m), 255 * (r + m)};
}

uchar ToByte(double v) { return static_cast<uchar>(std::clamp(std::lround(v), 0L, 255L)); }

// Smooth value noise: a g x g grid of values in [-1, 1], sampled with
// smoothstep-weighted bilinear interpolation.
class ValueNoise {
 public:
  ValueNoise(int g, Rng& rng) : g_(g), v_(static_cast<size_t>(g) * g) {
    for (double& x : v_) x = rng.Uniform(-1, 1);
  }
  // u, w in [0, 1].
  double At(double u, double w) const {
    const double fx = u * (g_ - 1), fy = w * (g_ - 1);
    const int x0 = std::min(static_cast<int>(fx), g_ - 2);
    const int y0 = std::min(static_cast<int>(fy), g_ - 2);
    const double tx = Smooth(fx - x0), ty = Smooth(fy - y0);
    const double* r0 = &v_[static_cast<size_t>(y0) * g_ + x0];
    const double* r1 = r0 + g_;
    const double top = r0[0] + (r0[1] - r0[0]) * tx;
    const double bottom = r1[0] + (r1[1] - r1[0]) * tx;
    return top + (bottom - top) * ty;
  }

 private:
  static double Smooth(double t) { return t * t * (3 - 2 * t); }
  int g_;
  std::vector<double> v_;
};

void PaintBackground(Rng& rng, cv::Mat& img) {
  const int rows = img.rows, cols = img.cols;
  const cv::Vec3d base = HsvToBgr(rng.Uniform(0, 360), rng.Uniform(0.05, 0.35), rng.Uniform(0.35, 0.8));
  const double angle = rng.Uniform(0, 2 * std::numbers::pi);
  const double grad = rng.Uniform(-50, 50);
  const double gx = std::cos(angle) * grad, gy = std::sin(angle) * grad;
  std::vector<ValueNoise> coarse, fine;
  for (int c = 0; c < 3; ++c) {
    coarse.emplace_back(rng.Int(3, 6), rng);
    fine.emplace_back(rng.Int(8, 14), rng);
  }
  const double coarse_amp = rng.Uniform(10, 35), fine_amp = rng.Uniform(4, 14);
  const double inv_x = 1.0 / (cols - 1), inv_y = 1.0 / (rows - 1);
  for (int y = 0; y < rows; ++y) {
    auto* row = img.ptr<cv::Vec3b>(y);
    const double v = y * inv_y;
    for (int x = 0; x < cols; ++x) {
      const double u = x * inv_x;
      const double shade = gx * (u - 0.5) + gy * (v - 0.5);
      for (int c = 0; c < 3; ++c) {
        row[x][c] = ToByte(base[c] + shade + coarse_amp * coarse[c].At(u, v) + fine_amp * fine[c].At(u, v));
      }
    }
  }
  const int lines = rng.Int(2, 8);
  for (int k = 0; k < lines; ++k) {
    cv::Point a, b;
    if (rows == cols) {
      // The original square code, kept as it was: its argument evaluation
      // order is the compiler's, and existing datasets depend on it.
      const int n = rows;
      auto coord = [&] { return static_cast<int>(std::lround(rng.Uniform(-0.1, 1.1) * n)); };
      a = cv::Point(coord(), coord()), b = cv::Point(coord(), coord());
    } else {
      double t[4];
      for (double& v : t) v = rng.Uniform(-0.1, 1.1);
      a = cv::Point(static_cast<int>(std::lround(t[0] * cols)), static_cast<int>(std::lround(t[1] * rows)));
      b = cv::Point(static_cast<int>(std::lround(t[2] * cols)), static_cast<int>(std::lround(t[3] * rows)));
    }
    const cv::Vec3d col = HsvToBgr(rng.Uniform(0, 360), rng.Uniform(0, 0.5), rng.Uniform(0.2, 0.95));
    cv::line(img, a, b, cv::Scalar(col[0], col[1], col[2]), rng.Int(1, 3), cv::LINE_AA);
  }
}

cv::Point Pt(double x, double y) {
  return {static_cast<int>(std::lround(x)), static_cast<int>(std::lround(y))};
}

// Regular polygon / star outline: `points` vertices alternating between
// radius r_outer and r_inner (equal for a polygon), starting at `rot`.
std::vector<cv::Point> Radial(double cx, double cy, int points, double r_outer, double r_inner, double rot) {
  std::vector<cv::Point> p;
  for (int k = 0; k < points; ++k) {
    const double r = k % 2 == 0 ? r_outer : r_inner;
    const double a = rot + 2 * std::numbers::pi * k / points;
    p.push_back(Pt(cx + r * std::cos(a), cy + r * std::sin(a)));
  }
  return p;
}

// Draws shape `shape` of extent `s` pixels centred at (cx, cy) into `mask`
// (255 = shape). Everything stays within the s x s square around the centre.
void DrawShape(int shape, double cx, double cy, double s, Rng& rng, cv::Mat& mask) {
  const double r = s / 2;
  const cv::Scalar on(255);
  switch (shape) {
    case 0:  // circle
      cv::circle(mask, Pt(cx, cy), static_cast<int>(std::lround(r)), on, cv::FILLED, cv::LINE_8);
      break;
    case 1: {  // rectangle, axis-aligned, aspect 0.45-1
      double w = s, h = s * rng.Uniform(0.45, 1.0);
      if (rng.Int(0, 1) == 1) std::swap(w, h);
      cv::rectangle(mask, Pt(cx - w / 2, cy - h / 2), Pt(cx + w / 2, cy + h / 2), on, cv::FILLED, cv::LINE_8);
      break;
    }
    case 2: {  // triangle, equilateral, any rotation
      const std::vector<std::vector<cv::Point>> poly = {
          Radial(cx, cy, 3, r, r, rng.Uniform(0, 2 * std::numbers::pi))};
      cv::fillPoly(mask, poly, on, cv::LINE_8);
      break;
    }
    case 3: {  // ellipse, axis ratio 0.4-0.7, any rotation
      const cv::Size axes(static_cast<int>(std::lround(r)),
                          static_cast<int>(std::lround(r * rng.Uniform(0.4, 0.7))));
      cv::ellipse(mask, Pt(cx, cy), axes, rng.Int(0, 179), 0, 360, on, cv::FILLED, cv::LINE_8);
      break;
    }
    case 4: {  // five-pointed star
      const std::vector<std::vector<cv::Point>> poly = {
          Radial(cx, cy, 10, r, r * rng.Uniform(0.38, 0.5), rng.Uniform(0, 2 * std::numbers::pi))};
      cv::fillPoly(mask, poly, on, cv::LINE_8);
      break;
    }
    case 5: {  // plus-shaped cross, arm width 25-38% of extent
      const double t = s * rng.Uniform(0.25, 0.38) / 2;
      cv::rectangle(mask, Pt(cx - r, cy - t), Pt(cx + r, cy + t), on, cv::FILLED, cv::LINE_8);
      cv::rectangle(mask, Pt(cx - t, cy - r), Pt(cx + t, cy + r), on, cv::FILLED, cv::LINE_8);
      break;
    }
    case 6: {  // ring, inner radius 45-70% of outer
      cv::circle(mask, Pt(cx, cy), static_cast<int>(std::lround(r)), on, cv::FILLED, cv::LINE_8);
      cv::circle(mask, Pt(cx, cy), static_cast<int>(std::lround(r * rng.Uniform(0.45, 0.7))), cv::Scalar(0),
                 cv::FILLED, cv::LINE_8);
      break;
    }
    default: {  // diamond: rhombus with vertical extent s, width 55-100% of s
      const double w = r * rng.Uniform(0.55, 1.0);
      const std::vector<std::vector<cv::Point>> poly = {
          {Pt(cx, cy - r), Pt(cx + w, cy), Pt(cx, cy + r), Pt(cx - w, cy)}};
      cv::fillPoly(mask, poly, on, cv::LINE_8);
      break;
    }
  }
}

struct Object {
  int cls = 0;
  cv::Mat mask;     // CV_8U, full image, 255 = shape pixels
  cv::Mat visible;  // mask minus objects drawn later
  int area = 0;
  int visible_area = 0;
};

// Draws shape `shape` stretched to sx x sy pixels centred at (cx, cy) into
// `mask`: rendered in a square of the larger extent, then resized (nearest)
// to the box, so every shape keeps its look at any aspect ratio.
void DrawStretchedShape(int shape, double cx, double cy, double sx, double sy, Rng& rng, cv::Mat& mask) {
  const double s = std::max(sx, sy);
  const int side = static_cast<int>(std::ceil(s)) + 4;  // room for rounding at the edges
  cv::Mat square = cv::Mat::zeros(side, side, CV_8U);
  DrawShape(shape, side / 2.0, side / 2.0, s, rng, square);
  const int tw = std::max(1, static_cast<int>(std::lround(side * sx / s)));
  const int th = std::max(1, static_cast<int>(std::lround(side * sy / s)));
  cv::Mat stretched;
  cv::resize(square, stretched, cv::Size(tw, th), 0, 0, cv::INTER_NEAREST);
  const int x0 = static_cast<int>(std::lround(cx - tw / 2.0));
  const int y0 = static_cast<int>(std::lround(cy - th / 2.0));
  const cv::Rect dst = cv::Rect(x0, y0, tw, th) & cv::Rect(0, 0, mask.cols, mask.rows);
  if (dst.area() == 0) return;
  stretched(cv::Rect(dst.x - x0, dst.y - y0, dst.width, dst.height)).copyTo(mask(dst));
}

// Places up to `count` objects; each new one is drawn on top and accepted
// only if every earlier object keeps kMinVisibleFraction of its pixels.
std::vector<Object> PlaceObjects(const SynthOptions& o, int width, int height, int count, Rng& rng) {
  std::vector<Object> objects;
  const int n = o.imgsz;
  const bool sized = o.min_side > 0;  // else the original square layout, draw for draw
  cv::Mat overlap;
  for (int k = 0; k < count; ++k) {
    const int cls = rng.Int(0, o.classes - 1);
    for (int attempt = 0; attempt < kPlacementAttempts; ++attempt) {
      Object obj;
      obj.cls = cls;
      if (!sized) {
        const double s = std::max(4.0, n * rng.Uniform(o.min_object, o.max_object));
        const double cx = rng.Uniform(s / 2, n - s / 2);
        const double cy = rng.Uniform(s / 2, n - s / 2);
        obj.mask = cv::Mat::zeros(n, n, CV_8U);
        DrawShape(cls % kSynthShapeCount, cx, cy, s, rng, obj.mask);
      } else {
        const double sx = std::max(4.0, width * rng.Uniform(o.min_object, o.max_object));
        const double sy = std::max(4.0, height * rng.Uniform(o.min_object, o.max_object));
        const double cx = rng.Uniform(sx / 2, width - sx / 2);
        const double cy = rng.Uniform(sy / 2, height - sy / 2);
        obj.mask = cv::Mat::zeros(height, width, CV_8U);
        DrawStretchedShape(cls % kSynthShapeCount, cx, cy, sx, sy, rng, obj.mask);
      }
      obj.area = cv::countNonZero(obj.mask);
      if (obj.area == 0) continue;
      bool ok = true;
      std::vector<int> hidden(objects.size(), 0);
      for (size_t e = 0; e < objects.size() && ok; ++e) {
        cv::bitwise_and(objects[e].visible, obj.mask, overlap);
        hidden[e] = cv::countNonZero(overlap);
        ok = objects[e].visible_area - hidden[e] >= kMinVisibleFraction * objects[e].area;
      }
      if (!ok) continue;
      for (size_t e = 0; e < objects.size(); ++e) {
        if (hidden[e] == 0) continue;
        objects[e].visible.setTo(0, obj.mask);
        objects[e].visible_area -= hidden[e];
      }
      obj.visible = obj.mask.clone();
      obj.visible_area = obj.area;
      objects.push_back(std::move(obj));
      break;
    }
  }
  return objects;
}

// Fills the object's mask with its class colour and a linear shading.
void PaintObject(const SynthOptions& o, const Object& obj, const cv::Rect& box, Rng& rng, cv::Mat& img) {
  const int bands = (o.classes + kSynthShapeCount - 1) / kSynthShapeCount;
  const int band = obj.cls / kSynthShapeCount;
  const double band_width = 360.0 / bands;
  // The inner 80% of the band, so neighbouring bands stay apart.
  const double hue = band_width * (band + 0.1 + 0.8 * rng.Uniform());
  const cv::Vec3d col = HsvToBgr(hue, rng.Uniform(0.55, 1.0), rng.Uniform(0.55, 1.0));
  const double angle = rng.Uniform(0, 2 * std::numbers::pi);
  const double strength = rng.Uniform(0, 0.35);
  const double half = std::max(box.width, box.height) / 2.0;
  const double gx = std::cos(angle) * strength / half, gy = std::sin(angle) * strength / half;
  const double mx = box.x + box.width / 2.0, my = box.y + box.height / 2.0;
  for (int y = box.y; y < box.y + box.height; ++y) {
    const uchar* m = obj.mask.ptr<uchar>(y);
    auto* row = img.ptr<cv::Vec3b>(y);
    for (int x = box.x; x < box.x + box.width; ++x) {
      if (m[x] == 0) continue;
      const double f = 1.0 + gx * (x - mx) + gy * (y - my);
      for (int c = 0; c < 3; ++c) row[x][c] = ToByte(col[c] * f);
    }
  }
}

// +-4 grey levels of per-byte grain, so JPEG and pHash see texture.
void AddGrain(Rng& rng, cv::Mat& img) {
  for (int y = 0; y < img.rows; ++y) {
    uchar* p = img.ptr<uchar>(y);
    const int len = img.cols * img.channels();
    uint64_t bits = 0;
    for (int k = 0; k < len; ++k) {
      if (k % 8 == 0) bits = rng.Next();
      const int delta = static_cast<int>(bits & 0xFF) % 9 - 4;
      bits >>= 8;
      p[k] = static_cast<uchar>(std::clamp(p[k] + delta, 0, 255));
    }
  }
}

SynthSample Render(const SynthOptions& o, const Layout& layout, int index) {
  Rng rng(StreamSeed(o.seed, static_cast<uint64_t>(index)));
  SynthSample out;
  char stem[32];
  std::snprintf(stem, sizeof(stem), "synth_%05d", index);
  out.stem = stem;
  out.split = layout.split[index];
  int width = o.imgsz, height = o.imgsz;
  if (o.min_side > 0) {
    width = rng.Int(o.min_side, o.max_side);
    height = rng.Int(o.min_side, o.max_side);
  }
  out.image.create(height, width, CV_8UC3);
  PaintBackground(rng, out.image);
  const int count = layout.background[index] ? 0 : rng.Int(o.min_objects, o.max_objects);
  const std::vector<Object> objects = PlaceObjects(o, width, height, count, rng);
  const double inv_x = 1.0 / width, inv_y = 1.0 / height;
  for (const Object& obj : objects) {
    const cv::Rect box = cv::boundingRect(obj.mask);
    PaintObject(o, obj, box, rng, out.image);
    out.boxes.push_back(Box{obj.cls, (box.x + box.width / 2.0) * inv_x, (box.y + box.height / 2.0) * inv_y,
                            box.width * inv_x, box.height * inv_y});
  }
  AddGrain(rng, out.image);
  return out;
}

void AppendFixed6(std::string& out, double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, 6);
  out.append(buf, r.ptr);
}

std::string LabelText(const std::vector<Box>& boxes) {
  std::string s;
  for (const Box& b : boxes) {
    s += std::to_string(b.cls);
    for (double v : {b.cx, b.cy, b.w, b.h}) {
      s += ' ';
      AppendFixed6(s, v);
    }
    s += '\n';
  }
  return s;
}

std::string DataYaml(const SynthOptions& o) {
  const std::string size = o.min_side > 0
                               ? "sides " + std::to_string(o.min_side) + ".." + std::to_string(o.max_side)
                               : "imgsz " + std::to_string(o.imgsz);
  std::string s = "# Kestrel synthetic detection dataset: seed " + std::to_string(o.seed) + ", " +
                  std::to_string(o.images) + " images, " + size +
                  "\npath: .\ntrain: images/train\nval: images/val\nnc: " + std::to_string(o.classes) +
                  "\nnames:\n";
  for (const std::string& name : SynthClassNames(o.classes)) s += "  - " + name + "\n";
  return s;
}

Result<std::string> EncodeJpeg(const cv::Mat& img, const std::string& origin) {
  Result<std::string> jpeg = data::EncodeJpeg(img, kJpegQuality);
  if (!jpeg.IsOk()) return Status::Internal(jpeg.GetStatus().Message(), {origin});
  return jpeg;
}

struct PendingFile {
  std::string path;
  std::string data;
};

// Writes every file with env.WriteFileAtomic from up to `threads` threads.
// Returns the error of the first failed file in batch order.
Status WriteAll(const std::vector<PendingFile>& files, int threads, Env& env) {
  std::vector<Status> results(files.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k = next++; k < files.size(); k = next++) {
      results[k] = env.WriteFileAtomic(files[k].path, files[k].data);
    }
  };
  {
    std::vector<std::jthread> pool;
    const size_t n = std::min<size_t>(static_cast<size_t>(threads), files.size());
    for (size_t t = 1; t < n; ++t) pool.emplace_back(worker);
    worker();
  }  // joins
  for (const Status& st : results) KESTREL_RETURN_IF_ERROR(st);
  return Status();
}

Status Field(const std::string& field, const std::string& msg) {
  return Status::InvalidArgument(msg, {"", 0, field});
}

}  // namespace

void SynthOptions::Bind(OptionSet& s) {
  s.Int("images", &images, "number of images (train + val)", 1, 1'000'000)
      .Int("classes", &classes, "number of classes (shapes)", 1, kMaxClasses)
      .Int("imgsz", &imgsz, "square image side in pixels (when min_side = 0)", 32, kMaxSide)
      .Float("val_fraction", &val_fraction, "share of images in val", Range::Closed(0, 1))
      .Float("background_fraction", &background_fraction, "share of images without objects",
             Range::Closed(0, 1))
      .Int("min_objects", &min_objects, "fewest objects per non-background image", 1, kMaxObjects)
      .Int("max_objects", &max_objects, "most objects per non-background image", 1, kMaxObjects)
      .Float("min_object", &min_object, "smallest object extent, fraction of the image side",
             Range::Closed(0.01, 1))
      .Float("max_object", &max_object, "largest object extent, fraction of the image side",
             Range::Closed(0.01, 1))
      .Int("min_side", &min_side,
           "0 = square imgsz images; else the smallest image width/height in pixels (>= 32)", 0, kMaxSide)
      .Int("max_side", &max_side, "largest image width/height in pixels (with min_side)", 0, kMaxSide);
}

Status SynthOptions::Validate() const {
  KESTREL_RETURN_IF_ERROR(CheckBoundValues(*this));
  if (min_objects > max_objects) {
    return Field("max_objects", "must be >= min_objects (" + std::to_string(min_objects) + "), got " +
                                    std::to_string(max_objects));
  }
  if (min_object > max_object) {
    return Field("max_object", "must be >= min_object (" + std::to_string(min_object) + "), got " +
                                   std::to_string(max_object));
  }
  if (min_side != 0 && min_side < 32) {
    return Field("min_side", "must be 0 or in [32, 4096], got " + std::to_string(min_side));
  }
  if (min_side == 0 && max_side != 0) {
    return Field("max_side",
                 "needs min_side > 0 (or 0 for square imgsz images), got " + std::to_string(max_side));
  }
  if (max_side < min_side) {
    return Field("max_side",
                 "must be >= min_side (" + std::to_string(min_side) + "), got " + std::to_string(max_side));
  }
  if (write_threads < 1 || write_threads > 64) {
    return Field("write_threads", "must be in [1, 64], got " + std::to_string(write_threads));
  }
  return Status();
}

std::vector<std::string> SynthClassNames(int classes) {
  std::vector<std::string> names;
  for (int k = 0; k < classes; ++k) {
    std::string name = kShapeNames[k % kSynthShapeCount];
    if (k >= kSynthShapeCount) name += "_" + std::to_string(k / kSynthShapeCount);
    names.push_back(std::move(name));
  }
  return names;
}

Result<SynthSample> RenderSynthSample(const SynthOptions& options, int index) {
  KESTREL_RETURN_IF_ERROR(options.Validate());
  if (index < 0 || index >= options.images) {
    return Status::InvalidArgument("must be in [0, images), got " + std::to_string(index), {"", 0, "index"});
  }
  try {
    return Render(options, MakeLayout(options), index);
  } catch (const cv::Exception& e) {
    return Status::Internal(std::string("rendering failed: ") + e.what());
  }
}

namespace {
Status WriteSynthTree(const SynthOptions& options, const std::string& out_dir, Env& env);
}  // namespace

Status WriteSynthDataset(const SynthOptions& options, const std::string& out_dir, Env& env) {
  KESTREL_RETURN_IF_ERROR(options.Validate());
  KESTREL_RETURN_IF_ERROR(RequireEmptyOrAbsent(env, out_dir, StatusCode::kFailedPrecondition));
  // Written beside `out_dir` and renamed into place when complete: a failure
  // half-way used to leave images/ + labels/ without data.yaml, which import
  // accepts as a bare YOLO tree.
  KESTREL_ASSIGN_OR_RETURN(StagedDir out, StagedDir::Create(env, out_dir));
  KESTREL_RETURN_IF_ERROR(WriteSynthTree(options, out.Path(), env));
  return out.CommitFresh();
}

namespace {

Status WriteSynthTree(const SynthOptions& options, const std::string& out_dir, Env& env) {
  for (const char* sub : {"images/train", "images/val", "labels/train", "labels/val"}) {
    KESTREL_RETURN_IF_ERROR(env.CreateDirs(JoinPath(out_dir, sub)));
  }
  const Layout layout = MakeLayout(options);
  // Rendering is sequential (cheap, deterministic); the atomic writes are
  // dominated by fsync latency, so a batch of them runs concurrently.
  std::vector<PendingFile> batch;
  for (int i = 0; i < options.images; ++i) {
    SynthSample sample;
    try {
      sample = Render(options, layout, i);
    } catch (const cv::Exception& e) {
      return Status::Internal(std::string("rendering image ") + std::to_string(i) + " failed: " + e.what());
    }
    const std::string split = SplitName(sample.split);
    const std::string image_path = JoinPath(out_dir, "images/" + split + "/" + sample.stem + ".jpg");
    KESTREL_ASSIGN_OR_RETURN(std::string jpeg, EncodeJpeg(sample.image, image_path));
    batch.push_back({image_path, std::move(jpeg)});
    batch.push_back(
        {JoinPath(out_dir, "labels/" + split + "/" + sample.stem + ".txt"), LabelText(sample.boxes)});
    if (static_cast<int>(batch.size()) >= kWriteBatchFiles || i + 1 == options.images) {
      KESTREL_RETURN_IF_ERROR(WriteAll(batch, options.write_threads, env));
      batch.clear();
    }
  }
  return env.WriteFileAtomic(JoinPath(out_dir, "data.yaml"), DataYaml(options));
}

}  // namespace

}  // namespace kestrel::data
