// Axis-aligned boxes and IoU, torch-free.
//
// Convention everywhere in src/eval: a Box is xyxy (x1, y1) top-left corner,
// (x2, y2) bottom-right corner, in pixels, x to the right and y down. Which
// image the pixels belong to (letterboxed input or original image) is stated
// by each function that takes boxes. Coordinates are continuous: a box
// [0, 0, 10, 10] has area 100 (no +1 convention). A box with x2 < x1 or
// y2 < y1 has area 0.
//
// Coordinates are float (what a model emits, 16 bytes a box); IoU for metrics
// is computed in double, IoU for NMS in float (see IouF).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace kestrel::eval {

struct Box {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;
};

// Width/height clamped at 0.
inline double BoxArea(const Box& b) {
  return std::max(0.0, double(b.x2) - b.x1) * std::max(0.0, double(b.y2) - b.y1);
}

// Center/size -> corners. cx, cy, w, h in the same pixels as the result.
inline Box BoxFromCxCyWh(double cx, double cy, double w, double h) {
  return Box{float(cx - w / 2), float(cy - h / 2), float(cx + w / 2), float(cy + h / 2)};
}
// Corner + size (COCO "bbox": x, y, width, height) -> corners.
inline Box BoxFromXyWh(double x, double y, double w, double h) {
  return Box{float(x), float(y), float(x + w), float(y + h)};
}

// Intersection over union in double; 0 when the union is empty.
inline double Iou(const Box& a, const Box& b) {
  const double iw = std::min(double(a.x2), double(b.x2)) - std::max(double(a.x1), double(b.x1));
  const double ih = std::min(double(a.y2), double(b.y2)) - std::max(double(a.y1), double(b.y1));
  if (iw <= 0 || ih <= 0) return 0.0;
  const double inter = iw * ih;
  const double uni = BoxArea(a) + BoxArea(b) - inter;
  return uni > 0 ? inter / uni : 0.0;
}

// IoU in float given precomputed float areas ((x2-x1)*(y2-y1), clamped at 0).
// NMS and its naive baselines all call this one function so their kept sets
// can be compared exactly.
inline float IouF(const Box& a, float area_a, const Box& b, float area_b) {
  const float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  const float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  if (iw <= 0.f || ih <= 0.f) return 0.f;
  const float inter = iw * ih;
  const float uni = area_a + area_b - inter;
  return uni > 0.f ? inter / uni : 0.f;
}
inline float BoxAreaF(const Box& b) { return std::max(0.f, b.x2 - b.x1) * std::max(0.f, b.y2 - b.y1); }

// Row-major [a.size(), b.size()] matrix: out[i * b.size() + j] = Iou(a[i], b[j]).
std::vector<double> IouMatrix(const std::vector<Box>& a, const std::vector<Box>& b);

// Clamps x to [0, width] and y to [0, height].
Box ClipBox(const Box& b, double width, double height);

}  // namespace kestrel::eval
