// YOLO (Ultralytics) dataset reader: data.yaml, bare trees; the label lines
// themselves are parsed by yolo_labels.cc (ParseYoloLabels).
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "data/formats.h"
#include "data/image.h"
#include "data/text.h"

namespace kestrel::data {
namespace {

// The label files' whitespace (yolo_labels.cc): image lists and class-name
// files are trimmed the same way.
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

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
