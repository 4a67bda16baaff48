#include "data/manifest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/hash.h"
#include "core/json.h"

namespace kestrel::data {
namespace {

double Round6(double v) {
  double r = std::round(v * 1e6) / 1e6;
  return r == 0.0 ? 0.0 : r;  // no negative zero
}

auto BoxKey(const Box& b) { return std::tie(b.cls, b.cx, b.cy, b.w, b.h); }

}  // namespace

bool Manifest::HasReferences() const {
  return std::any_of(entries.begin(), entries.end(),
                     [](const ManifestEntry& e) { return !e.file.path.empty(); });
}

std::vector<Box> CanonicalBoxes(std::vector<Box> boxes) {
  for (auto& b : boxes) {
    b.cx = Round6(b.cx);
    b.cy = Round6(b.cy);
    b.w = Round6(b.w);
    b.h = Round6(b.h);
  }
  std::sort(boxes.begin(), boxes.end(), [](const Box& a, const Box& b) { return BoxKey(a) < BoxKey(b); });
  boxes.erase(std::unique(boxes.begin(), boxes.end()), boxes.end());
  return boxes;
}

std::string CanonicalLabelText(const std::vector<Box>& boxes) {
  std::string out;
  char buf[128];
  for (const auto& b : boxes) {
    std::snprintf(buf, sizeof(buf), "%d %.6f %.6f %.6f %.6f\n", b.cls, b.cx, b.cy, b.w, b.h);
    out += buf;
  }
  return out;
}

std::string LabelHash(const std::vector<Box>& boxes) { return Sha256Hex(CanonicalLabelText(boxes)); }

void Canonicalize(Manifest& m) {
  for (auto& e : m.entries) {
    e.boxes = CanonicalBoxes(std::move(e.boxes));
    e.label_hash = LabelHash(e.boxes);
  }
  std::sort(m.entries.begin(), m.entries.end(), [](const ManifestEntry& a, const ManifestEntry& b) {
    return std::tie(a.path, a.split) < std::tie(b.path, b.split);
  });
}

std::string CanonicalManifestText(const Manifest& m) {
  std::string out = "kestrel-manifest 1\nnames " + DumpJson(nlohmann::json(m.names)) + "\n";
  for (const auto& e : m.entries) {
    out += e.path + '\t' + SplitName(e.split) + '\t' + e.image_sha + '\t' + e.label_hash + '\t' +
           std::to_string(e.width) + '\t' + std::to_string(e.height) + '\n';
  }
  return out;
}

std::string VersionId(const Manifest& m) { return Sha256Hex(CanonicalManifestText(m)); }

std::string ManifestToJson(const Manifest& m) {
  nlohmann::json j;
  j["format"] = "kestrel-manifest";
  // 2: entries may name a referenced file (older readers must refuse it).
  j["format_version"] = m.HasReferences() ? 2 : 1;
  j["names"] = m.names;
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& e : m.entries) {
    nlohmann::json boxes = nlohmann::json::array();
    for (const auto& b : e.boxes) boxes.push_back({b.cls, b.cx, b.cy, b.w, b.h});
    nlohmann::json je = {{"path", e.path},
                         {"split", SplitName(e.split)},
                         {"image_sha", e.image_sha},
                         {"label_hash", e.label_hash},
                         {"width", e.width},
                         {"height", e.height},
                         {"boxes", boxes}};
    if (!e.file.path.empty()) {
      je["file"] = {{"path", e.file.path}, {"size", e.file.size}, {"mtime_ns", e.file.mtime_ns}};
    }
    entries.push_back(std::move(je));
  }
  j["entries"] = entries;
  return DumpJson(j);
}

Result<Manifest> ManifestFromJson(const std::string& text, const std::string& origin) {
  Manifest m;
  try {
    auto j = nlohmann::json::parse(text);
    if (j.value("format", "") != "kestrel-manifest") {
      return Status::Corruption("not a kestrel manifest", {origin, 0, "format"});
    }
    const int format_version = j.value("format_version", 0);
    if (format_version != 1 && format_version != 2) {
      return Status::Corruption("unsupported manifest version", {origin, 0, "format_version"});
    }
    m.names = j.at("names").get<std::vector<std::string>>();
    for (const auto& je : j.at("entries")) {
      ManifestEntry e;
      e.path = je.at("path").get<std::string>();
      auto split = ParseSplit(je.at("split").get<std::string>());
      if (!split.IsOk()) return split.GetStatus().WithLocation({origin, 0, "split"});
      e.split = *split;
      e.image_sha = je.at("image_sha").get<std::string>();
      e.label_hash = je.at("label_hash").get<std::string>();
      e.width = je.at("width").get<int>();
      e.height = je.at("height").get<int>();
      if (format_version >= 2 && je.contains("file")) {
        const auto& jf = je.at("file");
        e.file.path = jf.at("path").get<std::string>();
        e.file.size = jf.at("size").get<uint64_t>();
        e.file.mtime_ns = jf.at("mtime_ns").get<int64_t>();
        if (e.file.path.empty() || e.file.path[0] != '/') {
          return Status::Corruption("referenced file of " + e.path + " is not an absolute path",
                                    {origin, 0, "file.path"});
        }
      }
      for (const auto& jb : je.at("boxes")) {
        e.boxes.push_back({jb.at(0).get<int>(), jb.at(1).get<double>(), jb.at(2).get<double>(),
                           jb.at(3).get<double>(), jb.at(4).get<double>()});
      }
      if (LabelHash(e.boxes) != e.label_hash) {
        return Status::Corruption("label hash mismatch for " + e.path, {origin, 0, "label_hash"});
      }
      m.entries.push_back(std::move(e));
    }
  } catch (const std::exception& ex) {
    return Status::Corruption(std::string("malformed manifest: ") + ex.what(), {origin});
  }
  return m;
}

void AssignSplits(Manifest& m, double val_ratio, uint64_t seed) {
  std::vector<std::pair<std::string, size_t>> order;
  order.reserve(m.entries.size());
  for (size_t i = 0; i < m.entries.size(); ++i) {
    const auto& e = m.entries[i];
    order.emplace_back(Sha256Hex(std::to_string(seed) + ":" + e.image_sha + ":" + e.path), i);
  }
  std::sort(order.begin(), order.end());
  size_t n_val = static_cast<size_t>(std::llround(val_ratio * static_cast<double>(order.size())));
  if (val_ratio > 0 && n_val == 0 && order.size() > 1) n_val = 1;
  for (size_t k = 0; k < order.size(); ++k) {
    m.entries[order[k].second].split = k < n_val ? Split::kVal : Split::kTrain;
  }
}

}  // namespace kestrel::data
