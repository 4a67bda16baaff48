#include "app/dataset_box_stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>

#include "core/utf8.h"

namespace kestrel::app {
namespace {

constexpr int kAspectBins = 2 * kBoxAspectLog2Max * kBoxAspectStepsPerOctave;

// The bin of v in [0, 1] split into n equal bins; values outside (a box
// validation let through with warnings) land in the end bins.
size_t UnitBin(double v, int n) {
  const int b = static_cast<int>(std::floor(v * n));
  return static_cast<size_t>(std::clamp(b, 0, n - 1));
}

size_t AspectBin(double ratio) {
  const double steps = (std::log2(ratio) + kBoxAspectLog2Max) * kBoxAspectStepsPerOctave;
  const int b = static_cast<int>(std::floor(steps));
  return static_cast<size_t>(std::clamp(b, 0, kAspectBins - 1));
}

bool Finite(const data::Box& b) {
  return std::isfinite(b.cx) && std::isfinite(b.cy) && std::isfinite(b.w) && std::isfinite(b.h);
}

}  // namespace

BoxStats ComputeBoxStats(const data::Manifest& m) {
  constexpr auto kBins = static_cast<size_t>(kBoxStatsBins);
  BoxStats s;
  s.center.assign(kBins, std::vector<int64_t>(kBins, 0));
  s.size.assign(kBins, std::vector<int64_t>(kBins, 0));
  s.width.assign(kBins, 0);
  s.height.assign(kBins, 0);
  s.aspect.assign(static_cast<size_t>(kAspectBins), 0);
  s.boxes_per_image.assign(static_cast<size_t>(kBoxesPerImageMaxBin) + 1, 0);
  s.classes.assign(m.names.size(), ClassBoxStats{});
  std::vector<double> sum_w(m.names.size(), 0.0), sum_h(m.names.size(), 0.0);
  std::vector<int64_t> seen_in(m.names.size(), -1);  // the last image index counted per class
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const data::ManifestEntry& e = m.entries[i];
    ++s.images;
    const auto n = static_cast<int64_t>(e.boxes.size());
    s.max_boxes_per_image = std::max(s.max_boxes_per_image, n);
    ++s.boxes_per_image[static_cast<size_t>(std::min<int64_t>(n, kBoxesPerImageMaxBin))];
    for (const data::Box& b : e.boxes) {
      ++s.boxes;
      if (b.cls >= 0 && static_cast<size_t>(b.cls) < s.classes.size()) {
        const auto c = static_cast<size_t>(b.cls);
        ++s.classes[c].boxes;
        sum_w[c] += b.w;
        sum_h[c] += b.h;
        if (seen_in[c] != static_cast<int64_t>(i)) {
          seen_in[c] = static_cast<int64_t>(i);
          ++s.classes[c].images;
        }
      } else {
        ++s.unnamed_class_boxes;
      }
      if (!Finite(b)) {
        ++s.degenerate;
        continue;
      }
      ++s.center[UnitBin(b.cy, kBoxStatsBins)][UnitBin(b.cx, kBoxStatsBins)];
      ++s.size[UnitBin(b.h, kBoxStatsBins)][UnitBin(b.w, kBoxStatsBins)];
      ++s.width[UnitBin(b.w, kBoxStatsBins)];
      ++s.height[UnitBin(b.h, kBoxStatsBins)];
      if (b.w <= 0 || b.h <= 0) {
        ++s.degenerate;
        continue;
      }
      // In pixels when the size is known: a normalized ratio of a 2:1 image
      // calls a square box wide.
      const double px_w = e.width > 0 ? b.w * e.width : b.w;
      const double px_h = e.height > 0 ? b.h * e.height : b.h;
      ++s.aspect[AspectBin(px_w / px_h)];
    }
  }
  for (size_t c = 0; c < s.classes.size(); ++c) {
    if (s.classes[c].boxes == 0) continue;
    s.classes[c].mean_w = sum_w[c] / static_cast<double>(s.classes[c].boxes);
    s.classes[c].mean_h = sum_h[c] / static_cast<double>(s.classes[c].boxes);
  }
  s.boxes_per_image.resize(
      static_cast<size_t>(std::min<int64_t>(s.max_boxes_per_image, kBoxesPerImageMaxBin)) + 1);
  return s;
}

nlohmann::json BoxStatsJson(const BoxStats& s, const std::vector<std::string>& names) {
  nlohmann::json edges = nlohmann::json::array();
  for (int k = 0; k <= kAspectBins; ++k)
    edges.push_back(std::exp2(static_cast<double>(k) / kBoxAspectStepsPerOctave - kBoxAspectLog2Max));
  nlohmann::json classes = nlohmann::json::array();
  for (size_t c = 0; c < s.classes.size(); ++c) {
    const ClassBoxStats& k = s.classes[c];
    classes.push_back({{"id", c},
                       {"name", c < names.size() ? EscapeInvalidUtf8(names[c]) : std::string()},
                       {"boxes", k.boxes},
                       {"images", k.images},
                       {"mean_w", k.mean_w},
                       {"mean_h", k.mean_h}});
  }
  const double mean = s.images > 0 ? static_cast<double>(s.boxes) / static_cast<double>(s.images) : 0.0;
  return {{"images", s.images},
          {"boxes", s.boxes},
          {"bins", kBoxStatsBins},
          {"center", s.center},
          {"size", s.size},
          {"width", s.width},
          {"height", s.height},
          {"aspect", {{"edges", edges}, {"counts", s.aspect}}},
          {"degenerate", s.degenerate},
          {"boxes_per_image",
           {{"counts", s.boxes_per_image},
            {"last_open", s.max_boxes_per_image > kBoxesPerImageMaxBin},
            {"max", s.max_boxes_per_image},
            {"mean", mean}}},
          {"classes", classes},
          {"unnamed_class_boxes", s.unnamed_class_boxes}};
}

}  // namespace kestrel::app
