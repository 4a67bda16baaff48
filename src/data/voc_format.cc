// Pascal VOC reader: Annotations/*.xml + JPEGImages/ (+ ImageSets/Main splits).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <map>
#include <pugixml.hpp>
#include <set>
#include <tuple>
#include <utility>

#include "data/formats.h"
#include "data/image.h"
#include "data/text.h"

namespace kestrel::data {
namespace {

std::string Trim(std::string_view s) {
  auto sp = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && sp(s.front())) s.remove_prefix(1);
  while (!s.empty() && sp(s.back())) s.remove_suffix(1);
  return std::string(s);
}

int LineAt(std::string_view text, ptrdiff_t offset) {
  size_t end = std::min<size_t>(offset < 0 ? 0 : static_cast<size_t>(offset), text.size());
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + end, '\n'));
}

std::vector<std::string> Lines(std::string_view t) {
  std::vector<std::string> out;
  for (size_t start = 0; start < t.size();) {
    size_t end = std::min(t.find('\n', start), t.size());
    out.push_back(Trim(t.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

struct VocSample {
  Sample sample;
  std::vector<std::string> box_names;  // parallel to pixel_boxes until remapped
  FindingList findings;
  bool dropped = false;  // its file name cannot be a manifest key (finding made)
};

// Parses one annotation XML into `vs`. Hard errors: malformed XML, a
// filename escaping JPEGImages/.
Status ParseVocXml(std::string_view text, const std::string& xml, const std::string& img_dir,
                   const std::set<std::string>* fixed_names, size_t max_boxes, Env& env, VocSample* vs,
                   bool* image_found) {
  pugi::xml_document doc;
  pugi::xml_parse_result r = doc.load_buffer(text.data(), text.size());
  if (!r) {
    return Status::InvalidArgument(std::string("malformed XML: ") + r.description(),
                                   {xml, LineAt(text, r.offset)});
  }
  pugi::xml_node ann = doc.child("annotation");
  if (!ann) return Status::InvalidArgument("missing <annotation> root element", {xml, 1});
  Sample& s = vs->sample;
  std::string filename = Trim(ann.child_value("filename"));
  if (filename.empty()) filename = Stem(xml) + ".jpg";
  Result<std::string> rel = SafeRelativePath(filename);
  if (!rel.IsOk()) {
    return Status::InvalidArgument(rel.GetStatus().Message(),
                                   {xml, LineAt(text, ann.child("filename").offset_debug()), "filename"});
  }
  if (auto bad = CheckManifestPath(*rel)) {
    vs->dropped = true;
    s.image_path = JoinPath(img_dir, *rel);  // so the image is not listed again as a background
    vs->findings.Add(MakeFinding(Severity::kError, bad->check, xml,
                                 LineAt(text, ann.child("filename").offset_debug()), "filename", bad->message,
                                 "sample excluded"));
    return {};
  }
  s.rel_path = *rel;
  s.image_path = JoinPath(img_dir, *rel);
  *image_found = env.Stat(s.image_path).is_regular;
  if (!*image_found) {  // some exporters drop or change the extension in <filename>
    for (const char* ext : {"jpg", "jpeg", "png", "JPG", "JPEG", "PNG", "bmp", "webp"}) {
      std::string alt = Stem(xml) + "." + ext;
      if (env.Stat(JoinPath(img_dir, alt)).is_regular) {
        s.rel_path = alt;
        s.image_path = JoinPath(img_dir, alt);
        *image_found = true;
        break;
      }
    }
  }
  s.label_path = xml;
  s.has_label = true;
  s.boxes_in_pixels = true;
  pugi::xml_node size = ann.child("size");
  auto size_field = [&](const char* k) {
    std::string v = Trim(size.child_value(k));
    int out = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
    return (ec == std::errc() && p == v.data() + v.size() && out > 0) ? out : 0;
  };
  s.declared_width = size_field("width");
  s.declared_height = size_field("height");
  auto add = [&](Severity sev, const char* check, int line, std::string field, std::string msg,
                 const char* action) {
    vs->findings.push_back(MakeFinding(sev, check, xml, line, std::move(field), std::move(msg), action));
  };
  for (pugi::xml_node obj : ann.children("object")) {
    int line = LineAt(text, obj.offset_debug());
    std::string name = Trim(obj.child_value("name"));
    if (name.empty()) {
      add(Severity::kError, "label.syntax", line, "name", "object without a <name>", "object dropped");
      continue;
    }
    if (!IsValidUtf8(name)) {
      // Latin-1 XML without an encoding declaration: the name would reach the
      // manifest (JSON) as invalid UTF-8.
      add(Severity::kError, "label.encoding", line, "name",
          "class name '" + EscapeInvalidUtf8(name) +
              "' is not valid UTF-8 (declare the XML's encoding or save it as UTF-8)",
          "object dropped");
      continue;
    }
    if (s.pixel_boxes.size() >= max_boxes) {
      add(Severity::kError, "label.too_many_boxes", line, "",
          "more than " + std::to_string(max_boxes) +
              " objects for one image (max_boxes_per_image); the rest are not read",
          "sample excluded");
      break;
    }
    if (fixed_names != nullptr && fixed_names->count(name) == 0) {
      add(Severity::kError, "label.class_range", line, "name", "class '" + name + "' is not in classes.txt",
          "object dropped");
      continue;
    }
    pugi::xml_node bb = obj.child("bndbox");
    double v[4] = {0, 0, 0, 0};
    const char* keys[4] = {"xmin", "ymin", "xmax", "ymax"};
    bool ok = true;
    for (int k = 0; k < 4 && ok; ++k) {
      pugi::xml_node n = bb.child(keys[k]);
      std::string t = Trim(n.child_value());
      int at = n ? LineAt(text, n.offset_debug()) : line;
      auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v[k]);
      if (t.empty() || p != t.data() + t.size() ||
          (ec != std::errc() && ec != std::errc::result_out_of_range)) {
        add(Severity::kError, "label.syntax", at, std::string("bndbox/") + keys[k],
            t.empty() ? "missing value" : "'" + t + "' is not a number", "object dropped");
        ok = false;
      } else if (ec == std::errc::result_out_of_range || !std::isfinite(v[k])) {
        add(Severity::kError, "label.nonfinite", at, std::string("bndbox/") + keys[k],
            "'" + t + "' is not a finite number", "object dropped");
        ok = false;
      }
    }
    if (!ok) continue;
    // VOC pixel coordinates are 1-based and inclusive.
    double x1 = v[0] - 1, y1 = v[1] - 1, x2 = v[2], y2 = v[3];
    double iw = s.declared_width, ih = s.declared_height;
    if (iw > 0 && ih > 0) {
      if (x1 < 0 || y1 < 0 || x2 > iw || y2 > ih) {
        add(Severity::kWarning, "label.out_of_bounds", line, "bndbox",
            "box xyxy [" + FormatNumber(x1) + ", " + FormatNumber(y1) + ", " + FormatNumber(x2) + ", " +
                FormatNumber(y2) + "] extends outside the " + FormatNumber(iw) + "x" + FormatNumber(ih) +
                " image",
            "clipped");
      }
      x1 = std::clamp(x1, 0.0, iw), x2 = std::clamp(x2, 0.0, iw);
      y1 = std::clamp(y1, 0.0, ih), y2 = std::clamp(y2, 0.0, ih);
    }
    if (x2 - x1 <= 0 || y2 - y1 <= 0) {
      add(Severity::kWarning, "label.degenerate", line, "bndbox",
          "box has zero or negative size (w=" + FormatNumber(x2 - x1) + ", h=" + FormatNumber(y2 - y1) + ")",
          "box dropped");
      continue;
    }
    PixelBox pb;
    pb.x1 = x1, pb.y1 = y1, pb.x2 = x2, pb.y2 = y2;
    pb.line = line;
    s.pixel_boxes.push_back(pb);
    vs->box_names.push_back(name);
  }
  if (s.pixel_boxes.empty() && !ann.child("object")) {
    add(Severity::kInfo, "label.empty", 0, "", "annotation has no objects", "kept as background");
  }
  return {};
}

}  // namespace

Result<SourceDataset> ReadVocDataset(const std::string& path, const ReadOptions& opts) {
  Env& env = opts.env != nullptr ? *opts.env : Env::Default();
  FileInfo fi = env.Stat(path);
  if (!fi.exists) return Status::NotFound("dataset path does not exist", {path});
  std::string ann_dir = JoinPath(path, "Annotations");
  std::string img_dir = JoinPath(path, "JPEGImages");
  if (!env.Stat(ann_dir).is_dir) return Status::NotFound("no Annotations/ folder", {path});
  if (!env.Stat(img_dir).is_dir) return Status::NotFound("no JPEGImages/ folder", {path});
  SourceDataset ds;
  ds.root = path;
  ds.format = "voc";

  std::set<std::string> fixed;
  bool names_fixed = false;
  std::string classes_txt = JoinPath(path, "classes.txt");
  if (env.Stat(classes_txt).is_regular) {
    auto t = env.ReadFile(classes_txt, opts.max_label_bytes);
    if (!t.IsOk()) return t.GetStatus();
    KESTREL_RETURN_IF_ERROR(RequireNarrowEncoding(*t, classes_txt, "class names file"));
    for (std::string& n : Lines(*t)) {
      if (n.empty()) continue;
      if (!IsValidUtf8(n)) {
        return Status::InvalidArgument("class name '" + EscapeInvalidUtf8(n) + "' is not valid UTF-8",
                                       {classes_txt, 0, "names"});
      }
      if (!fixed.insert(n).second) {
        return Status::InvalidArgument("class '" + n + "' is listed twice", {classes_txt});
      }
      ds.names.push_back(n);
    }
    names_fixed = true;
  }

  // Splits by image id (the XML/image stem).
  std::map<std::string, Split> split_of;
  // (list file index, line, id): the path is not copied per line.
  std::vector<std::string> split_files;
  std::vector<std::tuple<size_t, int, std::string>> split_ids;
  for (Split sp : {Split::kTrain, Split::kVal, Split::kTest}) {
    std::string f = JoinPath(path, std::string("ImageSets/Main/") + SplitName(sp) + ".txt");
    if (!env.Stat(f).is_regular) continue;
    ds.has_splits = true;
    auto t = env.ReadFile(f, opts.max_label_bytes);
    if (!t.IsOk()) return t.GetStatus();
    KESTREL_RETURN_IF_ERROR(RequireNarrowEncoding(*t, f, "image set list"));
    std::vector<std::string> lines = Lines(*t);
    split_files.push_back(f);
    for (size_t i = 0; i < lines.size(); ++i) {
      std::string id = lines[i].substr(0, lines[i].find_first_of(" \t"));
      if (id.empty()) continue;
      auto [it, fresh] = split_of.emplace(id, sp);
      if (!fresh && it->second != sp) {
        ds.findings.push_back(MakeFinding(Severity::kWarning, "split.overlap", f, static_cast<int>(i + 1), "",
                                          "image id '" + id + "' is already in " + SplitName(it->second),
                                          std::string("kept in ") + SplitName(it->second)));
      }
      split_ids.emplace_back(split_files.size() - 1, static_cast<int>(i + 1), id);
    }
  }

  auto xmls = ListFilesRecursive(ann_dir, env, [](std::string_view n) { return Extension(n) == "xml"; });
  if (!xmls.IsOk()) return xmls.GetStatus();
  std::vector<VocSample> samples;
  std::set<std::string> used_images, ids;
  FindingList missing_images;
  std::set<std::string> dropped_ids;  // stems of annotations excluded for their <filename>
  for (const std::string& xml : *xmls) {
    VocSample vs;
    FileInfo xf = env.Stat(xml);
    if (xf.size > opts.max_label_bytes) {
      return Status::ResourceExhausted("annotation file is " + std::to_string(xf.size) +
                                           " bytes, over the limit of " +
                                           std::to_string(opts.max_label_bytes) + " (max_label_bytes)",
                                       {xml});
    }
    auto text = env.ReadFile(xml, opts.max_label_bytes);
    if (!text.IsOk()) {
      if (text.GetStatus().Code() == StatusCode::kResourceExhausted) return text.GetStatus();
      ds.findings.push_back(MakeFinding(Severity::kError, "label.unreadable", xml, 0, "",
                                        text.GetStatus().Message(), "sample excluded"));
      continue;
    }
    bool found = false;
    KESTREL_RETURN_IF_ERROR(ParseVocXml(*text, xml, img_dir, names_fixed ? &fixed : nullptr,
                                        opts.max_boxes_per_image, env, &vs, &found));
    if (vs.dropped) {
      // Its image must not come back below as an unannotated background.
      dropped_ids.insert(Stem(xml));
      used_images.insert(vs.sample.image_path);
      ds.excluded_paths.push_back(vs.sample.image_path);
      ds.findings.Merge(vs.findings);
      continue;
    }
    if (!found) {
      missing_images.push_back(MakeFinding(Severity::kError, "image.missing", xml, 0, "filename",
                                           "image '" + vs.sample.image_path + "' not found",
                                           "sample excluded"));
      continue;
    }
    if (!used_images.insert(vs.sample.image_path).second) {
      vs.findings.push_back(
          MakeFinding(Severity::kWarning, "image.duplicate_stem", xml, 0, "filename",
                      "image '" + vs.sample.image_path + "' is already described by another annotation",
                      "annotation ignored"));
      ds.findings.Merge(vs.findings);
      continue;
    }
    std::string id = Stem(xml);
    ids.insert(id);
    auto sp = split_of.find(id);
    vs.sample.split = sp != split_of.end() ? sp->second : Split::kUnassigned;
    samples.push_back(std::move(vs));
  }
  // Images without an annotation are background, as in YOLO.
  auto images =
      ListFilesRecursive(img_dir, env, [](std::string_view n) { return IsImageExtension(Extension(n)); });
  if (!images.IsOk()) return images.GetStatus();
  for (const std::string& img : *images) {
    if (used_images.count(img) != 0 || dropped_ids.count(Stem(img)) != 0) continue;
    VocSample vs;
    vs.sample.image_path = img;
    vs.sample.rel_path = img.substr(img_dir.size() + 1);
    if (auto bad = CheckManifestPath(vs.sample.rel_path)) {
      ds.findings.Add(
          MakeFinding(Severity::kError, bad->check, img, 0, "file_name", bad->message, "sample excluded"));
      ds.excluded_paths.push_back(img);
      continue;
    }
    vs.sample.boxes_in_pixels = true;
    std::string id = Stem(img);
    ids.insert(id);
    auto sp = split_of.find(id);
    vs.sample.split = sp != split_of.end() ? sp->second : Split::kUnassigned;
    vs.findings.push_back(MakeFinding(Severity::kWarning, "label.missing", JoinPath(ann_dir, id + ".xml"), 0,
                                      "", "no annotation for image '" + img + "'", "kept as background"));
    samples.push_back(std::move(vs));
  }
  if (samples.empty()) return Status::NotFound("no images found", {path});
  for (const auto& [file, line, id] : split_ids) {
    if (ids.count(id) == 0) {
      ds.findings.push_back(MakeFinding(Severity::kWarning, "split.unknown_id", split_files[file], line, "",
                                        "image id '" + id + "' has no annotation or image", "ignored"));
    }
  }
  if (!names_fixed) {
    std::set<std::string> all;
    for (const VocSample& vs : samples) all.insert(vs.box_names.begin(), vs.box_names.end());
    ds.names.assign(all.begin(), all.end());
  }
  std::map<std::string, int> index;
  for (size_t i = 0; i < ds.names.size(); ++i) index[ds.names[i]] = static_cast<int>(i);
  std::sort(samples.begin(), samples.end(), [](const VocSample& a, const VocSample& b) {
    return std::tie(a.sample.rel_path, a.sample.split) < std::tie(b.sample.rel_path, b.sample.split);
  });
  ds.findings.Merge(missing_images);
  for (VocSample& vs : samples) {
    for (size_t i = 0; i < vs.sample.pixel_boxes.size(); ++i) {
      vs.sample.pixel_boxes[i].cls = index[vs.box_names[i]];
    }
    ds.findings.Merge(vs.findings);
    ds.samples.push_back(std::move(vs.sample));
  }
  return ds;
}

}  // namespace kestrel::data
