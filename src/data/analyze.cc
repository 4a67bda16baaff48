// Phase 1 of import: read the source, decode and validate every sample in
// parallel, find near duplicates, freeze the split and build the manifest.
// No writes happen here.
#include "data/analyze.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <map>

#include "core/hash.h"
#include "core/parallel.h"
#include "data/formats.h"
#include "data/image.h"
#include "data/near_dup.h"
#include "data/phash.h"
#include "data/text.h"

namespace kestrel::data {
namespace {

// What the parallel stage learns about one sample.
struct SampleResult {
  bool ok = false;  // decoded and labels usable
  std::string image_sha;
  std::string bytes;  // kept for the commit phase while under budget
  FileInfo file;      // stat of the image file taken before it was read
  int width = 0, height = 0;
  uint64_t phash = 0;
  std::vector<Box> boxes;
  FindingList findings;
};

// The importer's findings, argument order with the line last (rarely set)
// and the sample's image, when the finding is about one, after it.
Finding MakeFinding(Severity sev, std::string check, std::string file, std::string field, std::string message,
                    std::string action, int line = 0, ImageRef image = {}) {
  Finding f = data::MakeFinding(sev, std::move(check), std::move(file), line, std::move(field),
                                std::move(message), std::move(action));
  f.image = std::move(image);
  return f;
}

// The image of a sample as findings name it (its split may still change
// when the importer assigns splits; kUnassigned then).
ImageRef ImageOf(const Sample& s) { return {s.rel_path, s.split}; }

// COCO/VOC pixel boxes -> normalized boxes with the same clip/drop rules the
// YOLO parser applies to normalized ones.
std::vector<Box> NormalizePixelBoxes(const Sample& s, int w, int h, FindingList* out) {
  std::vector<Box> boxes;
  const std::string& file = s.label_path.empty() ? s.image_path : s.label_path;
  const double tol = 0.5;  // half a pixel of rounding in annotation tools is not a finding
  for (const auto& pb : s.pixel_boxes) {
    if (!std::isfinite(pb.x1) || !std::isfinite(pb.y1) || !std::isfinite(pb.x2) || !std::isfinite(pb.y2)) {
      out->push_back(MakeFinding(Severity::kError, "label.nonfinite", file, "bbox",
                                 "box of " + s.rel_path + " has a non-finite coordinate", "box dropped",
                                 pb.line, ImageOf(s)));
      continue;
    }
    double x1 = pb.x1, y1 = pb.y1, x2 = pb.x2, y2 = pb.y2;
    if (x1 < -tol || y1 < -tol || x2 > w + tol || y2 > h + tol) {
      out->push_back(MakeFinding(Severity::kWarning, "label.out_of_bounds", file, "bbox",
                                 "box of " + s.rel_path + " extends outside the " + std::to_string(w) + "x" +
                                     std::to_string(h) + " image",
                                 "clipped", pb.line, ImageOf(s)));
    }
    // Clip only real overshoot: a normalized 1e-6 of float noise is kept, as
    // the YOLO parser does, so a box survives a YOLO -> COCO -> YOLO trip.
    const double ex = 1e-6 * w, ey = 1e-6 * h;
    if (x1 < -ex || x2 > w + ex) {
      x1 = std::clamp(x1, 0.0, double(w));
      x2 = std::clamp(x2, 0.0, double(w));
    }
    if (y1 < -ey || y2 > h + ey) {
      y1 = std::clamp(y1, 0.0, double(h));
      y2 = std::clamp(y2, 0.0, double(h));
    }
    if (x2 - x1 <= 0 || y2 - y1 <= 0) {
      out->push_back(MakeFinding(Severity::kWarning, "label.degenerate", file, "bbox",
                                 "box of " + s.rel_path + " has zero or negative size after clipping",
                                 "box dropped", pb.line, ImageOf(s)));
      continue;
    }
    boxes.push_back({pb.cls, (x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h});
  }
  return boxes;
}

constexpr int64_t kKeepBytesBudget = int64_t{512} << 20;

SampleResult AnalyzeSample(const Sample& s, const ImportOptions& opts, Env& env,
                           std::atomic<int64_t>& kept_bytes) {
  SampleResult r;
  const ImageRef about = ImageOf(s);
  // Before the read: a write after it changes the mtime, so a reference
  // import (data_mode=reference) never records a size and time that match
  // other bytes than the ones hashed here.
  r.file = env.Stat(s.image_path);
  auto bytes = env.ReadFile(s.image_path, uint64_t{2} << 30);
  if (!bytes.IsOk()) {
    r.findings.push_back(MakeFinding(Severity::kError, "image.unreadable", s.image_path, "",
                                     bytes.GetStatus().Message(), "sample excluded", 0, about));
    return r;
  }
  if (bytes->empty()) {
    r.findings.push_back(MakeFinding(Severity::kError, "image.empty", s.image_path, "",
                                     "image file is empty (0 bytes)", "sample excluded", 0, about));
    return r;
  }
  r.image_sha = Sha256Hex(*bytes);
  DecodeOptions dopt;
  dopt.max_pixels = opts.max_pixels;
  ImageInfo info;
  DecodeFailure failure = DecodeFailure::kNone;
  auto img = DecodeImage(*bytes, s.image_path, dopt, &info, &failure);
  if (!img.IsOk()) {
    r.findings.push_back(MakeFinding(Severity::kError, DecodeFailureCheck(failure), s.image_path, "",
                                     img.GetStatus().Message(), "sample excluded", 0, about));
    return r;
  }
  for (auto& f : ImageInfoFindings(info, s.image_path)) {
    f.image = about;
    r.findings.Add(std::move(f));
  }
  r.width = img->cols;
  r.height = img->rows;
  r.phash = PerceptualHash(*img);
  if (s.boxes_in_pixels) {
    if (s.declared_width > 0 && s.declared_height > 0 &&
        (s.declared_width != r.width || s.declared_height != r.height)) {
      r.findings.push_back(MakeFinding(Severity::kWarning, "label.size_mismatch",
                                       s.label_path.empty() ? s.image_path : s.label_path, "width",
                                       "annotation says " + std::to_string(s.declared_width) + "x" +
                                           std::to_string(s.declared_height) + " for " + s.rel_path +
                                           " but the decoded image is " + std::to_string(r.width) + "x" +
                                           std::to_string(r.height),
                                       "decoded size used", 0, about));
    }
    r.boxes = NormalizePixelBoxes(s, r.width, r.height, &r.findings);
  } else {
    r.boxes = s.boxes;
  }
  r.ok = true;
  const auto size = static_cast<int64_t>(bytes->size());
  if (kept_bytes.fetch_add(size) + size <= kKeepBytesBudget) {
    r.bytes = std::move(bytes).Value();
  } else {
    kept_bytes.fetch_sub(size);
  }
  return r;
}

}  // namespace

Result<Analysis> AnalyzeDataset(const std::string& path, const ImportOptions& opts, Env& env) {
  ReadOptions ropt;
  ropt.format = opts.format;
  ropt.max_label_bytes = static_cast<uint64_t>(opts.max_label_bytes);
  ropt.max_boxes_per_image = static_cast<size_t>(opts.max_boxes_per_image);
  const int64_t t_start = env.NowMicros();
  KESTREL_ASSIGN_OR_RETURN(SourceDataset src, ReadDataset(path, ropt));
  const int64_t t_read = env.NowMicros();

  Analysis a;
  ValidationReport& rep = a.report;
  rep.source = EscapeInvalidUtf8(path);
  rep.format = src.format;
  rep.names = src.names;
  // Images the reader left out for their file name count as found and excluded.
  rep.images_total = static_cast<int64_t>(src.samples.size() + src.excluded_paths.size());
  rep.images_excluded = static_cast<int64_t>(src.excluded_paths.size());
  rep.excluded = src.excluded_paths;
  rep.findings = src.findings;

  std::vector<SampleResult> results(src.samples.size());
  // AnalyzeSample turns every problem into findings, so this never fails.
  std::atomic<int64_t> kept_bytes{0};
  (void)ParallelFor(src.samples.size(), opts.threads, [&](size_t i) -> Status {
    results[i] = AnalyzeSample(src.samples[i], opts, env, kept_bytes);
    return {};
  });
  const int64_t t_samples = env.NowMicros();

  // A sample is excluded when its image failed or its own label file had an
  // error (a partially parsed label file would teach missing objects as
  // background). COCO annotations live in one shared file, so only image
  // errors exclude there.
  // Exact per-file error counts (the stored examples are capped).
  auto file_has_error = [&](const std::string& file) {
    return !file.empty() && src.findings.ErrorsIn(file) > 0;
  };
  const bool per_sample_labels = src.format != "coco";
  const int nc = static_cast<int>(src.names.size());
  rep.class_counts.assign(static_cast<size_t>(nc), 0);
  rep.tiny_counts.assign(static_cast<size_t>(nc), 0);
  std::vector<size_t> kept;  // indices into src.samples
  for (size_t i = 0; i < src.samples.size(); ++i) {
    const Sample& s = src.samples[i];
    SampleResult& r = results[i];
    bool label_error = r.findings.HasErrorWithPrefix("label.");
    rep.findings.Merge(r.findings);
    r.findings = FindingList();
    if (per_sample_labels && file_has_error(s.label_path)) label_error = true;
    if (file_has_error(s.image_path)) r.ok = false;
    if (!r.ok || label_error) {
      ++rep.images_excluded;
      rep.excluded.push_back(s.image_path);
      continue;
    }
    kept.push_back(i);
  }

  // Manifest.
  Manifest& m = a.manifest;
  m.names = src.names;
  for (size_t i : kept) {
    const Sample& s = src.samples[i];
    SampleResult& r = results[i];
    ManifestEntry e;
    e.path = s.rel_path;
    e.split = s.split;
    e.image_sha = r.image_sha;
    e.width = r.width;
    e.height = r.height;
    e.boxes = r.boxes;
    m.entries.push_back(std::move(e));
  }
  // Remember disk paths across the sort in Canonicalize.
  std::map<std::pair<std::string, int>, std::string> disk_path;
  for (size_t i : kept) {
    disk_path[{src.samples[i].rel_path, static_cast<int>(src.samples[i].split)}] = src.samples[i].image_path;
  }
  Canonicalize(m);
  bool needs_split =
      !src.has_splits || std::any_of(m.entries.begin(), m.entries.end(),
                                     [](const ManifestEntry& e) { return e.split == Split::kUnassigned; });
  if (needs_split) {
    std::map<std::pair<std::string, int>, std::string> moved;
    std::vector<std::string> paths_in_order;
    for (const auto& e : m.entries) paths_in_order.push_back(disk_path[{e.path, static_cast<int>(e.split)}]);
    AssignSplits(m, opts.val_ratio, static_cast<uint64_t>(opts.seed));
    for (size_t k = 0; k < m.entries.size(); ++k) {
      moved[{m.entries[k].path, static_cast<int>(m.entries[k].split)}] = paths_in_order[k];
    }
    disk_path = std::move(moved);
    Canonicalize(m);
    rep.findings.push_back(
        MakeFinding(Severity::kInfo, "split.assigned", "", "split",
                    "source has no train/val split: assigned deterministically (val_ratio " +
                        std::to_string(opts.val_ratio) + ", seed " + std::to_string(opts.seed) + ")",
                    "split frozen in the version"));
  }
  for (const auto& e : m.entries) a.image_paths.push_back(disk_path[{e.path, static_cast<int>(e.split)}]);
  // The readers turn file names and class names that JSON cannot carry into
  // findings or errors; this guard keeps a reader bug from reaching the
  // manifest (nlohmann would abort the import half-way).
  for (const auto& n : m.names) {
    if (!IsValidUtf8(n)) {
      return Status::Internal("class name '" + EscapeInvalidUtf8(n) + "' is not valid UTF-8", {rep.source});
    }
  }
  for (const auto& e : m.entries) {
    if (auto bad = CheckManifestPath(e.path)) return Status::Internal(bad->message, {rep.source});
  }
  {
    std::map<std::string, size_t> result_of_path;
    for (size_t i : kept) result_of_path[src.samples[i].image_path] = i;
    for (const auto& p : a.image_paths) {
      SampleResult& r = results[result_of_path[p]];
      a.image_files.push_back(r.file);
      a.image_bytes.push_back(std::move(r.bytes));
    }
  }

  // Per-class and tiny-object statistics on what is kept.
  for (const auto& e : m.entries) {
    double scale = double(opts.imgsz) / std::max(e.width, e.height);
    for (const auto& b : e.boxes) {
      if (b.cls < 0 || b.cls >= nc) continue;
      ++rep.boxes;
      ++rep.class_counts[static_cast<size_t>(b.cls)];
      double side = std::min(b.w * e.width, b.h * e.height) * scale;
      if (side < opts.tiny_object_px) ++rep.tiny_counts[static_cast<size_t>(b.cls)];
    }
  }
  for (int c = 0; c < nc; ++c) {
    if (rep.tiny_counts[static_cast<size_t>(c)] > 0) {
      rep.findings.push_back(
          MakeFinding(Severity::kInfo, "class.tiny_objects", "", src.names[static_cast<size_t>(c)],
                      std::to_string(rep.tiny_counts[static_cast<size_t>(c)]) + " of " +
                          std::to_string(rep.class_counts[static_cast<size_t>(c)]) + " '" +
                          src.names[static_cast<size_t>(c)] + "' objects are smaller than " +
                          std::to_string(static_cast<int>(opts.tiny_object_px)) + " px at imgsz " +
                          std::to_string(opts.imgsz),
                      "kept"));
    }
  }
  if (nc > 0 && rep.boxes > 0) {
    int64_t mx = *std::max_element(rep.class_counts.begin(), rep.class_counts.end());
    for (int c = 0; c < nc; ++c) {
      int64_t n = rep.class_counts[static_cast<size_t>(c)];
      const std::string& name = src.names[static_cast<size_t>(c)];
      if (n == 0) {
        rep.findings.push_back(MakeFinding(Severity::kWarning, "class.empty", "", name,
                                           "class '" + name + "' has no instances", "kept"));
      } else if (static_cast<double>(mx) / static_cast<double>(n) > opts.imbalance_ratio) {
        rep.findings.push_back(MakeFinding(
            Severity::kWarning, "class.imbalance", "", name,
            "class '" + name + "' has " + std::to_string(n) + " instances, " +
                std::to_string(static_cast<int64_t>(static_cast<double>(mx) / static_cast<double>(n))) +
                "x fewer than the largest class (limit " +
                std::to_string(static_cast<int>(opts.imbalance_ratio)) + "x)",
            "kept"));
      }
    }
  }

  // Near duplicates within a split and leakage across splits.
  std::vector<uint64_t> hashes;
  std::vector<Split> splits;
  // After AssignSplits the split differs from the source's; look hashes up by
  // the image sha instead, which is stable.
  std::map<std::string, uint64_t> hash_by_sha;
  for (size_t i : kept) hash_by_sha[results[i].image_sha] = results[i].phash;
  for (const auto& e : m.entries) {
    hashes.push_back(hash_by_sha[e.image_sha]);
    splits.push_back(e.split);
  }
  NearDupOptions nd;
  nd.max_distance = opts.near_dup_distance;
  nd.max_pairs = 100'000;
  auto dups = FindNearDuplicates(hashes, nd);
  if (dups.IsOk()) {
    auto classified = ClassifyBySplit(dups->pairs, splits);
    if (classified.IsOk()) {
      for (const auto& p : *classified) {
        const auto& ei = m.entries[static_cast<size_t>(p.pair.i)];
        const auto& ej = m.entries[static_cast<size_t>(p.pair.j)];
        const std::string& file_i = a.image_paths[static_cast<size_t>(p.pair.i)];
        const std::string& file_j = a.image_paths[static_cast<size_t>(p.pair.j)];
        std::string desc = file_i + " (" + SplitName(ei.split) + ") and " + file_j + " (" +
                           SplitName(ej.split) + "), pHash distance " + std::to_string(p.pair.distance);
        Finding f;
        if (p.cross_split) {
          ++rep.leakage_pairs;
          f = MakeFinding(Severity::kWarning, "split.leakage", file_i, "split",
                          "near-duplicate images across splits: " + desc, "kept; consider removing one");
        } else {
          ++rep.near_duplicate_pairs;
          f = MakeFinding(Severity::kWarning, "image.near_duplicate", file_i, "",
                          "near-duplicate images: " + desc, "kept");
        }
        f.image = {ei.path, ei.split};
        f.other = {ej.path, ej.split};
        f.other_file = file_j;
        f.distance = p.pair.distance;
        rep.findings.push_back(std::move(f));
      }
    }
    if (dups->truncated) {
      rep.findings.push_back(MakeFinding(Severity::kWarning, "image.near_duplicate", "", "",
                                         "more than 100000 near-duplicate pairs; list truncated", "kept"));
    }
  }
  spdlog::debug("analyze {}: read source {:.3f} s, samples {:.3f} s, rest {:.3f} s", path,
                (t_read - t_start) / 1e6, (t_samples - t_read) / 1e6, (env.NowMicros() - t_samples) / 1e6);
  if (m.entries.empty()) {
    rep.findings.push_back(MakeFinding(Severity::kError, "dataset.empty", path, "",
                                       "no usable images remain after validation", "nothing to import"));
  }
  return a;
}

}  // namespace kestrel::data
