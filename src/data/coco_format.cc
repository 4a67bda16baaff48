// COCO instances JSON reader.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_set>
#include <utility>

#include "core/json.h"
#include "data/formats.h"
#include "data/text.h"

namespace kestrel::data {
namespace {

using nlohmann::json;

// COCO findings have no line: the JSON is one document.
Finding MakeFinding(Severity sev, const char* check, const std::string& file, std::string field,
                    std::string message, std::string action) {
  return data::MakeFinding(sev, check, file, 0, std::move(field), std::move(message), std::move(action));
}

struct CocoSample {
  Sample sample;
  FindingList findings;
  bool dropped = false;  // file_name cannot be a manifest key (finding already made)
};

// One JSON file, categories still under their original ids.
struct CocoParsed {
  std::map<int64_t, std::string> categories;  // original id -> name
  std::vector<CocoSample> samples;            // PixelBox::cls = original id
  FindingList findings;                       // not tied to one image
  std::vector<std::string> excluded_paths;    // SourceDataset::excluded_paths
};

// A SAX pass over the (already parsed, so well-formed) text that sees every
// key of every object: the parsed document keeps only the last value of a
// repeated key ({"bbox": [..], "bbox": [..]}), a silent choice. Tracks the
// path of the open containers ("annotations[3]") for the message. (A parser
// callback on the DOM parse does the same but made reading COCO ~10x slower.)
class DuplicateKeyScanner : public nlohmann::json_sax<json> {
 public:
  DuplicateKeyScanner(const std::string& origin, FindingList* out) : origin_(origin), out_(out) {}

  bool null() override { return Done(); }
  bool boolean(bool) override { return Done(); }
  bool number_integer(number_integer_t) override { return Done(); }
  bool number_unsigned(number_unsigned_t) override { return Done(); }
  bool number_float(number_float_t, const string_t&) override { return Done(); }
  bool string(string_t&) override { return Done(); }
  bool binary(binary_t&) override { return Done(); }
  bool start_object(std::size_t) override { return Push(false); }
  bool start_array(std::size_t) override { return Push(true); }
  bool end_object() override { return Pop(); }
  bool end_array() override { return Pop(); }
  bool key(string_t& k) override {
    Frame& f = stack_[depth_ - 1];
    f.key = k;
    bool fresh = true;
    if (f.big.empty() && f.keys.size() < 32) {
      fresh = std::find(f.keys.begin(), f.keys.end(), k) == f.keys.end();
      if (fresh) f.keys.push_back(k);
      if (f.keys.size() == 32) f.big.insert(f.keys.begin(), f.keys.end());
    } else {
      fresh = f.big.insert(k).second;
    }
    if (!fresh) Report();
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    bool is_array = false;
    size_t index = 0;
    std::string key;
    std::vector<std::string> keys;  // linear search while small
    std::unordered_set<std::string> big;
  };
  // Frames are reused, so a document of a million small objects costs a few
  // allocations, not a few per object.
  bool Push(bool is_array) {
    if (depth_ == stack_.size()) stack_.emplace_back();
    Frame& f = stack_[depth_++];
    f.is_array = is_array;
    f.index = 0;
    f.key.clear();
    f.keys.clear();
    f.big.clear();
    return true;
  }
  bool Pop() {
    --depth_;
    return Done();
  }
  bool Done() {
    if (depth_ > 0 && stack_[depth_ - 1].is_array) ++stack_[depth_ - 1].index;
    return true;
  }
  void Report() {
    const std::string& key = stack_[depth_ - 1].key;
    if (!out_->WouldKeep("coco.duplicate_key", origin_)) {
      out_->CountOnly(Severity::kError, "coco.duplicate_key", origin_);
      return;
    }
    std::string path;  // of the object holding the repeated key
    for (size_t i = 0; i + 1 < depth_; ++i) {
      const Frame& f = stack_[i];
      path += f.is_array ? "[" + std::to_string(f.index) + "]" : (path.empty() ? "" : ".") + f.key;
    }
    out_->Add(data::MakeFinding(
        Severity::kError, "coco.duplicate_key", origin_, 0, path.empty() ? key : path + "." + key,
        "key '" + key + "' appears more than once in " +
            (path.empty() ? std::string("the top-level object") : path) + "; the last value is used",
        "last value used"));
  }

