// data/dataset.h helpers and the format dispatch of data/formats.h.
#include "data/dataset.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "data/corrections.h"
#include "data/formats.h"
#include "data/text.h"

namespace kestrel::data {

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kError:
      return "error";
    case Severity::kWarning:
      return "warning";
    case Severity::kInfo:
      return "info";
  }
  return "unknown";
}

Finding MakeFinding(Severity severity, std::string check, std::string file, int line, std::string field,
                    std::string message, std::string action) {
  Finding f;
  f.severity = severity;
  f.check = std::move(check);
  f.file = std::move(file);
  f.line = line;
  f.field = std::move(field);
  f.message = std::move(message);
  f.action = std::move(action);
  return f;
}

void FindingList::Tally(Severity s, std::string_view check, std::string_view file, int64_t n) {
  total_ += n;
  by_severity_[static_cast<size_t>(s)] += n;
  auto it = std::find_if(by_check_.begin(), by_check_.end(),
                         [&](const CheckCount& c) { return c.severity == s && c.check == check; });
  if (it == by_check_.end()) {
    by_check_.push_back({s, std::string(check), 0, 0});
    it = by_check_.end() - 1;
  }
  it->count += n;
  auto f = by_file_.find(file);
  if (f == by_file_.end()) f = by_file_.emplace(std::string(file), std::array<int64_t, 3>{}).first;
  f->second[static_cast<size_t>(s)] += n;
}

bool FindingList::WouldKeep(std::string_view check, std::string_view file) const {
  int64_t stored = 0;
  for (const CheckCount& c : by_check_) {
    if (c.check == check) stored += c.examples;
  }
  if (stored >= static_cast<int64_t>(max_per_check_)) return false;
  auto it = examples_by_check_file_.find(std::pair<std::string_view, std::string_view>(check, file));
  return it == examples_by_check_file_.end() || it->second < max_per_file_check_;
}

void FindingList::Store(Finding f) {
  if (!WouldKeep(f.check, f.file)) return;
  ++examples_by_check_file_[{f.check, f.file}];
  for (CheckCount& c : by_check_) {
    if (c.severity == f.severity && c.check == f.check) ++c.examples;
  }
  for (std::string* t :
       {&f.check, &f.file, &f.field, &f.message, &f.action, &f.image.path, &f.other.path, &f.other_file}) {
    if (!IsValidUtf8(*t)) *t = EscapeInvalidUtf8(*t);
  }
  examples_.push_back(std::move(f));
}

void FindingList::Add(Finding f) {
  Tally(f.severity, f.check, f.file, 1);
  Store(std::move(f));
}

void FindingList::CountOnly(Severity severity, std::string_view check, std::string_view file) {
  Tally(severity, check, file, 1);
}

void FindingList::Merge(const FindingList& other) {
  // Counts first (exact), then the other list's examples under our caps.
  total_ += other.total_;
  for (size_t i = 0; i < 3; ++i) by_severity_[i] += other.by_severity_[i];
  for (const CheckCount& c : other.by_check_) {
    auto it = std::find_if(by_check_.begin(), by_check_.end(), [&](const CheckCount& m) {
      return m.severity == c.severity && m.check == c.check;
    });
    if (it == by_check_.end()) {
      by_check_.push_back({c.severity, c.check, 0, 0});
      it = by_check_.end() - 1;
    }
    it->count += c.count;
  }
  for (const auto& [file, counts] : other.by_file_) {
    auto& mine = by_file_[file];
    for (size_t i = 0; i < 3; ++i) mine[i] += counts[i];
  }
  for (const Finding& f : other.examples_) Store(f);
}

int64_t FindingList::Count(Severity s, std::string_view check) const {
  for (const CheckCount& c : by_check_) {
    if (c.severity == s && c.check == check) return c.count;
  }
  return 0;
}

int64_t FindingList::ErrorsIn(std::string_view file) const {
  auto it = by_file_.find(file);
  return it == by_file_.end() ? 0 : it->second[static_cast<size_t>(Severity::kError)];
}

bool FindingList::HasErrorWithPrefix(std::string_view prefix) const {
  for (const CheckCount& c : by_check_) {
    if (c.severity == Severity::kError && c.count > 0 && c.check.substr(0, prefix.size()) == prefix)
      return true;
  }
  return false;
}

std::vector<FindingList::CheckCount> FindingList::ByCheck() const {
  std::vector<CheckCount> out = by_check_;
  std::sort(out.begin(), out.end(), [](const CheckCount& a, const CheckCount& b) {
    return std::make_pair(static_cast<int>(a.severity), std::string_view(a.check)) <
           std::make_pair(static_cast<int>(b.severity), std::string_view(b.check));
  });
  return out;
}

std::vector<FindingList::FileCount> FindingList::TopFiles(size_t n) const {
  std::vector<FileCount> all;
  for (const auto& [file, counts] : by_file_) {
    if (file.empty()) continue;  // dataset-wide findings
    all.push_back({file, counts});
  }
  auto more = [](const FileCount& a, const FileCount& b) {
    if (a.Total() != b.Total()) return a.Total() > b.Total();
    return a.file < b.file;
  };
  if (all.size() > n) {
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), all.end(), more);
    all.resize(n);
  } else {
    std::sort(all.begin(), all.end(), more);
  }
  return all;
}

