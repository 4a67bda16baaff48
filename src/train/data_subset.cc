#include "train/data_subset.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "core/parse.h"

namespace kestrel::train {

namespace {

std::string Trimmed(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

Result<std::vector<int>> ParseIndexList(const std::string& text, const std::string& key, int max) {
  std::string body = Trimmed(text);
  if (body.size() >= 2 && body.front() == '[' && body.back() == ']') body = body.substr(1, body.size() - 2);
  std::vector<int> out;
  if (Trimmed(body).empty()) return out;
  size_t begin = 0;
  while (true) {
    const size_t comma = body.find(',', begin);
    const std::string item =
        Trimmed(body.substr(begin, comma == std::string::npos ? std::string::npos : comma - begin));
    auto v = ParseInt64(item, {"", 0, key}, 0, max);
    if (!v.IsOk()) {
      return Status::InvalidArgument(key + "=" + text + ": '" + item + "' is not an integer in [0, " +
                                         std::to_string(max) + "] (a list is written 0,2 or [0,2])",
                                     {"", 0, key});
    }
    out.push_back(static_cast<int>(*v));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return out;
}

void DataSubset::Bind(OptionSet& s, bool train) {
  s.String("classes", &classes,
           "only these class indices' labels count, e.g. 0,2 or [0,2] (the images stay; \"\" = every class)");
  s.Bool("single_cls", &single_cls, "treat every label as one class, 'item' (class 0)");
  if (train) {
    s.Float("fraction", &fraction, "train on the first share of the train split's images (manifest order)",
            Range::OpenClosed(0, 1));
  }
}

Status DataSubset::Validate() const {
  KESTREL_RETURN_IF_ERROR(CheckBoundValues(*this));
  return ClassList().GetStatus();
}

Result<std::vector<int>> DataSubset::ClassList() const {
  KESTREL_ASSIGN_OR_RETURN(std::vector<int> list, ParseIndexList(classes, "classes", 1 << 20));
  std::sort(list.begin(), list.end());
  list.erase(std::unique(list.begin(), list.end()), list.end());
  return list;
}

Result<data::Manifest> DataSubset::Apply(const data::Manifest& m, std::string* summary) const {
  KESTREL_RETURN_IF_ERROR(Validate());
  KESTREL_ASSIGN_OR_RETURN(std::vector<int> keep, ClassList());
  const int nc = static_cast<int>(m.names.size());
  for (int c : keep) {
    if (c >= nc) {
      return Status::InvalidArgument("classes=" + classes + ": the dataset has " + std::to_string(nc) +
                                         " classes (0.." + std::to_string(nc - 1) + "); there is no class " +
                                         std::to_string(c),
                                     {"", 0, "classes"});
    }
  }
  data::Manifest out = m;
  std::vector<std::string> what;
  if (!keep.empty()) {
    const std::set<int> kept(keep.begin(), keep.end());
    int64_t dropped = 0;
    for (auto& e : out.entries) {
      const size_t before = e.boxes.size();
      e.boxes.erase(std::remove_if(e.boxes.begin(), e.boxes.end(),
                                   [&](const data::Box& b) { return kept.count(b.cls) == 0; }),
                    e.boxes.end());
      dropped += static_cast<int64_t>(before - e.boxes.size());
    }
    std::string names;
    for (int c : keep) names += (names.empty() ? "" : ", ") + std::to_string(c) + " " + m.names[c];
    what.push_back("classes " + names + " only (" + std::to_string(dropped) + " other labels dropped)");
  }
  if (single_cls) {
    for (auto& e : out.entries) {
      for (auto& b : e.boxes) b.cls = 0;
    }
    out.names = {"item"};
    what.push_back("single_cls: " + std::to_string(nc) + " classes as one, 'item'");
  }
  if (!keep.empty() || single_cls) {
    // The hashes of the changed labels. Not data::Canonicalize: single_cls
    // keeps two boxes that now differ by nothing, as the reference does.
    for (auto& e : out.entries) e.label_hash = data::LabelHash(e.boxes);
  }
  if (fraction < 1.0) {
    int64_t n = 0;
    for (const auto& e : out.entries) n += e.split == data::Split::kTrain ? 1 : 0;
    // Python's round(): the reference's im_files[:round(n * fraction)].
    const int64_t take = static_cast<int64_t>(std::nearbyint(static_cast<double>(n) * fraction));
    if (take < 1) {
      return Status::InvalidArgument(
          "fraction=" + std::to_string(fraction) + " of " + std::to_string(n) + " train images keeps none",
          {"", 0, "fraction"});
    }
    int64_t seen = 0;
    std::vector<data::ManifestEntry> kept;
    kept.reserve(out.entries.size());
    for (auto& e : out.entries) {
      if (e.split == data::Split::kTrain && seen++ >= take) continue;
      kept.push_back(std::move(e));
    }
    out.entries = std::move(kept);
    what.push_back("fraction: " + std::to_string(take) + " of " + std::to_string(n) + " train images");
  }
  if (summary != nullptr) {
    summary->clear();
    for (const auto& w : what) *summary += (summary->empty() ? "" : "; ") + w;
  }
  return out;
}

}  // namespace kestrel::train
