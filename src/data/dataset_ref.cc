#include "data/dataset_ref.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "core/env.h"

namespace kestrel::data {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Path components of `path` made absolute and normalized, so "." and
// "shapes/" have names too. Empty components (a trailing '/') are dropped.
std::vector<std::string> Components(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::absolute(path, ec);
  if (ec) p = path;
  p = p.lexically_normal();
  std::vector<std::string> out;
  for (const auto& c : p) {
    std::string s = c.string();
    if (!s.empty() && s != "/" && s != ".") out.push_back(s);
  }
  return out;
}

bool IsGenericStem(const std::string& stem) {
  static const std::array<const char*, 8> kGeneric = {"data",  "dataset", "annotations", "_annotations.coco",
                                                      "train", "val",     "test",        "valid"};
  const std::string s = Lower(stem);
  if (s.rfind("instances", 0) == 0) return true;
  return std::find(kGeneric.begin(), kGeneric.end(), s) != kGeneric.end();
}

std::string Sanitize(const std::string& raw) {
  std::string out;
  for (char c : raw) {
    const bool keep = std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
    out += keep ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") return "dataset";
  return out;
}

}  // namespace

bool IsDatasetPath(const std::string& data) {
  if (data.find('/') != std::string::npos || data == "." || data == "..") return true;
  const std::string lower = Lower(data);
  return EndsWith(lower, ".yaml") || EndsWith(lower, ".yml") || EndsWith(lower, ".json");
}

std::string DatasetNameForPath(const std::string& path) {
  std::vector<std::string> parts = Components(path);
  if (parts.empty()) return "dataset";
  std::string last = parts.back();
  const std::string ext = Extension(last);
  const bool is_file = ext == "yaml" || ext == "yml" || ext == "json";
  if (!is_file) return Sanitize(last);
  const std::string stem = Stem(last);
  if (!IsGenericStem(stem)) return Sanitize(stem);
  // A generic file name: the folder that holds it, above annotations/ or labels/.
  parts.pop_back();
  while (!parts.empty() && (Lower(parts.back()) == "annotations" || Lower(parts.back()) == "labels")) {
    parts.pop_back();
  }
  return parts.empty() ? Sanitize(stem) : Sanitize(parts.back());
}

}  // namespace kestrel::data