  const std::string& origin_;
  FindingList* out_;
  std::vector<Frame> stack_;
  size_t depth_ = 0;
};

Result<json> ParseJson(std::string_view text, const std::string& origin, FindingList* findings) {
  // nlohmann reads bytes as UTF-8; UTF-16 would fail with a message quoting
  // the raw (invalid) bytes.
  KESTREL_RETURN_IF_ERROR(RequireNarrowEncoding(text, origin, "JSON file"));
  try {
    json doc = json::parse(text.begin(), text.end());
    DuplicateKeyScanner scanner(origin, findings);
    json::sax_parse(text.begin(), text.end(), &scanner);
    return doc;
  } catch (const json::parse_error& e) {
    size_t byte = std::min<size_t>(e.byte, text.size());
    int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + byte, '\n'));
    return SanitizeStatus(Status::InvalidArgument(
        "malformed JSON at byte " + std::to_string(e.byte) + ": " + e.what(), {origin, line}));
  } catch (const json::exception& e) {
    return SanitizeStatus(Status::InvalidArgument(std::string("malformed JSON: ") + e.what(), {origin}));
  }
}

// Image ids are integers in COCO; some exporters write strings. Either works
// as a key as long as annotations use the same type.
bool IdKey(const json& v, std::string* key) {
  if (v.is_number_integer()) {
    *key = "i" + DumpJson(v);
    return true;
  }
  if (v.is_string()) {
    *key = "s" + v.get<std::string>();
    return true;
  }
  return false;
}

bool GetInt(const json& obj, const char* k, int64_t lo, int64_t hi, int64_t* out) {
  auto it = obj.find(k);
  if (it == obj.end() || !it->is_number()) return false;
  double d = it->get<double>();
  if (!std::isfinite(d) || d != std::floor(d) || d < static_cast<double>(lo) || d > static_cast<double>(hi)) {
    return false;
  }
  *out = it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(d);
  return true;
}

