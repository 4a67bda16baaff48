#include "data/corrections.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <pugixml.hpp>
#include <set>
#include <string>
#include <utility>

#include "core/hash.h"
#include "data/image.h"
#include "data/text.h"

namespace kestrel::data {
namespace {

// A box may reach past the border by this fraction of the image's side (the
// round trip of percent coordinates) and is then clipped; further is an error.
constexpr double kBorderTolerance = 1e-4;

void Error(Corrections& c, const std::string& check, const std::string& field, const std::string& message) {
  c.findings.Add(MakeFinding(Severity::kError, check, c.file, 0, field, message, "nothing stored"));
}

std::string PercentDecoded(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    auto hex = [](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += char(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// Label Studio's data.image: a URL, a local-files URL ("...?d=PATH") or a
// path; the image's path, decoded.
std::string LabelStudioImagePath(const std::string& url) {
  std::string s = url;
  const size_t d = s.find("?d=");
  if (d != std::string::npos) {
    s = s.substr(d + 3);
    const size_t amp = s.find('&');
    if (amp != std::string::npos) s.resize(amp);
  } else {
    const size_t cut = s.find_first_of("?#");
    if (cut != std::string::npos) s.resize(cut);
    const size_t scheme = s.find("://");
    if (scheme != std::string::npos) {
      const size_t path = s.find('/', scheme + 3);
      s = path == std::string::npos ? "" : s.substr(path);
    }
  }
  return PercentDecoded(s);
}

// x1, y1, x2, y2 as fractions of the image -> a normalized centre box;
// false (an error finding added) when it is past the border or empty.
bool ToBox(Corrections& c, double x1, double y1, double x2, double y2, const std::string& field,
           CorrectionBox* out) {
  if (!(x2 > x1 && y2 > y1)) {
    Error(c, "corrections.empty_box", field, "the box has no area");
    return false;
  }
  if (x1 < -kBorderTolerance || y1 < -kBorderTolerance || x2 > 1 + kBorderTolerance ||
      y2 > 1 + kBorderTolerance) {
    Error(c, "corrections.out_of_bounds", field,
          "the box reaches outside the image (" + FormatNumber(x1) + ", " + FormatNumber(y1) + ")-(" +
              FormatNumber(x2) + ", " + FormatNumber(y2) + " of the image size)");
    return false;
  }
  x1 = std::clamp(x1, 0.0, 1.0);
  y1 = std::clamp(y1, 0.0, 1.0);
  x2 = std::clamp(x2, 0.0, 1.0);
  y2 = std::clamp(y2, 0.0, 1.0);
  out->cx = (x1 + x2) / 2;
  out->cy = (y1 + y2) / 2;
  out->w = x2 - x1;
  out->h = y2 - y1;
  out->field = field;
  return true;
}

bool Number(const nlohmann::json& obj, const char* key, double* out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number()) return false;
  *out = it->get<double>();
  return std::isfinite(*out);
}

}  // namespace

Result<Corrections> ParseLabelStudioExport(std::string_view json, const std::string& file) {
  nlohmann::json doc = nlohmann::json::parse(json.begin(), json.end(), nullptr, false);
  if (doc.is_discarded())
    return Status::InvalidArgument("not a JSON document (a Label Studio export is a JSON array of tasks)",
                                   {file, 0, ""});
  Corrections c;
  c.file = file;
  c.format = "label-studio";
  if (doc.is_object()) doc = nlohmann::json::array({doc});  // one task exported alone
  if (!doc.is_array())
    return Status::InvalidArgument("a Label Studio export is an array of tasks", {file, 0, ""});
  for (size_t t = 0; t < doc.size(); ++t) {
    const nlohmann::json& task = doc[t];
    const std::string tf = "tasks[" + std::to_string(t) + "]";
    if (!task.is_object()) {
      Error(c, "corrections.missing_field", tf, "a task must be an object");
      continue;
    }
    auto data = task.find("data");
    if (data == task.end() || !data->is_object() || !data->contains("image") ||
        !(*data)["image"].is_string()) {
      Error(c, "corrections.missing_field", tf + ".data.image", "the task has no data.image string");
      continue;
    }
    auto anns = task.find("annotations");
    if (anns == task.end() || !anns->is_array()) {
      Error(c, "corrections.missing_field", tf + ".annotations", "the task has no annotations array");
      continue;
    }
    int64_t chosen = -1;
    for (size_t a = 0; a < anns->size(); ++a) {
      const nlohmann::json& ann = (*anns)[a];
      if (!ann.is_object()) continue;
      auto cancelled = ann.find("was_cancelled");
      if (cancelled != ann.end() && cancelled->is_boolean() && cancelled->get<bool>()) continue;
      chosen = int64_t(a);
    }
    CorrectedImage im;
    im.ref = LabelStudioImagePath((*data)["image"].get<std::string>());
    im.field = tf;
    if (chosen < 0) {
      c.findings.Add(MakeFinding(Severity::kInfo, "corrections.not_annotated", file, 0, tf + ".annotations",
                                 "no annotation (or only cancelled ones): not a labelling of the image",
                                 "task skipped"));
      continue;
    }
    const std::string af = tf + ".annotations[" + std::to_string(chosen) + "]";
    const nlohmann::json& ann = (*anns)[size_t(chosen)];
    auto result = ann.find("result");
    if (result == ann.end() || !result->is_array()) {
      Error(c, "corrections.missing_field", af + ".result", "the annotation has no result array");
      continue;
    }
    bool ok = true;
    for (size_t r = 0; r < result->size(); ++r) {
      const nlohmann::json& res = (*result)[r];
      const std::string rf = af + ".result[" + std::to_string(r) + "]";
      if (!res.is_object() || !res.contains("type") || !res["type"].is_string()) {
        Error(c, "corrections.missing_field", rf + ".type", "a result needs a type");
        ok = false;
        continue;
      }
      if (res["type"] != "rectanglelabels") continue;  // choices, text areas...: not boxes
      auto value = res.find("value");
      if (value == res.end() || !value->is_object()) {
        Error(c, "corrections.missing_field", rf + ".value", "a rectanglelabels result needs a value object");
        ok = false;
        continue;
      }
      double x = 0, y = 0, w = 0, h = 0, rot = 0;
      const char* missing = !Number(*value, "x", &x)        ? "x"
                            : !Number(*value, "y", &y)      ? "y"
                            : !Number(*value, "width", &w)  ? "width"
                            : !Number(*value, "height", &h) ? "height"
                                                            : nullptr;
      if (missing != nullptr) {
        Error(c, "corrections.missing_field", rf + ".value." + missing, std::string("no number ") + missing);
        ok = false;
        continue;
      }
      if (Number(*value, "rotation", &rot) && std::fabs(rot) > 1e-9) {
        Error(c, "corrections.rotated_box", rf + ".value.rotation",
              "a rotated box (" + FormatNumber(rot) + " degrees) is not an axis-aligned detection box");
        ok = false;
        continue;
      }
      auto labels = value->find("rectanglelabels");
      if (labels == value->end() || !labels->is_array() || labels->size() != 1 || !(*labels)[0].is_string()) {
        Error(c, "corrections.missing_field", rf + ".value.rectanglelabels", "a box needs exactly one label");
        ok = false;
        continue;
      }
      CorrectionBox box;
      box.label = (*labels)[0].get<std::string>();
      if (!ToBox(c, x / 100, y / 100, (x + w) / 100, (y + h) / 100, rf + ".value", &box)) {
        ok = false;
        continue;
      }
      im.boxes.push_back(std::move(box));
    }
    if (ok) c.images.push_back(std::move(im));
  }
  return c;
}

Result<Corrections> ParseCvatXml(std::string_view xml, const std::string& file) {
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed)
    return Status::InvalidArgument(std::string("not an XML document: ") + parsed.description(),
                                   {file, 0, ""});
  pugi::xml_node root = doc.child("annotations");
  if (!root)
    return Status::InvalidArgument("no <annotations> root (CVAT for images 1.1)", {file, 0, "annotations"});
  Corrections c;
  c.file = file;
  c.format = "cvat";
  // The labels a task, project or job declares (CVAT writes one of them).
  for (const char* owner : {"task", "project", "job"}) {
    for (pugi::xml_node label : root.child("meta").child(owner).child("labels").children("label")) {
      const std::string name = label.child_value("name");
      if (!name.empty() && std::find(c.labels.begin(), c.labels.end(), name) == c.labels.end())
        c.labels.push_back(name);
    }
  }
  size_t i = 0;
  for (pugi::xml_node img : root.children("image")) {
    const std::string f = "image[" + std::to_string(i++) + "]";
    CorrectedImage im;
    im.field = f;
    im.ref = img.attribute("name").value();
    const double width = img.attribute("width").as_double(0), height = img.attribute("height").as_double(0);
    if (im.ref.empty()) {
      Error(c, "corrections.missing_field", f + ".name", "an image needs a name");
      continue;
    }
    if (!(width > 0) || !(height > 0)) {
      Error(c, "corrections.missing_field", f + (width > 0 ? ".height" : ".width"),
            "an image needs a positive width and height");
      continue;
    }
    bool ok = true;
    size_t b = 0;
    for (pugi::xml_node box : img.children("box")) {
      const std::string bf = f + ".box[" + std::to_string(b++) + "]";
      CorrectionBox cb;
      cb.label = box.attribute("label").value();
      if (cb.label.empty()) {
        Error(c, "corrections.missing_field", bf + ".label", "a box needs a label");
        ok = false;
        continue;
      }
      const char* missing = nullptr;
      for (const char* a : {"xtl", "ytl", "xbr", "ybr"})
        if (!box.attribute(a)) missing = missing ? missing : a;
      if (missing != nullptr) {
        Error(c, "corrections.missing_field", bf + "." + missing, std::string("a box needs ") + missing);
        ok = false;
        continue;
      }
      if (std::fabs(box.attribute("rotation").as_double(0)) > 1e-9) {
        Error(c, "corrections.rotated_box", bf + ".rotation",
              "a rotated box is not an axis-aligned detection box");
        ok = false;
        continue;
      }
      if (!ToBox(c, box.attribute("xtl").as_double() / width, box.attribute("ytl").as_double() / height,
                 box.attribute("xbr").as_double() / width, box.attribute("ybr").as_double() / height, bf,
                 &cb)) {
        ok = false;
        continue;
      }
      im.boxes.push_back(std::move(cb));
    }
    if (ok) c.images.push_back(std::move(im));
  }
  return c;
}

Result<Corrections> ReadCorrections(const std::string& path, Env& env) {
  KESTREL_ASSIGN_OR_RETURN(std::string text, env.ReadFile(path, uint64_t{1} << 30));
  const size_t first = text.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{'))
    return ParseLabelStudioExport(text, path);
  if (first != std::string::npos && text[first] == '<') return ParseCvatXml(text, path);
  return Status::InvalidArgument(
      "not a Label Studio JSON export or a CVAT for images 1.1 XML file (it starts with neither '[' nor '<')",
      {path, 0, "corrections"});
}

int64_t MatchCorrectedImage(const Manifest& m, const std::string& ref) {
  auto tail_of = [](const std::string& s, const std::string& key) {
    return s == key || (s.size() > key.size() && s.compare(s.size() - key.size(), key.size(), key) == 0 &&
                        s[s.size() - key.size() - 1] == '/');
  };
  auto best_for = [&](const std::string& r) {
    int64_t best = -1;
    size_t best_len = 0;
    bool tie = false;
    for (size_t i = 0; i < m.entries.size(); ++i) {
      const ManifestEntry& e = m.entries[i];
      for (const std::string& key : {std::string(SplitName(e.split)) + "/" + e.path, e.path}) {
        if (!tail_of(r, key)) continue;
        if (key.size() > best_len) {
          best = int64_t(i);
          best_len = key.size();
          tie = false;
        } else if (key.size() == best_len && best != int64_t(i)) {
          tie = true;
        }
        break;  // the split-qualified key is the longer one
      }
    }
    return tie ? int64_t{-2} : best;
  };
  int64_t found = best_for(ref);
  if (found != -1) return found;
  // Label Studio's uploads: "<8 hex digits>-<original name>".
  const size_t slash = ref.rfind('/');
  const std::string base = slash == std::string::npos ? ref : ref.substr(slash + 1);
  if (base.size() > 9 && base[8] == '-' &&
      std::all_of(base.begin(), base.begin() + 8, [](char ch) { return std::isxdigit(uint8_t(ch)) != 0; }))
    return best_for(base.substr(9));
  return -1;
}

namespace {

// A Label Studio upload name without its "<8 hex digits>-" prefix; "" when
// it has none.
std::string WithoutUploadPrefix(const std::string& name) {
  if (name.size() > 9 && name[8] == '-' &&
      std::all_of(name.begin(), name.begin() + 8, [](char ch) { return std::isxdigit(uint8_t(ch)) != 0; }))
    return name.substr(9);
  return "";
}

std::vector<std::string> Components(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string::npos ? path.size() : slash;
    parts.push_back(path.substr(start, end - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return parts;
}

}  // namespace

std::optional<ImageFile> ResolveImageFile(const std::string& images_dir, const std::string& ref, Env& env) {
  std::vector<std::string> parts = Components(ref);
  auto try_parts = [&](const std::vector<std::string>& ps) -> std::optional<ImageFile> {
    for (size_t first = 0; first < ps.size(); ++first) {  // the longest tail first
      bool safe = true;
      std::string tail;
      for (size_t k = first; k < ps.size() && safe; ++k) {
        safe = !ps[k].empty() && ps[k] != "." && ps[k] != "..";
        tail += (tail.empty() ? "" : "/") + ps[k];
      }
      if (!safe) continue;
      const std::string path = JoinPath(images_dir, tail);
      if (!env.Stat(path).is_regular) continue;
      ImageFile f;
      f.path = path;
      size_t k = first;
      // The key starts after the tail's first "images" folder, if any.
      for (size_t j = first; j + 1 < ps.size(); ++j) {
        if (ps[j] == "images") {
          k = j + 1;
          break;
        }
      }
      if (ps.size() - k > 1) {
        if (auto split = ParseSplit(ps[k]); split.IsOk() && *split != Split::kUnassigned) {
          f.split = *split;
          ++k;
        }
      }
      for (; k < ps.size(); ++k) f.rel_path += (f.rel_path.empty() ? "" : "/") + ps[k];
      return f;
    }
    return std::nullopt;
  };
  if (auto f = try_parts(parts)) return f;
  if (!parts.empty()) {
    const std::string bare = WithoutUploadPrefix(parts.back());
    if (!bare.empty()) {
      parts.back() = bare;
      return try_parts(parts);
    }
  }
  return std::nullopt;
}

Result<NewImage> ReadNewImage(const ImageFile& f, Env& env, std::string* failed_check) {
  auto fail = [&](const char* check, const Status& s) {
    if (failed_check != nullptr) *failed_check = check;
    return s;
  };
  if (auto bad = CheckManifestPath(f.rel_path))
    return fail("corrections.bad_path", Status::InvalidArgument(bad->message, {f.path, 0, "path"}));
  Result<std::string> bytes = env.ReadFile(f.path, uint64_t{2} << 30);
  if (!bytes.IsOk()) return fail("image.unreadable", bytes.GetStatus());
  DecodeFailure failure = DecodeFailure::kNone;
  Result<cv::Mat> img = DecodeImage(*bytes, f.path, DecodeOptions{}, nullptr, &failure);
  if (!img.IsOk()) return fail(DecodeFailureCheck(failure), img.GetStatus());
  NewImage out;
  out.entry.path = f.rel_path;
  out.entry.split = f.split;
  out.entry.image_sha = Sha256Hex(*bytes);
  out.entry.width = img->cols;
  out.entry.height = img->rows;
  out.bytes = std::move(bytes).Value();
  return out;
}

Result<Split> AssignedSplitOf(const Manifest& m, const ManifestEntry& e, uint64_t seed) {
  auto key = [seed](const ManifestEntry& x) {
    return Sha256Hex(std::to_string(seed) + ":" + x.image_sha + ":" + x.path);
  };
  std::string last_val, first_train;
  for (const ManifestEntry& x : m.entries) {
    if (x.split == Split::kVal) {
      last_val = std::max(last_val, key(x));
    } else if (x.split == Split::kTrain) {
      const std::string k = key(x);
      if (first_train.empty() || k < first_train) first_train = k;
    } else {
      return Status::FailedPrecondition("the version has a test split: its splits came from its source");
    }
  }
  if (!last_val.empty() && !first_train.empty() && last_val > first_train)
    return Status::FailedPrecondition("the version's split is not the one assigned with seed " +
                                      std::to_string(seed) +
                                      ": its source had its own splits, or another seed");
  return !last_val.empty() && key(e) < last_val ? Split::kVal : Split::kTrain;
}

Result<SourceDataset> ReadCorrectionsDataset(const std::string& path, const std::string& format,
                                             const ReadOptions& opts) {
  Env& env = opts.env != nullptr ? *opts.env : Env::Default();
  KESTREL_ASSIGN_OR_RETURN(Corrections c, ReadCorrections(path, env));
  if (format != "auto" && format != c.format)
    return Status::InvalidArgument("format=" + format + " but the file is a " +
                                       (c.format == "cvat" ? "CVAT XML file" : "Label Studio JSON export"),
                                   {path, 0, "format"});
  SourceDataset src;
  src.root = DirName(path);
  src.format = c.format;
  src.findings = std::move(c.findings);
  auto error = [&](const std::string& check, const std::string& field, const std::string& message) {
    src.findings.Add(MakeFinding(Severity::kError, check, path, 0, field, message, "nothing stored"));
  };
  src.names = c.labels;
  const bool declared = !src.names.empty();
  if (!declared) {
    std::set<std::string> used;
    for (const CorrectedImage& im : c.images)
      for (const CorrectionBox& b : im.boxes) used.insert(b.label);
    src.names.assign(used.begin(), used.end());
  }
  std::map<std::string, int> class_of;
  for (size_t i = 0; i < src.names.size(); ++i) class_of.emplace(src.names[i], int(i));
  std::map<std::pair<std::string, int>, std::string> seen;  // (key, split) -> the field that named it
  bool all_split = !c.images.empty();
  for (const CorrectedImage& im : c.images) {
    const std::string field = im.field + (c.format == "cvat" ? ".name" : ".data.image");
    std::optional<ImageFile> f = ResolveImageFile(src.root, im.ref, env);
    if (!f) {
      error("corrections.unmatched_image", field, "'" + im.ref + "' names no file under " + src.root);
      continue;
    }
    auto [it, fresh] = seen.emplace(std::make_pair(f->rel_path, int(f->split)), im.field);
    if (!fresh) {
      error("corrections.duplicate_image", field,
            "'" + im.ref + "' names the same file as " + it->second + " (" + f->path + ")");
      continue;
    }
    Sample s;
    s.image_path = f->path;
    s.rel_path = f->rel_path;
    // No label_path: the export is one file for every image (like COCO's
    // JSON), so an error in it must not exclude every sample by file.
    s.split = f->split;
    s.has_label = true;
    bool ok = true;
    for (const CorrectionBox& b : im.boxes) {
      auto cls = class_of.find(b.label);
      if (cls == class_of.end()) {
        error("corrections.unknown_label", b.field, "label '" + b.label + "' is not declared in <meta>");
        ok = false;
        continue;
      }
      s.boxes.push_back({cls->second, b.cx, b.cy, b.w, b.h});
    }
    if (!ok) continue;
    if (s.split == Split::kUnassigned) all_split = false;
    src.samples.push_back(std::move(s));
  }
  src.has_splits = all_split;
  std::sort(src.samples.begin(), src.samples.end(), [](const Sample& a, const Sample& b) {
    return std::make_pair(a.rel_path, int(a.split)) < std::make_pair(b.rel_path, int(b.split));
  });
  CheckClassNames(src.names, {}, path, &src.findings);
  return src;
}

}  // namespace kestrel::data
