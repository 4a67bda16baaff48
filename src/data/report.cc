// Validation report, version summary and manifest diff: the data behind
// `dataset validate`, `dataset show` and `dataset diff`.
#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "data/analyze.h"
#include "data/text.h"
#include "data/version.h"

namespace kestrel::data {

void ImportOptions::Bind(OptionSet& s) {
  s.Choice("format", &format, {"auto", "yolo", "coco", "voc", "label-studio", "cvat"},
           "source format (auto-detected by default; label-studio and cvat: an export file, images under its "
           "folder)")
      .Float("val_ratio", &val_ratio, "fraction of images put in val when the source has no split", 0.0, 0.9)
      .Int("seed", &seed, "seed of the deterministic split", 0)
      .Bool("allow_errors", &allow_errors, "import anyway, excluding (and listing) bad samples")
      .Int("max_pixels", &max_pixels, "largest width*height accepted (decompression-bomb guard)", 1)
      .Int("max_label_bytes", &max_label_bytes, "largest label/annotation file accepted, bytes", 1)
      .Int("max_boxes_per_image", &max_boxes_per_image,
           "most boxes one image may have (more: sample excluded)", 1)
      .Int("near_dup_distance", &near_dup_distance, "pHash Hamming distance counted as near duplicate", 0, 64)
      .Int("imgsz", &imgsz, "training image size used for tiny-object statistics", 32, 8192)
      .Float("tiny_object_px", &tiny_object_px, "objects with a side below this at imgsz are tiny", 0.0, 1e6)
      .Float("imbalance_ratio", &imbalance_ratio,
             "warn when the largest class exceeds a class by this factor", 1.0, 1e9)
      .Int("threads", &threads, "worker threads, 0 = all cores", 0, 1024)
      .Choice(
          "data_mode", &data_mode, {"copy", "reference"},
          "copy: images become blobs of the home; reference: the version records each image's path, size, "
          "mtime and hash and reads the file (it must stay where it is, unchanged)");
}

int64_t ValidationReport::Count(Severity s) const { return findings.Count(s); }

namespace {

nlohmann::json ImageRefJson(const ImageRef& r) { return {{"path", r.path}, {"split", SplitName(r.split)}}; }

// A string member of `j`, or "" (absent, or another type in an odd report).
std::string TextOf(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// An int member of `j` in [lo, hi], or `fallback`.
int IntOf(const nlohmann::json& j, const char* key, int lo, int hi, int fallback) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return fallback;
  const auto v = it->get<int64_t>();
  return v >= lo && v <= hi ? static_cast<int>(v) : fallback;
}

// {path, split} back; no path (or no object) is no image.
ImageRef ImageRefOf(const nlohmann::json& j, const char* key) {
  ImageRef r;
  auto it = j.find(key);
  if (it == j.end() || !it->is_object()) return r;
  r.path = TextOf(*it, "path");
  if (auto split = ParseSplit(TextOf(*it, "split")); split.IsOk()) r.split = *split;
  return r;
}

}  // namespace

nlohmann::json FindingToJson(const Finding& f) {
  nlohmann::json j = {{"severity", SeverityName(f.severity)},
                      {"check", f.check},
                      {"file", f.file},
                      {"line", f.line},
                      {"field", f.field},
                      {"message", f.message},
                      {"action", f.action}};
  if (!f.image.path.empty()) j["image"] = ImageRefJson(f.image);
  if (!f.other.path.empty()) {
    j["other"] = ImageRefJson(f.other);
    j["other"]["file"] = f.other_file;
  }
  if (f.distance >= 0) j["distance"] = f.distance;
  return j;
}

Finding FindingFromJson(const nlohmann::json& j) {
  Finding f;
  if (!j.is_object()) return f;
  const std::string severity = TextOf(j, "severity");
  f.severity = severity == "error"     ? Severity::kError
               : severity == "warning" ? Severity::kWarning
                                       : Severity::kInfo;
  f.check = TextOf(j, "check");
  f.file = TextOf(j, "file");
  f.line = IntOf(j, "line", 0, std::numeric_limits<int>::max(), 0);
  f.field = TextOf(j, "field");
  f.message = TextOf(j, "message");
  f.action = TextOf(j, "action");
  f.image = ImageRefOf(j, "image");
  f.other = ImageRefOf(j, "other");
  if (auto it = j.find("other"); it != j.end() && it->is_object()) f.other_file = TextOf(*it, "file");
  f.distance = IntOf(j, "distance", 0, 64, -1);
  return f;
}

nlohmann::json ValidationReport::ToJson() const {
  nlohmann::json j;
  j["source"] = EscapeInvalidUtf8(source);
  j["format"] = EscapeInvalidUtf8(format);
  nlohmann::json jn = nlohmann::json::array();
  for (const auto& n : names) jn.push_back(EscapeInvalidUtf8(n));
  j["names"] = jn;
  j["images_total"] = images_total;
  j["images_excluded"] = images_excluded;
  nlohmann::json ex = nlohmann::json::array();
  for (size_t i = 0; i < excluded.size() && i < kMaxExcludedListed; ++i)
    ex.push_back(EscapeInvalidUtf8(excluded[i]));
  j["excluded"] = ex;
  j["excluded_omitted"] = excluded.size() > kMaxExcludedListed ? excluded.size() - kMaxExcludedListed : 0;
  j["boxes"] = boxes;
  j["class_counts"] = class_counts;
  j["tiny_counts"] = tiny_counts;
  j["near_duplicate_pairs"] = near_duplicate_pairs;
  j["leakage_pairs"] = leakage_pairs;
  j["errors"] = Count(Severity::kError);
  j["warnings"] = Count(Severity::kWarning);
  j["infos"] = Count(Severity::kInfo);
  // Exact counts per check; "findings" holds the stored examples only.
  nlohmann::json bc = nlohmann::json::array();
  for (const auto& c : findings.ByCheck()) {
    bc.push_back({{"severity", SeverityName(c.severity)},
                  {"check", c.check},
                  {"count", c.count},
                  {"listed", c.examples},
                  {"omitted", c.count - c.examples}});
  }
  j["findings_by_check"] = bc;
  j["findings_total"] = findings.Total();
  j["findings_omitted"] = findings.Omitted();
  j["findings_limits"] = {{"per_check", findings.MaxPerCheck()},
                          {"per_file_and_check", findings.MaxPerFileCheck()}};
  nlohmann::json top = nlohmann::json::array();
  for (const auto& f : findings.TopFiles(10)) {
    top.push_back({{"file", EscapeInvalidUtf8(f.file)},
                   {"errors", f.by_severity[static_cast<size_t>(Severity::kError)]},
                   {"warnings", f.by_severity[static_cast<size_t>(Severity::kWarning)]},
                   {"infos", f.by_severity[static_cast<size_t>(Severity::kInfo)]}});
  }
  j["files_with_most_findings"] = top;
  nlohmann::json fs = nlohmann::json::array();
  for (const auto& f : findings) fs.push_back(FindingToJson(f));  // examples are valid UTF-8 already
  j["findings"] = fs;
  return j;
}

std::string ValidationReport::ToText(size_t max_per_check) const {
  std::string out;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "Validation of %s (%s): %lld images, %lld excluded, %lld boxes\n",
                EscapeInvalidUtf8(source).c_str(), format.c_str(), static_cast<long long>(images_total),
                static_cast<long long>(images_excluded), static_cast<long long>(boxes));
  out += buf;
  std::snprintf(buf, sizeof(buf), "  %lld errors, %lld warnings, %lld info\n",
                static_cast<long long>(Count(Severity::kError)),
                static_cast<long long>(Count(Severity::kWarning)),
                static_cast<long long>(Count(Severity::kInfo)));
  out += buf;
  if (!names.empty()) {
    std::snprintf(buf, sizeof(buf), "\n  %-4s %-24s %10s %8s\n", "id", "class", "instances", "tiny");
    out += buf;
    for (size_t c = 0; c < names.size(); ++c) {
      std::snprintf(buf, sizeof(buf), "  %-4zu %-24s %10lld %8lld\n", c, names[c].c_str(),
                    static_cast<long long>(c < class_counts.size() ? class_counts[c] : 0),
                    static_cast<long long>(c < tiny_counts.size() ? tiny_counts[c] : 0));
      out += buf;
    }
  }
  // Group by severity then check, in a stable order; counts are exact, the
  // examples are the stored ones.
  for (const auto& c : findings.ByCheck()) {
    std::vector<const Finding*> list;
    for (const auto& f : findings) {
      if (f.severity == c.severity && f.check == c.check) list.push_back(&f);
    }
    {
      std::snprintf(buf, sizeof(buf), "\n%s %s (%lld)\n", SeverityName(c.severity), c.check.c_str(),
                    static_cast<long long>(c.count));
      out += buf;
      for (size_t k = 0; k < list.size() && k < max_per_check; ++k) {
        const Finding& f = *list[k];
        std::string loc = f.file;
        if (f.line > 0) loc += ":" + std::to_string(f.line);
        if (!f.field.empty()) loc += (loc.empty() ? "" : " ") + std::string("[") + f.field + "]";
        out += "  " + (loc.empty() ? std::string() : loc + ": ") + f.message;
        if (!f.action.empty()) out += " -> " + f.action;
        out += "\n";
      }
      const int64_t shown = static_cast<int64_t>(std::min(list.size(), max_per_check));
      if (c.count > shown) {
        out += "  ... and " + std::to_string(c.count - shown) + " more (--json lists " +
               std::to_string(c.examples) + " of " + std::to_string(c.count) + ")\n";
      }
    }
  }
  const auto top = findings.TopFiles(3);
  if (!top.empty() && top[0].Total() > static_cast<int64_t>(max_per_check)) {
    out += "\nfiles with the most findings:\n";
    for (const auto& f : top)
      out += "  " + EscapeInvalidUtf8(f.file) + ": " + std::to_string(f.Total()) + "\n";
  }
  return out;
}