Status ParseCocoDoc(const json& doc, const std::string& origin, const std::string& image_root, Split split,
                    size_t max_boxes, CocoParsed* out) {
  auto err = [&](const std::string& field, const std::string& msg) {
    return Status::InvalidArgument(msg, {origin, 0, field});
  };
  if (!doc.is_object()) return err("", "expected a JSON object with images, annotations, categories");
  auto cats = doc.find("categories");
  if (cats == doc.end() || !cats->is_array()) return err("categories", "missing or not an array");
  for (size_t i = 0; i < cats->size(); ++i) {
    const json& c = (*cats)[i];
    std::string where = "categories[" + std::to_string(i) + "]";
    int64_t id = 0;
    if (!c.is_object() ||
        !GetInt(c, "id", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(), &id)) {
      return err(where + ".id", "category id must be an integer");
    }
    auto name = c.find("name");
    if (name == c.end() || !name->is_string()) return err(where + ".name", "must be a string");
    if (!out->categories.emplace(id, name->get<std::string>()).second) {
      return err(where + ".id", "duplicate category id " + std::to_string(id));
    }
  }
  auto images = doc.find("images");
  if (images == doc.end() || !images->is_array()) return err("images", "missing or not an array");
  std::map<std::string, size_t> by_id;    // id key -> sample index
  std::map<std::string, size_t> by_file;  // rel_path -> images[] index
  for (size_t i = 0; i < images->size(); ++i) {
    const json& im = (*images)[i];
    std::string where = "images[" + std::to_string(i) + "]";
    std::string key;
    if (!im.is_object() || !im.contains("id") || !IdKey(im["id"], &key)) {
      return err("id", where + ": image id must be an integer or a string");
    }
    std::string id_text = DumpJson(im["id"]);
    auto fn = im.find("file_name");
    if (fn == im.end() || !fn->is_string()) {
      return err("file_name", "image id " + id_text + " (" + where + "): missing file_name");
    }
    Result<std::string> rel = SafeRelativePath(fn->get<std::string>());
    if (!rel.IsOk()) {
      return err("file_name", "image id " + id_text + " (" + where + "): " + rel.GetStatus().Message());
    }
    auto [dup, fresh] = by_id.emplace(key, out->samples.size());
    if (!fresh) {
      return err("id", "duplicate image id " + id_text + " (" + where + " and images[" +
                           std::to_string(dup->second) + "])");
    }
    if (!by_file.emplace(*rel, i).second) {
      return err("file_name", "image id " + id_text + " (" + where + "): file_name '" + *rel +
                                  "' is used by images[" + std::to_string(by_file[*rel]) + "] too");
    }
    CocoSample cs;
    Sample& s = cs.sample;
    if (auto bad = CheckManifestPath(*rel)) {
      // Kept in by_id so its annotations are not "unknown image" noise.
      cs.dropped = true;
      cs.findings.Add(MakeFinding(Severity::kError, bad->check.c_str(), JoinPath(image_root, *rel),
                                  "file_name", "image id " + id_text + " (" + where + "): " + bad->message,
                                  "sample excluded"));
    }
    s.rel_path = *rel;
    s.image_path = JoinPath(image_root, *rel);
    s.label_path = origin;
    s.split = split;
    s.has_label = doc.contains("annotations");
    s.boxes_in_pixels = true;
    for (const char* k : {"width", "height"}) {
      int64_t v = 0;
      if (im.contains(k) && !im[k].is_null()) {
        if (!GetInt(im, k, 0, std::numeric_limits<int>::max(), &v)) {
          return err(k, "image id " + id_text + " (" + where + "): must be a non-negative integer");
        }
      }
      (k[0] == 'w' ? s.declared_width : s.declared_height) = static_cast<int>(v);
    }
    out->samples.push_back(std::move(cs));
  }
  auto anns = doc.find("annotations");
  if (anns == doc.end() || anns->is_null()) {
    out->findings.push_back(MakeFinding(Severity::kWarning, "coco.no_annotations", origin, "annotations",
                                        "no annotations array", "images kept without labels"));
    return {};
  }
  if (!anns->is_array()) return err("annotations", "must be an array");
  std::map<std::string, size_t> ann_ids;  // id key -> first annotations[] index
  for (size_t i = 0; i < anns->size(); ++i) {
    const json& a = (*anns)[i];
    std::string where = "annotations[" + std::to_string(i) + "]";
    if (a.is_object() && a.contains("id")) {
      where += " (id " + DumpJson(a["id"]) + ")";
      std::string id_key;
      if (IdKey(a["id"], &id_key)) {
        auto [first, fresh] = ann_ids.emplace(id_key, i);
        if (!fresh) {
          // Usually two files merged without renumbering: which one is meant?
          out->findings.Add(MakeFinding(Severity::kError, "coco.duplicate_annotation_id", origin, "id",
                                        where + ": annotation id " + DumpJson(a["id"]) +
                                            " is also used by annotations[" + std::to_string(first->second) +
                                            "]",
                                        "both kept"));
        }
      }
    }
    std::string key;
    auto image_id = a.is_object() ? a.find("image_id") : a.end();
    auto sample = (image_id != a.end() && IdKey(*image_id, &key)) ? by_id.find(key) : by_id.end();
    if (sample == by_id.end()) {
      std::string shown = image_id != a.end() ? image_id->dump() : std::string("(missing)");
      out->findings.push_back(MakeFinding(Severity::kError, "coco.unknown_image", origin, "image_id",
                                          where + ": no image with id " + shown, "annotation dropped"));
      continue;
    }
    CocoSample& cs = out->samples[sample->second];
    auto find = [&](Severity sev, const char* check, const char* field, const std::string& msg,
                    const char* action) {
      cs.findings.push_back(
          MakeFinding(sev, check, cs.sample.image_path, field, origin + " " + where + ": " + msg, action));
    };
    auto crowd = a.find("iscrowd");
    if (crowd != a.end() &&
        ((crowd->is_number() && crowd->get<double>() != 0) || (crowd->is_boolean() && crowd->get<bool>()))) {
      find(Severity::kInfo, "coco.crowd", "iscrowd", "crowd annotation", "annotation skipped");
      continue;
    }
    int64_t cat = 0;
    if (!GetInt(a, "category_id", std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max(),
                &cat) ||
        out->categories.count(cat) == 0) {
      std::string shown = a.contains("category_id") ? DumpJson(a["category_id"]) : "(missing)";
      find(Severity::kError, "coco.unknown_category", "category_id", "no category with id " + shown,
           "annotation dropped");
      continue;
    }
    auto bbox = a.find("bbox");
    bool ok = bbox != a.end() && bbox->is_array() && bbox->size() == 4;
    double v[4] = {0, 0, 0, 0};
    for (size_t k = 0; ok && k < 4; ++k) {
      ok = (*bbox)[k].is_number();
      if (ok) v[k] = (*bbox)[k].get<double>();
      ok = ok && std::isfinite(v[k]);
    }
    if (!ok) {
      find(Severity::kError, "coco.bbox", "bbox", "bbox must be 4 finite numbers [x, y, width, height]",
           "annotation dropped");
      continue;
    }
    double x1 = v[0], y1 = v[1], x2 = v[0] + v[2], y2 = v[1] + v[3];
    double iw = cs.sample.declared_width, ih = cs.sample.declared_height;
    constexpr double kEps = 1e-3;  // sub-pixel float noise is not worth a warning
    if (iw > 0 && ih > 0 && (x1 < -kEps || y1 < -kEps || x2 > iw + kEps || y2 > ih + kEps)) {
      find(Severity::kWarning, "label.out_of_bounds", "bbox",
           "box xyxy [" + FormatNumber(x1) + ", " + FormatNumber(y1) + ", " + FormatNumber(x2) + ", " +
               FormatNumber(y2) + "] extends outside the " + FormatNumber(iw) + "x" + FormatNumber(ih) +
               " image",
           "clipped");
    }
    // Clip only real overshoot (beyond 1e-6 of the side), as the YOLO parser
    // does: clipping float noise would change labels on a YOLO -> COCO trip.
    if (iw > 0 && (x1 < -1e-6 * iw || x2 > iw * (1 + 1e-6))) {
      x1 = std::clamp(x1, 0.0, iw), x2 = std::clamp(x2, 0.0, iw);
    }
    if (ih > 0 && (y1 < -1e-6 * ih || y2 > ih * (1 + 1e-6))) {
      y1 = std::clamp(y1, 0.0, ih), y2 = std::clamp(y2, 0.0, ih);
    }
    if (x2 - x1 <= 0 || y2 - y1 <= 0) {
      find(Severity::kWarning, "label.degenerate", "bbox",
           "box has zero or negative size (w=" + FormatNumber(x2 - x1) + ", h=" + FormatNumber(y2 - y1) + ")",
           "box dropped");
      continue;
    }
    if (cs.sample.pixel_boxes.size() >= max_boxes) {
      if (cs.findings.Count(Severity::kError, "label.too_many_boxes") == 0) {
        find(Severity::kError, "label.too_many_boxes", "bbox",
             "more than " + std::to_string(max_boxes) + " boxes for one image (max_boxes_per_image)",
             "sample excluded");
      }
      continue;
    }
    PixelBox pb;
    pb.cls = static_cast<int>(cat);
    pb.x1 = x1, pb.y1 = y1, pb.x2 = x2, pb.y2 = y2;
    pb.line = static_cast<int>(std::min<size_t>(i + 1, std::numeric_limits<int>::max()));
    cs.sample.pixel_boxes.push_back(pb);
  }
  return {};
}

