// YOLO (Ultralytics) reader: label-line parsing, data.yaml, bare trees.
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>

#include "data/formats.h"
#include "data/image.h"
#include "data/text.h"

namespace kestrel::data {
namespace {

constexpr const char* kFieldNames[5] = {"class", "x_center", "y_center", "width", "height"};

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// One UTF-8 code point at s[i] (U+FFFD and length 1 when malformed).
uint32_t DecodeUtf8(std::string_view s, size_t i, size_t* len) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  int n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  *len = 1;
  if (n == 1 || i + n > s.size()) return c < 0x80 ? c : 0xFFFD;
  uint32_t cp = c & (0x7F >> n);
  for (int k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0xFFFD;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  *len = static_cast<size_t>(n);
  return cp;
}

// Locale-independent: "1,5" is never a number here, whatever LC_NUMERIC says.
bool ParseNumber(std::string_view tok, double* v, bool* out_of_range) {
  if (tok.size() > 1 && tok[0] == '+' && tok[1] != '-' && tok[1] != '+') tok.remove_prefix(1);
  auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), *v);
  *out_of_range = ec == std::errc::result_out_of_range;
  return ptr == tok.data() + tok.size() && (ec == std::errc() || *out_of_range);
}

// Ultralytics rule: the last "/images/" component becomes "/labels/", the
// extension becomes ".txt".
std::string LabelPathFor(const std::string& image) {
  std::string s = "/" + image;
  size_t pos = s.rfind("/images/");
  if (pos != std::string::npos) s.replace(pos, 8, "/labels/");
  s = s.substr(1);
  size_t slash = s.find_last_of('/');
  size_t dot = s.find_last_of('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash)) s.resize(dot);
  return s + ".txt";
}

std::string Normalize(const std::string& p) {
  std::string s = std::filesystem::path(p).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s.empty() ? "." : s;
}

// `path` relative to `root`, or "" when it is not inside it.
std::string RelativeTo(const std::string& path, const std::string& root) {
  if (root == ".") return path.rfind("../", 0) == 0 || path.front() == '/' ? "" : path;
  if (path.size() > root.size() + 1 && path.compare(0, root.size(), root) == 0 && path[root.size()] == '/') {
    return path.substr(root.size() + 1);
  }
  return "";
}

Env& EnvOf(const ReadOptions& o) { return o.env != nullptr ? *o.env : Env::Default(); }

// Reads a label/annotation file, refusing oversize files before reading.
Result<std::string> ReadBounded(Env& env, const std::string& path, uint64_t max_bytes, const char* what) {
  FileInfo fi = env.Stat(path);
  if (fi.exists && fi.size > max_bytes) {
    return Status::ResourceExhausted(std::string(what) + " is " + std::to_string(fi.size) +
                                         " bytes, over the limit of " + std::to_string(max_bytes) +
                                         " (max_label_bytes)",
                                     {path});
  }
  return env.ReadFile(path, max_bytes);
}

// One image folder (or list) of a split.
struct SplitSource {
  Split split = Split::kUnassigned;
  std::string rel_root;  // rel_path is relative to this
  std::vector<std::string> images;
  bool scan_orphans = true;  // walk the matching labels/ folder for orphans
  std::string image_root;    // folder the images were listed from
};

struct PendingSample {
  Sample sample;
  FindingList findings;
};

Result<SourceDataset> BuildYolo(const std::string& root, const std::vector<SplitSource>& sources,
                                std::vector<std::string> names, bool names_known, bool has_splits, Env& env,
                                const ReadOptions& opts, FindingList structure = {}) {
  SourceDataset ds;
  ds.root = root;
  ds.format = "yolo";
  ds.has_splits = has_splits;
  ds.findings = std::move(structure);  // data.yaml / classes.txt findings come first
  int nc = names_known ? static_cast<int>(names.size()) : -1;
  std::vector<PendingSample> pending;
  FindingList dropped;  // samples whose file name cannot be a manifest key
  std::set<std::string> expected_labels;
  std::map<std::string, std::string> label_owner;  // label path -> first image
  std::map<std::string, Split> image_split;        // image path -> first split
  std::set<std::string> label_roots;
  int max_class = -1;
  for (const SplitSource& src : sources) {
    if (src.images.empty()) {
      ds.findings.push_back(MakeFinding(Severity::kWarning, "split.empty", src.image_root, 0,
                                        SplitName(src.split), "no images in this split", "none"));
    }
    if (src.scan_orphans) label_roots.insert(DirName(LabelPathFor(src.image_root + "/x.jpg")));
    for (const std::string& img : src.images) {
      PendingSample p;
      Sample& s = p.sample;
      s.image_path = img;
      s.split = src.split;
      s.rel_path = RelativeTo(img, src.rel_root);
      if (s.rel_path.empty()) {
        return Status::InvalidArgument(
            "image '" + img + "' is outside the dataset root '" + src.rel_root + "'", {img});
      }
      auto [it, fresh] = image_split.emplace(img, src.split);
      if (!fresh) {
        p.findings.push_back(MakeFinding(
            Severity::kWarning, "split.overlap", img, 0, "",
            std::string("image is listed in both ") + SplitName(it->second) + " and " + SplitName(src.split),
            "kept in both"));
      }
      std::string label = LabelPathFor(img);
      expected_labels.insert(label);
      if (auto bad = CheckManifestPath(s.rel_path)) {
        dropped.Add(
            MakeFinding(Severity::kError, bad->check, img, 0, "file_name", bad->message, "sample excluded"));
        ds.excluded_paths.push_back(img);
        continue;
      }
      auto [owner, first] = label_owner.emplace(label, img);
      if (!first && owner->second != img) {
        p.findings.push_back(MakeFinding(Severity::kWarning, "image.duplicate_stem", label, 0, "",
                                         "label file is shared by '" + owner->second + "' and '" + img + "'",
                                         "same labels used for both"));
      }
      FileInfo fi = env.Stat(label);
      if (!fi.exists || !fi.is_regular) {
        p.findings.push_back(MakeFinding(Severity::kWarning, "label.missing", label, 0, "",
                                         "no label file for image '" + img + "'", "kept as background"));
        pending.push_back(std::move(p));
        continue;
      }
      s.label_path = label;
      Result<std::string> text = ReadBounded(env, label, opts.max_label_bytes, "label file");
      if (!text.IsOk()) {
        if (text.GetStatus().Code() == StatusCode::kResourceExhausted) return text.GetStatus();
        p.findings.push_back(MakeFinding(Severity::kError, "label.unreadable", label, 0, "",
                                         text.GetStatus().Message(), "sample excluded"));
        pending.push_back(std::move(p));
        continue;
      }
      s.has_label = true;
      s.boxes = ParseYoloLabels(*text, label, nc, &p.findings, opts.max_boxes_per_image);
      for (const Box& b : s.boxes) max_class = std::max(max_class, b.cls);
      pending.push_back(std::move(p));
    }
  }
  if (pending.empty() && dropped.empty()) {
    return Status::NotFound("no images found (extensions jpg jpeg png bmp webp tif tiff)", {root});
  }
  std::sort(pending.begin(), pending.end(), [](const PendingSample& a, const PendingSample& b) {
    return std::tie(a.sample.rel_path, a.sample.split) < std::tie(b.sample.rel_path, b.sample.split);
  });
  ds.findings.Merge(dropped);
  for (PendingSample& p : pending) {
    ds.findings.Merge(p.findings);
    ds.samples.push_back(std::move(p.sample));
  }
  for (const std::string& lr : label_roots) {
    if (!env.Stat(lr).is_dir) continue;
    auto txt = ListFilesRecursive(lr, env, [](std::string_view n) {
      return n.size() > 4 && n.substr(n.size() - 4) == ".txt" && n != "classes.txt" && n != "names.txt";
    });
    if (!txt.IsOk()) return txt.GetStatus();
    for (const std::string& t : *txt) {
      if (expected_labels.count(t) == 0) {
        ds.findings.push_back(MakeFinding(Severity::kWarning, "label.orphan", t, 0, "",
                                          "label file has no matching image", "ignored"));
      }
    }
  }
  if (!names_known) {
    for (int c = 0; c <= max_class; ++c) names.push_back(std::to_string(c));
  }
  ds.names = std::move(names);
  return ds;
}

// ---- data.yaml ----

Status YamlError(const std::string& file, const YAML::Node& node, const std::string& field,
                 const std::string& msg) {
  return Status::InvalidArgument(msg, {file, node.Mark().line + 1, field});
}

// Class names end up in the manifest (JSON): they must be UTF-8.
Status RequireUtf8Name(const std::string& file, const YAML::Node& node, const std::string& name, size_t id) {
  if (IsValidUtf8(name)) return {};
  return YamlError(file, node, "names",
                   "class name " + std::to_string(id) + " is not valid UTF-8: '" + EscapeInvalidUtf8(name) +
                       "'; save the file as UTF-8");
}

Result<std::vector<std::string>> ParseNames(const YAML::Node& n, const std::string& file,
                                            FindingList* findings) {
  std::vector<std::string> names;
  if (n.IsSequence()) {
    for (const YAML::Node& v : n) {
      if (!v.IsScalar()) return YamlError(file, v, "names", "class names must be strings");
      KESTREL_RETURN_IF_ERROR(RequireUtf8Name(file, v, v.Scalar(), names.size()));
      names.push_back(v.Scalar());
    }
    return names;
  }
  if (!n.IsMap()) {
    return YamlError(file, n, "names", "expected a list of names or a map {id: name}");
  }
  std::map<long, std::string> by_id;
  std::map<long, int> line_of;
  for (const auto& kv : n) {
    long id = 0;
    const std::string& key = kv.first.Scalar();
    auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (!kv.first.IsScalar() || ec != std::errc() || ptr != key.data() + key.size() || id < 0 ||
        id > 1'000'000) {
      return YamlError(file, kv.first, "names", "class id '" + key + "' is not an integer >= 0");
    }
    if (!kv.second.IsScalar()) {
      return YamlError(file, kv.second, "names", "class name for id " + key + " must be a string");
    }
    KESTREL_RETURN_IF_ERROR(RequireUtf8Name(file, kv.second, kv.second.Scalar(), static_cast<size_t>(id)));
    const int line = kv.first.Mark().line + 1;
    auto [it, fresh] = by_id.emplace(id, kv.second.Scalar());
    if (!fresh) {
      // YAML keeps both entries; picking one silently would hide a merge error.
      findings->Add(MakeFinding(
          Severity::kError, "yaml.duplicate_key", file, line, "names." + std::to_string(id),
          "class id " + std::to_string(id) + " is defined twice (lines " + std::to_string(line_of[id]) +
              " and " + std::to_string(line) + "): '" + it->second + "' and '" + kv.second.Scalar() + "'",
          "first used"));
      continue;
    }
    line_of[id] = line;
  }
  long expect = 0;
  for (const auto& [id, name] : by_id) {
    if (id != expect) {
      return YamlError(file, n, "names",
                       "class ids must be 0..N-1 without gaps; id " + std::to_string(expect) + " is missing");
    }
    names.push_back(name);
    ++expect;
  }
  return names;
}

// Images of one split entry: a folder (walked) or a .txt list of images.
Status AddSplitEntry(const std::string& yaml_file, const YAML::Node& node, const char* key, Split split,
                     const std::string& root, Env& env, const ReadOptions& opts,
                     std::vector<SplitSource>* out) {
  std::string entry = Normalize(JoinPath(root, node.Scalar()));
  FileInfo fi = env.Stat(entry);
  if (!fi.exists) {
    return YamlError(yaml_file, node, key, "path '" + entry + "' does not exist");
  }
  SplitSource src;
  src.split = split;
  if (fi.is_dir) {
    auto images =
        ListFilesRecursive(entry, env, [](std::string_view n) { return IsImageExtension(Extension(n)); });
    if (!images.IsOk()) return images.GetStatus();
    src.images = std::move(images).Value();
    src.rel_root = entry;
    src.image_root = entry;
    out->push_back(std::move(src));
    return {};
  }
  auto text = ReadBounded(env, entry, opts.max_label_bytes, "image list");
  if (!text.IsOk()) return text.GetStatus();
  KESTREL_RETURN_IF_ERROR(RequireNarrowEncoding(*text, entry, "image list"));
  src.rel_root = root;
  src.image_root = entry;
  src.scan_orphans = false;
  std::string_view t = *text;
  int line = 0;
  for (size_t start = 0; start < t.size();) {
    size_t end = std::min(t.find('\n', start), t.size());
    std::string l(t.substr(start, end - start));
    start = end + 1;
    ++line;
    while (!l.empty() && IsSpace(l.back())) l.pop_back();
    size_t b = 0;
    while (b < l.size() && IsSpace(l[b])) ++b;
    l = l.substr(b);
    if (l.empty()) continue;
    // Ultralytics: "./x" is relative to the list's folder, others to the root.
    std::string p = l.rfind("./", 0) == 0 ? JoinPath(DirName(entry), l.substr(2)) : JoinPath(root, l);
    p = Normalize(p);
    if (RelativeTo(p, root).empty()) {
      return Status::InvalidArgument("image path '" + l + "' is outside the dataset root '" + root + "'",
                                     {entry, line});
    }
    src.images.push_back(std::move(p));
  }
  out->push_back(std::move(src));
  return {};
}

Result<SourceDataset> ReadFromYaml(const std::string& yaml_file, Env& env, const ReadOptions& opts) {
  auto text = ReadBounded(env, yaml_file, opts.max_label_bytes, "YAML file");
  if (!text.IsOk()) return text.GetStatus();
  // yaml-cpp decodes UTF-16/32 that starts with a byte-order mark; without
  // one it would parse the NUL-interleaved bytes as garbage.
  {
    const unsigned char c0 = text->empty() ? 0 : static_cast<unsigned char>((*text)[0]);
    const bool bom = c0 == 0xFF || c0 == 0xFE ||
                     (text->size() >= 4 && (*text)[0] == 0 && (*text)[1] == 0 &&
                      static_cast<unsigned char>((*text)[2]) == 0xFE);
    if (!bom) KESTREL_RETURN_IF_ERROR(RequireNarrowEncoding(*text, yaml_file, "YAML file"));
  }
  FindingList structure;
  try {
    YAML::Node doc = YAML::Load(*text);
    if (!doc.IsMap()) {
      return Status::InvalidArgument("expected a YAML mapping (path, train, val, names)", {yaml_file, 1});
    }
    // yaml-cpp keeps both entries of a repeated key and doc[key] returns one
    // of them: a silent choice. Make it a finding.
    {
      std::map<std::string, int> first_line;
      for (const auto& kv : doc) {
        if (!kv.first.IsScalar()) continue;
        const int line = kv.first.Mark().line + 1;
        auto [it, fresh] = first_line.emplace(kv.first.Scalar(), line);
        if (!fresh) {
          structure.Add(MakeFinding(Severity::kError, "yaml.duplicate_key", yaml_file, line,
                                    kv.first.Scalar(),
                                    "key '" + kv.first.Scalar() + "' is defined twice (lines " +
                                        std::to_string(it->second) + " and " + std::to_string(line) + ")",
                                    "first used"));
        }
      }
    }
    std::string root = DirName(yaml_file);
    if (YAML::Node p = doc["path"]; p && !p.IsNull()) {
      if (!p.IsScalar()) return YamlError(yaml_file, p, "path", "expected a folder path");
      root = JoinPath(root, p.Scalar());
      if (!env.Stat(root).is_dir) {
        return YamlError(yaml_file, p, "path", "dataset root '" + root + "' is not a folder");
      }
    }
    root = Normalize(root);
    std::vector<std::string> names;
    bool names_known = false;
    if (YAML::Node n = doc["names"]; n && !n.IsNull()) {
      auto parsed = ParseNames(n, yaml_file, &structure);
      if (!parsed.IsOk()) return parsed.GetStatus();
      names = std::move(parsed).Value();
      names_known = true;
    }
    if (YAML::Node nc = doc["nc"]; nc && !nc.IsNull()) {
      int v = 0;
      if (!YAML::convert<int>::decode(nc, v) || v < 0) {
        return YamlError(yaml_file, nc, "nc", "expected a non-negative integer");
      }
      if (names_known && v != static_cast<int>(names.size())) {
        return YamlError(
            yaml_file, nc, "nc",
            "nc is " + std::to_string(v) + " but names lists " + std::to_string(names.size()) + " classes");
      }
      if (!names_known) {
        for (int c = 0; c < v; ++c) names.push_back(std::to_string(c));
        names_known = true;
      }
    }
    std::vector<SplitSource> sources;
    const std::pair<const char*, Split> keys[] = {
        {"train", Split::kTrain}, {"val", Split::kVal}, {"test", Split::kTest}};
    for (const auto& [key, split] : keys) {
      YAML::Node v = doc[key];
      if (!v || v.IsNull()) continue;
      if (v.IsScalar()) {
        if (v.Scalar().empty()) continue;
        KESTREL_RETURN_IF_ERROR(AddSplitEntry(yaml_file, v, key, split, root, env, opts, &sources));
      } else if (v.IsSequence()) {
        size_t first = sources.size();
        for (const YAML::Node& e : v) {
          if (!e.IsScalar()) return YamlError(yaml_file, e, key, "expected a path");
          KESTREL_RETURN_IF_ERROR(AddSplitEntry(yaml_file, e, key, split, root, env, opts, &sources));
        }
        // Several folders in one split may repeat file names: key by root.
        if (sources.size() - first > 1) {
          for (size_t i = first; i < sources.size(); ++i) sources[i].rel_root = root;
        }
      } else {
        return YamlError(yaml_file, v, key, "expected a folder, a list of folders or a .txt list");
      }
    }
    if (sources.empty()) {
      return Status::InvalidArgument("no train/val/test entries", {yaml_file, 1, "train"});
    }
    if (names_known) CheckClassNames(names, {}, yaml_file, &structure);
    return BuildYolo(root, sources, std::move(names), names_known, true, env, opts, std::move(structure));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("malformed YAML: " + e.msg, {yaml_file, e.mark.line + 1});
  }
}

// ---- bare tree: images/ (+ labels/), optional split subfolders ----

Result<std::vector<std::string>> ReadNamesFile(const std::string& path, Env& env, const ReadOptions& opts) {
  auto text = ReadBounded(env, path, opts.max_label_bytes, "class names file");
  if (!text.IsOk()) return text.GetStatus();
  KESTREL_RETURN_IF_ERROR(RequireNarrowEncoding(*text, path, "class names file"));
  std::vector<std::string> names;
  std::string_view t = *text;
  if (t.substr(0, 3) == "\xEF\xBB\xBF") t.remove_prefix(3);
  for (size_t start = 0; start < t.size();) {
    size_t end = std::min(t.find('\n', start), t.size());
    std::string l(t.substr(start, end - start));
    start = end + 1;
    while (!l.empty() && IsSpace(l.back())) l.pop_back();
    if (!IsValidUtf8(l)) {
      return Status::InvalidArgument("class name " + std::to_string(names.size()) + " is not valid UTF-8: '" +
                                         EscapeInvalidUtf8(l) + "'; save the file as UTF-8",
                                     {path, static_cast<int>(names.size() + 1), "names"});
    }
    names.push_back(l);
  }
  while (!names.empty() && names.back().empty()) names.pop_back();
  return names;
}

Result<SourceDataset> ReadBareTree(const std::string& dir, Env& env, const ReadOptions& opts) {
  std::string root = Normalize(dir);
  std::string images_dir = JoinPath(root, "images");
  bool has_images_dir = env.Stat(images_dir).is_dir;
  std::string walk_root = has_images_dir ? images_dir : root;
  auto files =
      ListFilesRecursive(walk_root, env, [](std::string_view n) { return IsImageExtension(Extension(n)); });
  if (!files.IsOk()) return files.GetStatus();
  // images/<split>/... -> that split; anything else -> unassigned.
  std::map<std::string, SplitSource> by_top;
  bool has_splits = false;
  for (const std::string& f : *files) {
    std::string rel = RelativeTo(f, walk_root);
    size_t slash = rel.find('/');
    std::string top = slash == std::string::npos ? "" : rel.substr(0, slash);
    Result<Split> split = ParseSplit(top);
    bool is_split = has_images_dir && split.IsOk() && *split != Split::kUnassigned;
    std::string key = is_split ? top : "";
    SplitSource& src = by_top[key];
    if (src.image_root.empty()) {
      src.split = is_split ? *split : Split::kUnassigned;
      src.image_root = is_split ? JoinPath(walk_root, top) : walk_root;
      src.rel_root = src.image_root;
    }
    has_splits = has_splits || is_split;
    src.images.push_back(f);
  }
  std::vector<SplitSource> sources;
  for (auto& [k, src] : by_top) sources.push_back(std::move(src));
  std::vector<std::string> names;
  bool names_known = false;
  FindingList structure;
  for (const char* cand : {"classes.txt", "names.txt", "labels/classes.txt"}) {
    std::string p = JoinPath(root, cand);
    if (env.Stat(p).is_regular) {
      auto n = ReadNamesFile(p, env, opts);
      if (!n.IsOk()) return n.GetStatus();
      names = std::move(n).Value();
      names_known = true;
      CheckClassNames(names, {}, p, &structure);
      break;
    }
  }
  return BuildYolo(root, sources, std::move(names), names_known, has_splits, env, opts, std::move(structure));
}

struct Walker {
  Env& env;
  const std::function<bool(std::string_view)>& keep;
  std::vector<std::pair<dev_t, ino_t>> ancestors;
  std::set<std::pair<dev_t, ino_t>> visited;
  std::vector<std::string> out;

  Status Walk(const std::string& dir, int depth) {
    if (depth > 64) {
      return Status::InvalidArgument("folders nested more than 64 levels deep", {dir});
    }
    struct stat st {};
    bool have_id = ::stat(dir.c_str(), &st) == 0;
    std::pair<dev_t, ino_t> id{st.st_dev, st.st_ino};
    if (have_id) {
      if (std::find(ancestors.begin(), ancestors.end(), id) != ancestors.end()) {
        return Status::InvalidArgument("symlink loop: this folder leads back to its ancestor", {dir});
      }
      if (!visited.insert(id).second) return {};  // reached through another link
      ancestors.push_back(id);
    }
    auto names = env.ListDir(dir);
    if (!names.IsOk()) return names.GetStatus();
    for (const std::string& name : *names) {
      if (name.empty() || name[0] == '.') continue;
      std::string p = JoinPath(dir, name);
      FileInfo fi = env.Stat(p);
      if (fi.is_symlink && !fi.is_dir && !fi.is_regular) {
        struct stat t {};
        if (::stat(p.c_str(), &t) != 0 && errno == ELOOP) {
          return Status::InvalidArgument("symlink loop", {p});
        }
        continue;  // dangling link
      }
      if (fi.is_dir) {
        KESTREL_RETURN_IF_ERROR(Walk(p, depth + 1));
      } else if (fi.is_regular && keep(name)) {
        out.push_back(p);
      }
    }
    if (have_id) ancestors.pop_back();
    return {};
  }
};

}  // namespace

