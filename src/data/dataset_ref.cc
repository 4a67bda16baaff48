#include "data/dataset_ref.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "data/text.h"

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

Result<ResolvedDataset> ResolveDataset(Registry& registry, store::MetadataStore& meta,
                                       const std::string& data, ValidationReport* report_out, Env& env) {
  ResolvedDataset out;
  if (!IsDatasetPath(data)) {
    out.spec = data;
    // `data=shapes` meant for a folder in the current directory: say how to
    // write it rather than only "no dataset named 'shapes'".
    std::string name, ref;
    store::SplitDatasetRef(data, &name, &ref);
    auto v = meta.GetVersion(name, ref);
    if (!v.IsOk() && v.GetStatus().Code() == StatusCode::kNotFound && ref.empty() && env.Stat(data).exists) {
      out.hint = "no dataset named '" + EscapeForDisplay(data) + "' in the registry; to import the " +
                 (env.Stat(data).is_dir ? "folder" : "file") + " '" + EscapeForDisplay(data) +
                 "', write data=./" + EscapeForDisplay(data);
    }
    return out;
  }

  out.from_path = true;
  const std::string name = DatasetNameForPath(data);
  const ImportOptions opts;
  KESTREL_ASSIGN_OR_RETURN(Analysis a, AnalyzeDataset(data, opts, env));
  if (report_out != nullptr) *report_out = a.report;
  const int64_t images = static_cast<int64_t>(a.manifest.entries.size());

  // Identical content already registered, under this name or another: reuse
  // that version (a source with errors never matches: Import refuses it).
  const std::string id = VersionId(a.manifest);
  bool found = false;
  if (a.report.Count(Severity::kError) == 0 && images > 0) {
    auto same = meta.GetVersion(name, id);
    if (same.IsOk()) {
      out.record = std::move(same).Value();
      found = true;
    } else {
      auto all = meta.ListDatasets();
      if (all.IsOk()) {
        for (const auto& d : *all) {
          auto other = meta.GetVersion(d.name, id);
          if (other.IsOk()) {
            out.record = std::move(other).Value();
            found = true;
            break;
          }
        }
      }
    }
  }
  if (!found) {
    KESTREL_ASSIGN_OR_RETURN(ImportResult r, registry.ImportAnalyzed(data, name, std::move(a), opts));
    out.record = std::move(r.record);
    out.created = r.created;
  }
  const auto& rec = out.record;
  const std::string version = rec.dataset + "@v" + std::to_string(rec.seq);
  out.spec = rec.dataset + "@" + rec.version_id;
  out.message = "data: " + EscapeForDisplay(data) + " -> " + (out.created ? "imported as " : "reused ") +
                version + " (version " + rec.version_id.substr(0, 12) + ", " +
                std::to_string(rec.num_images) + " images" +
                (out.created ? "" : ", identical content already stored") + ")";
  return out;
}

}  // namespace kestrel::data