// Samples whose file_name cannot be a manifest key leave with their findings.
void DropBadSamples(CocoParsed* part) {
  std::vector<CocoSample> kept;
  for (CocoSample& s : part->samples) {
    if (s.dropped) {
      part->findings.Merge(s.findings);
      part->excluded_paths.push_back(s.sample.image_path);
    } else {
      kept.push_back(std::move(s));
    }
  }
  part->samples = std::move(kept);
}

// Remaps categories to 0..K-1 by original id, sorts samples, flattens findings.
SourceDataset Finalize(std::vector<CocoParsed> parts, const std::map<int64_t, std::string>& categories,
                       const std::string& root) {
  SourceDataset ds;
  ds.root = root;
  ds.format = "coco";
  std::map<int64_t, int> remap;
  std::vector<std::string> where;
  for (const auto& [id, name] : categories) {
    remap[id] = static_cast<int>(ds.names.size());
    ds.names.push_back(name);
    where.push_back("category id " + std::to_string(id));
  }
  CheckClassNames(ds.names, where, root, &ds.findings);
  std::vector<CocoSample> all;
  for (CocoParsed& p : parts) {
    ds.findings.Merge(p.findings);
    ds.excluded_paths.insert(ds.excluded_paths.end(), p.excluded_paths.begin(), p.excluded_paths.end());
    for (CocoSample& s : p.samples) all.push_back(std::move(s));
  }
  std::sort(all.begin(), all.end(), [](const CocoSample& a, const CocoSample& b) {
    return std::tie(a.sample.rel_path, a.sample.split) < std::tie(b.sample.rel_path, b.sample.split);
  });
  for (CocoSample& s : all) {
    for (PixelBox& b : s.sample.pixel_boxes) b.cls = remap[b.cls];
    ds.findings.Merge(s.findings);
    ds.samples.push_back(std::move(s.sample));
  }
  return ds;
}