nlohmann::json SummarizeVersion(const Manifest& m, const ValidationReport& r) {
  nlohmann::json j;
  std::map<std::string, std::array<int64_t, 3>> splits;  // images, boxes, backgrounds
  std::map<std::string, std::vector<int64_t>> per_class;
  for (Split s : {Split::kTrain, Split::kVal, Split::kTest})
    per_class[SplitName(s)].assign(m.names.size(), 0);
  static const std::vector<std::pair<int, std::string>> kSize = {
      {160, "<=160"}, {320, "<=320"}, {640, "<=640"}, {1280, "<=1280"}, {2560, "<=2560"}, {1 << 30, ">2560"}};
  static const std::vector<std::pair<int, std::string>> kObjects = {
      {0, "0"}, {1, "1"}, {2, "2"}, {3, "3"}, {4, "4"}, {9, "5-9"}, {19, "10-19"}, {1 << 30, "20+"}};
  std::map<std::string, int64_t> size_hist, obj_hist;
  for (const auto& e : m.entries) {
    auto& sp = splits[SplitName(e.split)];
    ++sp[0];
    sp[1] += static_cast<int64_t>(e.boxes.size());
    if (e.boxes.empty()) ++sp[2];
    for (const auto& b : e.boxes) {
      auto& v = per_class[SplitName(e.split)];
      if (b.cls >= 0 && static_cast<size_t>(b.cls) < v.size()) ++v[static_cast<size_t>(b.cls)];
    }
    int side = std::max(e.width, e.height);
    for (const auto& [lim, name] : kSize) {
      if (side <= lim) {
        ++size_hist[name];
        break;
      }
    }
    int n = static_cast<int>(e.boxes.size());
    for (const auto& [lim, name] : kObjects) {
      if (n <= lim) {
        ++obj_hist[name];
        break;
      }
    }
  }
  nlohmann::json js = nlohmann::json::object();
  for (const auto& [name, v] : splits) js[name] = {{"images", v[0]}, {"boxes", v[1]}, {"backgrounds", v[2]}};
  j["splits"] = js;
  nlohmann::json classes = nlohmann::json::array();
  for (size_t c = 0; c < m.names.size(); ++c) {
    classes.push_back({{"id", c},
                       {"name", EscapeInvalidUtf8(m.names[c])},
                       {"train", per_class["train"][c]},
                       {"val", per_class["val"][c]},
                       {"test", per_class["test"][c]}});
  }
  j["classes"] = classes;
  nlohmann::json sh = nlohmann::json::array(), oh = nlohmann::json::array();
  for (const auto& [lim, name] : kSize) sh.push_back({{"max_side", name}, {"images", size_hist[name]}});
  for (const auto& [lim, name] : kObjects) oh.push_back({{"objects", name}, {"images", obj_hist[name]}});
  j["image_size_histogram"] = sh;
  j["objects_per_image"] = oh;
  std::map<std::string, int64_t> by_check;
  for (const auto& c : r.findings.ByCheck())
    by_check[std::string(SeverityName(c.severity)) + " " + c.check] += c.count;
  j["findings"] = {{"errors", r.Count(Severity::kError)},
                   {"warnings", r.Count(Severity::kWarning)},
                   {"infos", r.Count(Severity::kInfo)},
                   {"by_check", by_check}};
  j["images_excluded"] = r.images_excluded;
  return j;
}

