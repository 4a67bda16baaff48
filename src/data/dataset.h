// The in-memory description of a dataset as read from a source folder
// (YOLO, COCO or VOC), before it becomes a version. Torch-free.
//
// Paths: `Sample::rel_path` is the image path relative to the image root of
// its split (e.g. "birds/0001.jpg" for "images/train/birds/0001.jpg"), '/'
// separated, never absolute, never "..". It is the key of the manifest, so it
// must not depend on where the dataset lives or on listing order.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kestrel::data {

enum class Severity { kError, kWarning, kInfo };
const char* SeverityName(Severity s);  // "error", "warning", "info"

enum class Split { kTrain, kVal, kTest, kUnassigned };
const char* SplitName(Split s);  // "train", "val", "test", "unassigned"
Result<Split> ParseSplit(const std::string& s);

// A manifest image as a finding names it: its manifest key.
struct ImageRef {
  std::string path;                  // Sample::rel_path (= ManifestEntry::path); "" = no image
  Split split = Split::kUnassigned;  // kUnassigned: not known when the finding was made
  bool operator==(const ImageRef&) const = default;
};

// One validation finding. `check` is a stable machine-readable id
// ("label.syntax", "image.truncated", ...; listed in docs/datasets.md).
//
// `message` is for people: it is escaped, cut and shown, and its wording may
// change; code never reads it. What code needs later (which image, the other
// image of a pair, the distance) travels in the typed fields below, which the
// stored report keeps too (docs/formats.md, FindingToJson in analyze.h).
struct Finding {
  Severity severity = Severity::kInfo;
  std::string check;
  std::string file;   // path as the user knows it (source path), "" if dataset-wide
  int line = 0;       // 1-based line in a label file, 0 if not applicable
  std::string field;  // e.g. "class", "x_center", "bbox", "file_name"
  std::string message;
  std::string action;  // what import did: "sample excluded", "clipped", "box dropped", ...
  // The image this finding is about, where its producer knows the sample
  // (the importer's per-image findings, pairs); empty otherwise (the reader's
  // label findings name their image through `file`).
  ImageRef image;
  // Pair findings (image.near_duplicate, split.leakage): `image` is the
  // first image (`file` its source path), these the second and the pHash
  // Hamming distance of the two (0..64). Empty / -1 for other findings.
  ImageRef other;
  std::string other_file;
  int distance = -1;
};

// Findings with exact counts and a bounded number of stored examples.
//
// A 50 MB label file of 2.9 M identical lines used to make 2.9 M Finding
// objects (7.8 GB, a 788 MB --json, a 544 MB report blob; issue 10). A
// FindingList counts every finding exactly, per (severity, check) and per
// file, but keeps only the first `max_per_check` examples of each check and
// at most `max_per_file_check` of those from any one file, so memory is
// bounded by the files in flight, not by lines. Examples keep insertion
// order (deterministic when findings are added in sample order); their text
// is made valid UTF-8 on the way in (invalid bytes shown as \xHH).
//
// It iterates like the vector it replaces (over the stored examples), so
// `for (const Finding& f : list)` and `list.push_back(f)` keep working.
class FindingList {
 public:
  static constexpr size_t kMaxExamplesPerCheck = 100;
  static constexpr size_t kMaxExamplesPerFileAndCheck = 10;

  FindingList() = default;
  FindingList(size_t max_per_check, size_t max_per_file_check)
      : max_per_check_(max_per_check), max_per_file_check_(max_per_file_check) {}

  void Add(Finding f);
  // NOLINTNEXTLINE(readability-identifier-naming): std::back_inserter needs this name
  void push_back(Finding f) { Add(std::move(f)); }
  // True when a finding of this check from this file would be stored as an
  // example; when false, CountOnly() is enough (saves building the message).
  bool WouldKeep(std::string_view check, std::string_view file) const;
  void CountOnly(Severity severity, std::string_view check, std::string_view file);
  // Adds all of `other`'s counts exactly and its examples under this list's caps.
  void Merge(const FindingList& other);

  const std::vector<Finding>& Examples() const { return examples_; }
  // The container interface (range-for, gtest matchers) needs these names.
  // NOLINTBEGIN(readability-identifier-naming)
  std::vector<Finding>::const_iterator begin() const { return examples_.begin(); }
  std::vector<Finding>::const_iterator end() const { return examples_.end(); }
  size_t size() const { return examples_.size(); }  // stored examples
  bool empty() const { return total_ == 0; }
  // NOLINTEND(readability-identifier-naming)
  const Finding& operator[](size_t i) const { return examples_[i]; }