std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

const char* SplitName(Split s) {
  switch (s) {
    case Split::kTrain:
      return "train";
    case Split::kVal:
      return "val";
    case Split::kTest:
      return "test";
    case Split::kUnassigned:
      return "unassigned";
  }
  return "unknown";
}

Result<Split> ParseSplit(const std::string& s) {
  // "valid"/"validation" are what Roboflow and some exporters call val.
  if (s == "train") return Split::kTrain;
  if (s == "val" || s == "valid" || s == "validation") return Split::kVal;
  if (s == "test") return Split::kTest;
  if (s == "unassigned") return Split::kUnassigned;
  return Status::InvalidArgument("unknown split '" + s + "', expected train, val, test or unassigned");
}

namespace {

bool HasJsonIn(Env& env, const std::string& dir) {
  auto names = env.ListDir(dir);
  if (!names.IsOk()) return false;
  for (const std::string& n : *names) {
    if (Extension(n) == "json") return true;
  }
  return false;
}

}  // namespace

Result<std::string> DetectFormat(const std::string& path, Env* env_or_null) {
  Env& env = env_or_null != nullptr ? *env_or_null : Env::Default();
  FileInfo fi = env.Stat(path);
  if (!fi.exists) return Status::NotFound("dataset path does not exist", {path});
  if (!fi.is_dir) {
    std::string ext = Extension(path);
    if (ext == "yaml" || ext == "yml") return std::string("yolo");
    if (ext == "xml") return std::string("cvat");
    if (ext == "json") {
      // A Label Studio export is an array of tasks; COCO's JSON an object.
      // Env reads whole files: one past 256 MiB is taken for COCO (an
      // export that large can still be named with format=label-studio).
      Result<std::string> head = fi.size <= (uint64_t{256} << 20) ? env.ReadFile(path, uint64_t{256} << 20)
                                                                  : Result<std::string>(std::string("{"));
      const size_t first = head.IsOk() ? head->find_first_not_of(" \t\r\n\xEF\xBB\xBF") : std::string::npos;
      if (first != std::string::npos && (*head)[first] == '[') return std::string("label-studio");
      return std::string("coco");
    }
    return Status::InvalidArgument("cannot tell the dataset format of a '." + ext +
                                       "' file: pass a folder, a data.yaml (YOLO), an instances JSON (COCO), "
                                       "a Label Studio JSON export or "
                                       "a CVAT 1.1 XML file",
                                   {path});
  }
  auto is_dir = [&](const char* sub) { return env.Stat(JoinPath(path, sub)).is_dir; };
  auto is_file = [&](const char* sub) { return env.Stat(JoinPath(path, sub)).is_regular; };
  if (is_file("data.yaml") || is_file("data.yml") || is_file("dataset.yaml")) {
    return std::string("yolo");
  }
  if (is_dir("Annotations")) return std::string("voc");
  if (is_dir("annotations") && HasJsonIn(env, JoinPath(path, "annotations"))) {
    return std::string("coco");
  }
  if (is_dir("images")) return std::string("yolo");
  if (HasJsonIn(env, path)) return std::string("coco");
  return Status::InvalidArgument(
      "cannot detect the dataset format: expected data.yaml or images/ (YOLO), "
      "annotations/instances_*.json (COCO) or Annotations/ + JPEGImages/ (VOC)",
      {path});
}

void CheckClassNames(const std::vector<std::string>& names, const std::vector<std::string>& where,
                     const std::string& file, FindingList* out) {
  auto label = [&](size_t i) { return i < where.size() ? where[i] : "names[" + std::to_string(i) + "]"; };
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& n = names[i];
    if (n.find_first_not_of(" \t\r\n") == std::string::npos) {
      out->Add(MakeFinding(Severity::kWarning, "class.empty_name", file, 0, "names",
                           label(i) + " has an empty name", "kept"));
    }
    auto [it, fresh] = first.emplace(n, i);
    if (!fresh) {
      // Training works by id, but predictions, exports and evaluation by name
      // cannot tell the two apart.
      out->Add(MakeFinding(Severity::kError, "class.duplicate_name", file, 0, "names",
                           "class name '" + n + "' is used by both " + label(it->second) + " and " + label(i),
                           "kept as separate classes"));
    }
  }
}

Result<SourceDataset> ReadDataset(const std::string& path, const ReadOptions& opts) {
  std::string format = opts.format;
  if (format == "auto") {
    auto detected = DetectFormat(path, opts.env);
    if (!detected.IsOk()) return SanitizeStatus(detected.GetStatus());
    format = *detected;
  }
  // Messages quote paths and file content: keep them printable as JSON.
  if (format == "yolo") return SanitizeResult(ReadYoloDataset(path, opts));
  if (format == "coco") return SanitizeResult(ReadCocoDataset(path, opts));
  if (format == "voc") return SanitizeResult(ReadVocDataset(path, opts));
  if (format == "label-studio" || format == "cvat")
    return SanitizeResult(ReadCorrectionsDataset(path, format, opts));
  return Status::InvalidArgument(
      "unknown dataset format '" + format + "', expected auto, yolo, coco, voc, label-studio or cvat",
      {"", 0, "format"});
}

}  // namespace kestrel::data
