// Training-time image augmentations (Ultralytics YOLOv8 semantics), torch-free.
// This is a pixel-level header: it exposes cv::Mat. Modules that only consume
// batches (train) include data/loader.h instead, which has no OpenCV types.
//
// Conventions for every function here:
//   - images are RGB, CV_8UC3, continuous or not;
//   - boxes are PixelBox (data/dataset.h): class id + x1,y1,x2,y2 in pixels of
//     the image they travel with, continuous coordinates where pixel i covers
//     [i, i+1) (so a box around the whole image is 0,0,W,H); PixelBox::line is
//     ignored and left as is;
//   - geometric functions move pixels and boxes with the same transform, so a
//     box keeps bounding its object's pixels (up to interpolation, <= 1 px);
//   - all randomness comes from the Rng passed in. No std distributions, so
//     results are identical on every platform for a given seed.
//
// Thread-safety: functions are reentrant; an Rng is not shared between threads.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <opencv2/core/mat.hpp>
#include <vector>

#include "core/status.h"
#include "data/dataset.h"
// AugmentOptions lives in loader.h so that header stays free of OpenCV types.
#include "data/loader.h"

namespace kestrel::data {

// ---------------------------------------------------------------------------
// Randomness

// SplitMix64 finalizer: a well-mixed 64-bit function of `x`.
uint64_t Mix64(uint64_t x);
// Order-sensitive hash of a few integers, for deriving seeds:
// SeedFrom({seed, epoch, position}).
uint64_t SeedFrom(std::initializer_list<uint64_t> parts);

// SplitMix64 generator with hand-written distributions (no std::*_distribution,
// whose output differs between standard libraries).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t NextU64();
  // [0, 1) with 53 random bits.
  double Uniform();
  // [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Integer in [0, n), n >= 1 (Lemire's method, unbiased).
  uint64_t Below(uint64_t n);
  // True with probability p (Uniform() < p; p <= 0 never, p >= 1 always).
  bool Bernoulli(double p) { return Uniform() < p; }
  // Standard normal (Box-Muller, both draws consumed per call).
  double Normal();
  // Gamma(shape, 1), shape > 0 (Marsaglia-Tsang).
  double Gamma(double shape);
  // Beta(a, b) via two Gammas.
  double Beta(double a, double b);

 private:
  uint64_t state_;
};

// ---------------------------------------------------------------------------
// Samples and box conversions

// One image with its boxes, the unit every augmentation transforms.
struct AugSample {
  cv::Mat image;                // RGB, CV_8UC3
  std::vector<PixelBox> boxes;  // xyxy pixels of `image`, see the file comment
};

// Normalized cxcywh (manifest) -> pixel xyxy for a w x h image.
std::vector<PixelBox> BoxesToPixels(const std::vector<Box>& boxes, int w, int h);
// Pixel xyxy -> normalized cxcywh for a w x h image (no clipping).
std::vector<Box> BoxesToNormalized(const std::vector<PixelBox>& boxes, int w, int h);

// The gray used for padding and for pixels a warp brings in from outside.
inline constexpr int kPadGray = 114;

// ---------------------------------------------------------------------------
// Geometry

// Resizes so the longer side equals `imgsz` (up or down), keeping the aspect
// ratio: new size min(ceil(w*r), imgsz) x min(ceil(h*r), imgsz) with
// r = imgsz / max(w, h), INTER_LINEAR both ways (the reference trainer's
// load rule). Boxes are scaled by exactly new_w/w and new_h/h, like the pixels.
void ResizeLongSide(AugSample& s, int imgsz);

// Letterbox parameters: letterboxed = original * scale + (pad_x, pad_y), in
// continuous pixel coordinates. Map a prediction back with
// x_orig = (x - pad_x) / scale, y_orig = (y - pad_y) / scale.
struct LetterboxInfo {
  double scale = 1.0;  // min(out_w / w, out_h / h), upscaling allowed
  int pad_x = 0;       // left padding, pixels = (out_w - round(w*scale)) / 2, floored
  int pad_y = 0;       // top padding, pixels
};
// Resizes to round(w*scale) x round(h*scale) and pads with kPadGray to
// exactly out_w x out_h, content centered. Boxes are mapped with
// (scale, pad_x, pad_y) exactly; the pixels may differ from that mapping by
// up to 0.5 px because the resized size is rounded (the Ultralytics
// convention, so inverse mapping with one scale stays exact for boxes).
LetterboxInfo Letterbox(AugSample& s, int out_w, int out_h);

// Places 4 samples (each already ResizeLongSide'd to <= imgsz) on a
// 2*imgsz square canvas filled with kPadGray, quadrants around a center drawn
// uniformly in [imgsz/2, 3*imgsz/2) per axis, in the order top-left,
// top-right, bottom-left, bottom-right. Boxes are shifted with their image and
// clipped to the canvas. Callers then run RandomPerspective down to imgsz.
AugSample Mosaic4(const std::array<const AugSample*, 4>& parts, int imgsz, Rng& rng);

// Row-major 3x3 homography on continuous pixel coordinates: dst = M * src.
using Homography = std::array<double, 9>;

// Ultralytics random_perspective matrix for an in_w x in_h input and an
// out_w x out_h output: M = T * S * R * P * C (center, perspective,
// rotation+scale, shear, translation around the output center).
// `zoom` receives the drawn scale factor (used by the box filter).
Homography RandomPerspectiveMatrix(const AugmentOptions& o, int in_w, int in_h, int out_w, int out_h,
                                   Rng& rng, double* zoom);

// Warps pixels with `m` into out_w x out_h (bilinear, kPadGray outside;
// affine when the last row is 0 0 1) and boxes with TransformBoxes.
void WarpSample(AugSample& s, const Homography& m, int out_w, int out_h, double zoom);

// Transforms each box's 4 corners with `m`, clips that quadrilateral to
// [0,out_w]x[0,out_h], takes the enclosing box of what remains and keeps it
// when BoxSurvives. Order is kept. (Ultralytics clips the enclosing box
// instead, which over-covers a rotated object that is partly outside.)
std::vector<PixelBox> TransformBoxes(const std::vector<PixelBox>& boxes, const Homography& m, int out_w,
                                     int out_h, double zoom);

// The usual candidate rule: after-augmentation width and height > 2 px,
// area > 0.1 * (before area * zoom^2), aspect ratio max(w/h, h/w) < 100.
bool BoxSurvives(const PixelBox& before, const PixelBox& after, double zoom);

// RandomPerspectiveMatrix + WarpSample.
void RandomPerspective(AugSample& s, const AugmentOptions& o, int out_w, int out_h, Rng& rng);

// ---------------------------------------------------------------------------
// Photometric and flips

// Draws gains g = 1 + U(-1,1) * (hsv_h, hsv_s, hsv_v) and applies them in
// OpenCV 8-bit HSV through lookup tables: hue (x*g) mod 180, saturation and
// value clipped to [0, 255]. Boxes are untouched. Pixels are untouched when all
// gains are 0 (the three draws still happen).
void RandomHsv(cv::Mat& rgb, double hgain, double sgain, double vgain, Rng& rng);

// Mirror left-right / up-down, boxes included (x1' = W - x2, ...).
void FlipLr(AugSample& s);
void FlipUd(AugSample& s);

// a = a * r + b * (1 - r) with r ~ Beta(32, 32); b's boxes are appended.
// REQUIRES: same image size.
void MixUp(AugSample& a, const AugSample& b, Rng& rng);

}  // namespace kestrel::data