  int64_t Total() const { return total_; }
  int64_t Omitted() const { return total_ - static_cast<int64_t>(examples_.size()); }
  int64_t Count(Severity s) const { return by_severity_[static_cast<size_t>(s)]; }
  int64_t Count(Severity s, std::string_view check) const;
  // Errors whose Finding::file is exactly `file` (as given to Add, before
  // any escaping), e.g. a label path or an image path.
  int64_t ErrorsIn(std::string_view file) const;
  // Any error whose check id starts with `prefix` ("label.").
  bool HasErrorWithPrefix(std::string_view prefix) const;

  struct CheckCount {
    Severity severity = Severity::kInfo;
    std::string check;
    int64_t count = 0;     // exact
    int64_t examples = 0;  // stored
  };
  // Sorted by severity (errors first), then check id.
  std::vector<CheckCount> ByCheck() const;
  struct FileCount {
    std::string file;                      // as given (may be invalid UTF-8; escape before printing)
    std::array<int64_t, 3> by_severity{};  // indexed by Severity
    int64_t Total() const { return by_severity[0] + by_severity[1] + by_severity[2]; }
  };
  // The `n` files with the most findings (ties by path).
  std::vector<FileCount> TopFiles(size_t n) const;
  size_t MaxPerCheck() const { return max_per_check_; }
  size_t MaxPerFileCheck() const { return max_per_file_check_; }

 private:
  struct PairLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      std::string_view a1 = a.first, b1 = b.first;
      if (a1 != b1) return a1 < b1;
      return std::string_view(a.second) < std::string_view(b.second);
    }
  };
  void Tally(Severity s, std::string_view check, std::string_view file, int64_t n);
  void Store(Finding f);

  size_t max_per_check_ = kMaxExamplesPerCheck;
  size_t max_per_file_check_ = kMaxExamplesPerFileAndCheck;
  std::vector<Finding> examples_;
  int64_t total_ = 0;
  std::array<int64_t, 3> by_severity_{};
  std::vector<CheckCount> by_check_;  // few distinct checks: linear search
  std::map<std::string, std::array<int64_t, 3>, std::less<>> by_file_;
  std::map<std::pair<std::string, std::string>, size_t, PairLess> examples_by_check_file_;
};

// A finding with every field given (line 0 = not applicable).
Finding MakeFinding(Severity severity, std::string check, std::string file, int line, std::string field,
                    std::string message, std::string action);
// Short human form of a number in messages ("%g": 0.5, 1e+06).
std::string FormatNumber(double v);

// A box, normalized to the (EXIF-oriented) image: center x/y, width, height
// in [0, 1]; `cls` indexes SourceDataset::names.
struct Box {
  int cls = 0;
  double cx = 0, cy = 0, w = 0, h = 0;
  bool operator==(const Box&) const = default;
};

// A box in pixels of the oriented image, xyxy, for formats that store pixels
// (COCO, VOC) before the importer knows the decoded size.
struct PixelBox {
  int cls = 0;
  double x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  int line = 0;  // source line/ordinal for findings, 0 if unknown
};

struct Sample {
  std::string image_path;  // readable path on disk
  std::string rel_path;    // manifest key, see the file comment
  std::string label_path;  // source of the labels ("" when none)
  Split split = Split::kUnassigned;
  bool has_label = false;  // false: missing label file -> background
  // Exactly one of these is used: normalized boxes (YOLO) or pixel boxes
  // (COCO/VOC) that the importer normalizes with the decoded image size.
  std::vector<Box> boxes;
  std::vector<PixelBox> pixel_boxes;
  bool boxes_in_pixels = false;
  int declared_width = 0;  // from the annotation, 0 if unknown
  int declared_height = 0;
};

struct SourceDataset {
  std::string root;                // folder the dataset was read from
  std::string format;              // "yolo", "coco", "voc"
  std::vector<std::string> names;  // class names, index = class id
  std::vector<Sample> samples;     // sorted by (rel_path, split)
  FindingList findings;            // label/structure findings found while reading
  bool has_splits = false;         // the source defined train/val(/test)
  // Images found but left out by the reader because their file name cannot
  // be a manifest key (findings path.not_utf8 / path.control_char), as the
  // reader saw them (may be invalid UTF-8). The importer counts them as
  // images found and excluded.
  std::vector<std::string> excluded_paths;
};

}  // namespace kestrel::data
