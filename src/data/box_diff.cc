#include "data/box_diff.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace kestrel::data {
namespace {

std::string ClassName(const Manifest& m, int cls) {
  return cls >= 0 && size_t(cls) < m.names.size() ? m.names[size_t(cls)] : std::to_string(cls);
}

std::string Key(const ManifestEntry& e) { return std::string(SplitName(e.split)) + "/" + e.path; }

}  // namespace

double BoxIoU(const Box& a, const Box& b) {
  const double ix =
      std::max(0.0, std::min(a.cx + a.w / 2, b.cx + b.w / 2) - std::max(a.cx - a.w / 2, b.cx - b.w / 2));
  const double iy =
      std::max(0.0, std::min(a.cy + a.h / 2, b.cy + b.h / 2) - std::max(a.cy - a.h / 2, b.cy - b.h / 2));
  const double inter = ix * iy, uni = a.w * a.h + b.w * b.h - inter;
  return uni > 0 ? inter / uni : 0;
}

nlohmann::json BoxDiffCounts::ToJson() const {
  return {{"added", added},
          {"removed", removed},
          {"moved", moved},
          {"relabelled", relabelled},
          {"unchanged", unchanged}};
}

nlohmann::json BoxDiff::ToJson(size_t max_images) const {
  nlohmann::json classes = nlohmann::json::array(), imgs = nlohmann::json::array();
  for (const auto& [name, c] : by_class) {
    nlohmann::json j = c.ToJson();
    j["name"] = name;
    classes.push_back(std::move(j));
  }
  for (size_t i = 0; i < images.size() && i < max_images; ++i) {
    nlohmann::json j = images[i].counts.ToJson();
    j["key"] = images[i].key;
    imgs.push_back(std::move(j));
  }
  return {{"total", total.ToJson()},         {"classes", std::move(classes)}, {"images", std::move(imgs)},
          {"images_changed", images.size()}, {"match_iou", kBoxMatchIoU},     {"moved_iou", kBoxMovedIoU}};
}

BoxDiff DiffBoxes(const Manifest& a, const Manifest& b) {
  BoxDiff out;
  std::map<std::string, const ManifestEntry*> in_a, in_b;
  for (const ManifestEntry& e : a.entries) in_a.emplace(Key(e), &e);
  for (const ManifestEntry& e : b.entries) in_b.emplace(Key(e), &e);
  std::map<std::string, std::pair<const ManifestEntry*, const ManifestEntry*>> all;
  for (const auto& [k, e] : in_a) all[k].first = e;
  for (const auto& [k, e] : in_b) all[k].second = e;
  auto tally = [&](BoxDiffCounts& image, const std::string& cls, int64_t BoxDiffCounts::*field) {
    ++(image.*field);
    ++(out.total.*field);
    ++(out.by_class[cls].*field);
  };
  for (const auto& [key, pair] : all) {
    BoxDiffCounts counts;
    const std::vector<Box> none;
    const std::vector<Box>& ba = pair.first ? pair.first->boxes : none;
    const std::vector<Box>& bb = pair.second ? pair.second->boxes : none;
    // Every pair at or above the match IoU, highest first (ties by index:
    // deterministic).
    std::vector<std::tuple<double, size_t, size_t>> pairs;
    for (size_t i = 0; i < ba.size(); ++i)
      for (size_t j = 0; j < bb.size(); ++j)
        if (double iou = BoxIoU(ba[i], bb[j]); iou >= kBoxMatchIoU) pairs.emplace_back(-iou, i, j);
    std::sort(pairs.begin(), pairs.end());
    std::vector<bool> used_a(ba.size()), used_b(bb.size());
    for (const auto& [neg_iou, i, j] : pairs) {
      if (used_a[i] || used_b[j]) continue;
      used_a[i] = used_b[j] = true;
      const std::string ca = ClassName(a, ba[i].cls), cb = ClassName(b, bb[j].cls);
      const bool moved = -neg_iou < kBoxMovedIoU, relabelled = ca != cb;
      if (moved) tally(counts, cb, &BoxDiffCounts::moved);
      if (relabelled) tally(counts, cb, &BoxDiffCounts::relabelled);
      if (!moved && !relabelled) tally(counts, cb, &BoxDiffCounts::unchanged);
    }
    for (size_t i = 0; i < ba.size(); ++i)
      if (!used_a[i]) tally(counts, ClassName(a, ba[i].cls), &BoxDiffCounts::removed);
    for (size_t j = 0; j < bb.size(); ++j)
      if (!used_b[j]) tally(counts, ClassName(b, bb[j].cls), &BoxDiffCounts::added);
    if (counts.Changed()) out.images.push_back({key, counts});
  }
  return out;
}

}  // namespace kestrel::data
