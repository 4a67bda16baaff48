#include "eval/box.h"

namespace kestrel::eval {

std::vector<double> IouMatrix(const std::vector<Box>& a, const std::vector<Box>& b) {
  std::vector<double> out(a.size() * b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < b.size(); ++j) out[i * b.size() + j] = Iou(a[i], b[j]);
  }
  return out;
}

Box ClipBox(const Box& b, double width, double height) {
  auto clamp = [](float v, double hi) { return float(std::clamp(double(v), 0.0, hi)); };
  return Box{clamp(b.x1, width), clamp(b.y1, height), clamp(b.x2, width), clamp(b.y2, height)};
}

}  // namespace kestrel::eval