nlohmann::json ManifestDiff::ToJson() const {
  return {{"added", added},
          {"removed", removed},
          {"image_changed", image_changed},
          {"labels_changed", labels_changed},
          {"split_moved", split_moved},
          {"names_changed", names_changed}};
}

ManifestDiff DiffManifests(const Manifest& a, const Manifest& b) {
  ManifestDiff d;
  d.names_changed = a.names != b.names;
  auto key = [](const ManifestEntry& e) { return std::string(SplitName(e.split)) + "/" + e.path; };
  std::map<std::string, const ManifestEntry*> ka, kb;
  std::map<std::string, std::vector<const ManifestEntry*>> pa, pb;  // by path, any split
  for (const auto& e : a.entries) {
    ka[key(e)] = &e;
    pa[e.path].push_back(&e);
  }
  for (const auto& e : b.entries) {
    kb[key(e)] = &e;
    pb[e.path].push_back(&e);
  }
  std::set<std::string> moved_paths;
  for (const auto& [path, la] : pa) {
    auto it = pb.find(path);
    if (it == pb.end() || la.size() != 1 || it->second.size() != 1) continue;
    const ManifestEntry* x = la[0];
    const ManifestEntry* y = it->second[0];
    if (x->split != y->split && x->image_sha == y->image_sha) {
      d.split_moved.push_back(path + " (" + SplitName(x->split) + " -> " + SplitName(y->split) + ")");
      moved_paths.insert(path);
      if (x->label_hash != y->label_hash) d.labels_changed.push_back(key(*y));
    }
  }
  for (const auto& [k, e] : ka) {
    if (moved_paths.count(e->path)) continue;
    auto it = kb.find(k);
    if (it == kb.end()) {
      d.removed.push_back(k);
    } else if (it->second->image_sha != e->image_sha) {
      d.image_changed.push_back(k);
    } else if (it->second->label_hash != e->label_hash) {
      d.labels_changed.push_back(k);
    }
  }
  for (const auto& [k, e] : kb) {
    if (moved_paths.count(e->path)) continue;
    if (!ka.count(k)) d.added.push_back(k);
  }
  return d;
}

}  // namespace kestrel::data