// "instances_train2017.json" -> train; Roboflow "train/_annotations.coco.json" -> train.
Split SplitFromJsonPath(const std::string& path, std::string* name) {
  std::string stem = Stem(path);
  if (stem.rfind("instances_", 0) == 0) stem = stem.substr(10);
  *name = stem;
  while (!stem.empty() && std::isdigit(static_cast<unsigned char>(stem.back()))) stem.pop_back();
  Result<Split> s = ParseSplit(stem);
  if (s.IsOk()) return *s;
  std::string parent = BaseName(DirName(path));
  s = ParseSplit(parent);
  if (s.IsOk()) {
    *name = parent;
    return *s;
  }
  name->clear();
  return Split::kUnassigned;
}

// Where the images of `json_path` live: the first candidate folder holding
// the first image's file_name.
std::string FindImageRoot(const std::string& json_path, const std::string& split_name, const json& doc,
                          Env& env) {
  std::string dir = DirName(json_path);
  std::string root = BaseName(dir) == "annotations" ? DirName(dir) : dir;
  std::vector<std::string> cands;
  if (!split_name.empty()) {
    std::string shortname = split_name;
    while (!shortname.empty() && std::isdigit(static_cast<unsigned char>(shortname.back()))) {
      shortname.pop_back();
    }
    for (const std::string& s : {split_name, shortname}) {
      cands.push_back(JoinPath(root, "images/" + s));
      cands.push_back(JoinPath(root, s));
    }
  }
  cands.push_back(JoinPath(root, "images"));
  cands.push_back(root);
  cands.push_back(dir);
  std::string first;
  if (doc.is_object() && doc.contains("images") && doc["images"].is_array() && !doc["images"].empty() &&
      doc["images"][0].is_object() && doc["images"][0].contains("file_name") &&
      doc["images"][0]["file_name"].is_string()) {
    Result<std::string> rel = SafeRelativePath(doc["images"][0]["file_name"].get<std::string>());
    if (rel.IsOk()) first = *rel;
  }
  if (!first.empty()) {
    for (const std::string& c : cands) {
      if (env.Stat(JoinPath(c, first)).is_regular) return c;
    }
  }
  for (const std::string& c : cands) {
    if (env.Stat(c).is_dir && c != root && c != dir) return c;
  }
  return root;
}

}  // namespace

Result<SourceDataset> ReadCocoJson(std::string_view text, const std::string& origin,
                                   const std::string& image_root, Split split) {
  std::vector<CocoParsed> parts(1);
  Result<json> doc = ParseJson(text, origin, &parts[0].findings);
  if (!doc.IsOk()) return doc.GetStatus();
  try {
    KESTREL_RETURN_IF_ERROR(
        SanitizeStatus(ParseCocoDoc(*doc, origin, image_root, split, kDefaultMaxBoxesPerImage, &parts[0])));
    DropBadSamples(&parts[0]);
    std::map<int64_t, std::string> cats = parts[0].categories;
    return Finalize(std::move(parts), cats, image_root);
  } catch (const json::exception& e) {
    return SanitizeStatus(
        Status::InvalidArgument(std::string("unexpected JSON structure: ") + e.what(), {origin}));
  }
}