Result<std::vector<std::string>> ListFilesRecursive(const std::string& dir, Env& env,
                                                    const std::function<bool(std::string_view name)>& keep) {
  Walker w{env, keep, {}, {}, {}};
  KESTREL_RETURN_IF_ERROR(w.Walk(dir, 0));
  std::sort(w.out.begin(), w.out.end());
  return std::move(w.out);
}

std::vector<Box> ParseYoloLabels(std::string_view text, const std::string& file, int num_classes,
                                 std::vector<Finding>* findings) {
  FindingList list;
  std::vector<Box> boxes = ParseYoloLabels(text, file, num_classes, &list);
  findings->insert(findings->end(), list.begin(), list.end());
  return boxes;
}

std::vector<Box> ParseYoloLabels(std::string_view text, const std::string& file, int num_classes,
                                 FindingList* findings, size_t max_boxes) {
  std::vector<Box> boxes;
  std::map<std::tuple<int, double, double, double, double>, int> seen;  // box -> line
  // `msg` is a string or a callable making one: a file of millions of bad
  // lines only counts most of them, so their messages are never built.
  auto add = [&](Severity sev, const char* check, int line, std::string field, auto&& msg,
                 const char* action) {
    if (!findings->WouldKeep(check, file)) {
      findings->CountOnly(sev, check, file);
      return;
    }
    if constexpr (std::is_invocable_v<decltype(msg)>) {
      findings->Add(MakeFinding(sev, check, file, line, std::move(field), msg(), action));
    } else {
      findings->Add(MakeFinding(sev, check, file, line, std::move(field), std::string(msg), action));
    }
  };
  if (const char* enc = WideEncodingOf(text)) {
    // Notepad's "Unicode": every line would be a syntax error; say why once.
    add(Severity::kError, "label.encoding", 0, "",
        std::string("label file is ") + enc + " encoded; save it as UTF-8 or ASCII", "file not read");
    return boxes;
  }
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  bool any_content = false;
  int line = 0;
  std::vector<std::string_view> tok;
  std::vector<double> val;
  for (size_t start = 0; start <= text.size();) {
    size_t end = std::min(text.find('\n', start), text.size());
    std::string_view l = text.substr(start, end - start);
    start = end + 1;
    ++line;
    while (!l.empty() && IsSpace(l.back())) l.remove_suffix(1);
    while (!l.empty() && IsSpace(l.front())) l.remove_prefix(1);
    if (l.empty()) continue;
    any_content = true;
    // Characters that are never part of a label line: name them, since a
    // full-width comma or a decimal comma is invisible in most editors.
    size_t bad = std::string_view::npos;
    for (size_t i = 0; i < l.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(l[i]);
      if (c >= 0x80 || c == ',' || c == ';' || (c < 0x20 && c != '\t')) {
        bad = i;
        break;
      }
    }
    tok.clear();
    for (size_t i = 0; i < l.size();) {
      while (i < l.size() && IsSpace(l[i])) ++i;
      size_t j = i;
      while (j < l.size() && !IsSpace(l[j])) ++j;
      if (j > i) tok.push_back(l.substr(i, j - i));
      i = j;
    }
    if (bad != std::string_view::npos) {
      size_t len = 1;
      uint32_t cp = DecodeUtf8(l, bad, &len);
      size_t field = 0;  // whitespace-separated field the character is in
      for (const auto& t : tok) {
        if (t.data() + t.size() > l.data() + bad) break;
        ++field;
      }
      add(
          Severity::kError, "label.syntax", line, field < 5 ? kFieldNames[field] : "",
          [&] {
            char code[40];
            std::snprintf(code, sizeof(code), "U+%04X", cp);
            size_t column = 1;
            for (size_t i = 0; i < bad; ++i) column += (static_cast<unsigned char>(l[i]) & 0xC0) != 0x80;
            std::string shown = cp < 0x20 ? std::string(code) : std::string(l.substr(bad, len));
            if (!IsValidUtf8(l.substr(bad, len))) {
              // A stray byte (Latin-1 text, a binary file): show it, never copy it.
              shown = EscapeInvalidUtf8(l.substr(bad, 1));
              std::snprintf(code, sizeof(code), "byte 0x%02X, not valid UTF-8",
                            static_cast<unsigned char>(l[bad]));
            }
            return "unexpected character '" + shown + "' (" + code + ") at column " + std::to_string(column) +
                   ": fields must be ASCII numbers with '.' as the decimal point, separated by spaces";
          },
          "line dropped");
      continue;
    }
    size_t n = tok.size();
    bool polygon = n >= 7 && (n - 1) % 2 == 0;
    if (n != 5 && !polygon) {
      add(
          Severity::kError, "label.syntax", line, "",
          [&] {
            std::string msg =
                "expected 5 fields (class x_center y_center width height), got " + std::to_string(n);
            if (n == 6) msg += "; a 6th column looks like a confidence score from a prediction file";
            return msg;
          },
          "line dropped");
      continue;
    }
    val.assign(n, 0.0);
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) {
      const char* fname = i < 5 && !polygon ? kFieldNames[i] : i == 0 ? "class" : i % 2 ? "x" : "y";
      bool range = false;
      if (!ParseNumber(tok[i], &val[i], &range)) {
        add(
            Severity::kError, "label.syntax", line, fname,
            [&] { return "'" + std::string(tok[i]) + "' is not a number"; }, "line dropped");
        ok = false;
      } else if (range || !std::isfinite(val[i])) {
        add(
            Severity::kError, "label.nonfinite", line, fname,
            [&] { return "'" + std::string(tok[i]) + "' is not a finite number"; }, "line dropped");
        ok = false;
      }
    }
    if (!ok) continue;
    double c = val[0];
    if (c != std::floor(c)) {
      add(
          Severity::kError, "label.class_range", line, "class",
          [&] { return "class id '" + std::string(tok[0]) + "' is not an integer"; }, "line dropped");
      continue;
    }
    if (c < 0 || c > 1e9 || (num_classes >= 0 && c >= num_classes)) {
      add(
          Severity::kError, "label.class_range", line, "class",
          [&] {
            return "class id " + FormatNumber(c) + " is out of range [0, " +
                   (num_classes >= 0 ? std::to_string(num_classes) : std::string("inf")) + ")";
          },
          "line dropped");
      continue;
    }
    double cx = val[1], cy = val[2], w = val[3], h = val[4];
    if (polygon) {
      double x1 = val[1], x2 = val[1], y1 = val[2], y2 = val[2];
      for (size_t i = 1; i + 1 < n; i += 2) {
        x1 = std::min(x1, val[i]);
        x2 = std::max(x2, val[i]);
        y1 = std::min(y1, val[i + 1]);
        y2 = std::max(y2, val[i + 1]);
      }
      cx = (x1 + x2) / 2, cy = (y1 + y2) / 2, w = x2 - x1, h = y2 - y1;
      add(
          Severity::kInfo, "label.polygon", line, "",
          [&] { return "polygon with " + std::to_string((n - 1) / 2) + " points"; },
          "converted to its bounding box");
    }
    double x1 = cx - w / 2, x2 = cx + w / 2, y1 = cy - h / 2, y2 = cy + h / 2;
    constexpr double kEps = 1e-6;  // float noise from exporters is not worth a warning
    const char* oob = nullptr;
    if (cx < 0 || cx > 1) {
      oob = "x_center";
    } else if (cy < 0 || cy > 1) {
      oob = "y_center";
    } else if (x1 < -kEps || x2 > 1 + kEps || w > 1) {
      oob = "width";
    } else if (y1 < -kEps || y2 > 1 + kEps || h > 1) {
      oob = "height";
    }
    if (oob != nullptr) {
      add(
          Severity::kWarning, "label.out_of_bounds", line, oob,
          [&] {
            return "box xyxy [" + FormatNumber(x1) + ", " + FormatNumber(y1) + ", " + FormatNumber(x2) +
                   ", " + FormatNumber(y2) + "] extends outside [0, 1]";
          },
          "clipped");
    }
    // Values that need no clipping are kept bit-for-bit (a cxcywh -> xyxy ->
    // cxcywh round trip would change the last digit and the manifest hash).
    // Overshoot within kEps is kept too: clipping 6-decimal labels creates
    // half-way values whose rounding would differ between formats.
    if (x1 < -kEps || x2 > 1 + kEps) {
      x1 = std::clamp(x1, 0.0, 1.0), x2 = std::clamp(x2, 0.0, 1.0);
      cx = (x1 + x2) / 2, w = x2 - x1;
    }
    if (y1 < -kEps || y2 > 1 + kEps) {
      y1 = std::clamp(y1, 0.0, 1.0), y2 = std::clamp(y2, 0.0, 1.0);
      cy = (y1 + y2) / 2, h = y2 - y1;
    }
    if (w <= 0 || h <= 0) {
      add(
          Severity::kWarning, "label.degenerate", line, w <= 0 ? "width" : "height",
          [&] {
            return "box has zero or negative size (w=" + FormatNumber(w) + ", h=" + FormatNumber(h) +
                   ") after clipping";
          },
          "box dropped");
      continue;
    }
    Box b{static_cast<int>(c), cx, cy, w, h};
    auto [it, fresh] = seen.emplace(std::make_tuple(b.cls, b.cx, b.cy, b.w, b.h), line);
    if (!fresh) {
      // clang 14 (the fuzz build) cannot capture a structured binding.
      const int first_line = it->second;
      add(
          Severity::kWarning, "label.duplicate", line, "",
          [&] { return "duplicate of line " + std::to_string(first_line); }, "duplicate dropped");
      continue;
    }
    if (boxes.size() >= max_boxes) {
      // Millions of boxes for one image are a generator bug, and each costs
      // memory all the way to the manifest: stop here.
      add(
          Severity::kError, "label.too_many_boxes", line, "",
          [&] {
            return "more than " + std::to_string(max_boxes) +
                   " boxes for one image (max_boxes_per_image); lines from here on are not read";
          },
          "sample excluded");
      break;
    }
    boxes.push_back(b);
  }
  if (!any_content) {
    add(Severity::kInfo, "label.empty", 0, "", "empty label file (no objects)", "kept as background");
  }
  return boxes;
}

Result<SourceDataset> ReadYoloDataset(const std::string& path, const ReadOptions& opts) {
  Env& env = EnvOf(opts);
  FileInfo fi = env.Stat(path);
  if (!fi.exists) return Status::NotFound("dataset path does not exist", {path});
  if (fi.is_dir) {
    for (const char* y : {"data.yaml", "data.yml", "dataset.yaml"}) {
      std::string p = JoinPath(path, y);
      if (env.Stat(p).is_regular) return ReadFromYaml(p, env, opts);
    }
    return ReadBareTree(path, env, opts);
  }
  std::string ext = Extension(path);
  if (ext == "yaml" || ext == "yml") return ReadFromYaml(path, env, opts);
  return Status::InvalidArgument("expected a data.yaml or a dataset folder for YOLO", {path});
}

}  // namespace kestrel::data
