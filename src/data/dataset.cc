// data/dataset.h helpers and the format dispatch of data/formats.h.
#include "data/dataset.h"

#include <cstdio>

#include "data/formats.h"

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
    if (ext == "json") return std::string("coco");
    return Status::InvalidArgument(
        "cannot tell the dataset format of a '." + ext +
            "' file: pass a folder, a data.yaml (YOLO) or an instances JSON (COCO)",
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

Result<SourceDataset> ReadDataset(const std::string& path, const ReadOptions& opts) {
  std::string format = opts.format;
  if (format == "auto") {
    auto detected = DetectFormat(path, opts.env);
    if (!detected.IsOk()) return detected.GetStatus();
    format = *detected;
  }
  if (format == "yolo") return ReadYoloDataset(path, opts);
  if (format == "coco") return ReadCocoDataset(path, opts);
  if (format == "voc") return ReadVocDataset(path, opts);
  return Status::InvalidArgument("unknown dataset format '" + format + "', expected auto, yolo, coco or voc",
                                 {"", 0, "format"});
}

}  // namespace kestrel::data