Result<SourceDataset> ReadCocoDataset(const std::string& path, const ReadOptions& opts) {
  Env& env = opts.env != nullptr ? *opts.env : Env::Default();
  FileInfo fi = env.Stat(path);
  if (!fi.exists) return Status::NotFound("dataset path does not exist", {path});
  std::vector<std::string> jsons;
  std::string root = path;
  if (fi.is_dir) {
    auto list = [&](const std::string& dir, bool instances_only) {
      std::vector<std::string> out;
      auto names = env.ListDir(dir);
      if (!names.IsOk()) return out;
      for (const std::string& n : *names) {
        if (Extension(n) == "json" && (!instances_only || n.rfind("instances_", 0) == 0)) {
          out.push_back(JoinPath(dir, n));
        }
      }
      return out;
    };
    std::string ann = JoinPath(path, "annotations");
    jsons = list(ann, true);
    if (jsons.empty()) jsons = list(ann, false);
    if (jsons.empty()) jsons = list(path, false);
    if (jsons.empty()) {
      return Status::NotFound("no COCO JSON found (annotations/instances_<split>.json)", {path});
    }
  } else {
    jsons.push_back(path);
    root = DirName(path);
    if (BaseName(root) == "annotations") root = DirName(root);
  }
  std::vector<CocoParsed> parts;
  std::map<int64_t, std::string> categories;
  bool has_splits = false;
  for (const std::string& jp : jsons) {
    FileInfo jf = env.Stat(jp);
    if (jf.size > opts.max_json_bytes) {
      return Status::ResourceExhausted("COCO JSON is " + std::to_string(jf.size) +
                                           " bytes, over the limit of " +
                                           std::to_string(opts.max_json_bytes) + " (max_json_bytes)",
                                       {jp});
    }
    Result<std::string> text = env.ReadFile(jp, opts.max_json_bytes);
    if (!text.IsOk()) return text.GetStatus();
    CocoParsed part;
    Result<json> doc = ParseJson(*text, jp, &part.findings);
    if (!doc.IsOk()) return doc.GetStatus();
    std::string split_name;
    Split split = SplitFromJsonPath(jp, &split_name);
    has_splits = has_splits || split != Split::kUnassigned;
    try {
      std::string image_root = FindImageRoot(jp, split_name, *doc, env);
      KESTREL_RETURN_IF_ERROR(ParseCocoDoc(*doc, jp, image_root, split, opts.max_boxes_per_image, &part));
      DropBadSamples(&part);
    } catch (const json::exception& e) {
      return Status::InvalidArgument(std::string("unexpected JSON structure: ") + e.what(), {jp});
    }
    for (const auto& [id, name] : part.categories) {
      auto [it, fresh] = categories.emplace(id, name);
      if (!fresh && it->second != name) {
        return Status::InvalidArgument("category id " + std::to_string(id) + " is '" + name + "' here but '" +
                                           it->second + "' in another file",
                                       {jp, 0, "categories"});
      }
    }
    // A listed image that is not on disk cannot be imported.
    std::vector<CocoSample> kept;
    for (CocoSample& s : part.samples) {
      if (env.Stat(s.sample.image_path).is_regular) {
        kept.push_back(std::move(s));
        continue;
      }
      part.findings.push_back(MakeFinding(Severity::kError, "image.missing", s.sample.image_path, "file_name",
                                          "image listed in " + jp + " is not on disk", "sample excluded"));
    }
    part.samples = std::move(kept);
    parts.push_back(std::move(part));
  }
  SourceDataset ds = Finalize(std::move(parts), categories, root);
  ds.has_splits = has_splits;
  if (ds.samples.empty()) return Status::NotFound("no images found on disk for this COCO dataset", {path});
  return ds;
}

}  // namespace kestrel::data
