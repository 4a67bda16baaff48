// Loader statistics against the reference trainer's loader on coco128
// (skipped when ../shared/datasets/coco128 is absent).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/formats.h"
#include "data/image.h"
#include "loader_test_util.h"

namespace kestrel::data {
namespace {

namespace fs = std::filesystem;

// Loader statistics against the reference trainer's loader on coco128.
//
// ../shared/reference/training_coco128/aug_stats.json holds the reference
// loader's per-sample statistics at imgsz 320 with default augmentation:
// 306 samples with mosaic on, 102 with mosaic closed (letterbox + random
// affine). This test draws many more samples from Kestrel's loader on the same
// images and asserts that each mean agrees within kStatTolerance combined
// standard errors (rule in docs/data-pipeline.md, "Loader statistics").

constexpr double kStatTolerance = 4.0;

std::string SharedDir() { return std::string(KESTREL_SHARED_DIR); }

// coco128's train split as an in-memory dataset. Images are stored as BMP of
// the decoded pixels so the many epochs below do not spend their time in the
// JPEG decoder; the pixels the loader sees are exactly DecodeImage's.
const MemData* Coco128Train() {
  static std::unique_ptr<MemData> cached;
  static bool tried = false;
  if (tried) return cached.get();
  tried = true;
  const fs::path root = fs::path(SharedDir()) / "datasets" / "coco128";
  if (!fs::is_directory(root / "images" / "train")) return nullptr;
  std::vector<fs::path> images;
  for (const auto& e : fs::directory_iterator(root / "images" / "train")) images.push_back(e.path());
  std::sort(images.begin(), images.end());
  auto d = std::make_unique<MemData>();
  d->manifest.names.resize(80);
  for (const fs::path& img : images) {
    std::ifstream in(img, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto rgb = DecodeImage(bytes, img.string());
    if (!rgb.IsOk()) continue;
    cv::Mat bgr;
    cv::cvtColor(*rgb, bgr, cv::COLOR_RGB2BGR);
    std::vector<uint8_t> bmp;
    cv::imencode(".bmp", bgr, bmp);
    std::string label_text;
    const fs::path label = root / "labels" / "train" / (img.stem().string() + ".txt");
    if (fs::exists(label)) {
      std::ifstream lt(label);
      label_text.assign((std::istreambuf_iterator<char>(lt)), std::istreambuf_iterator<char>());
    }
    std::vector<Finding> findings;
    std::vector<Box> boxes = ParseYoloLabels(label_text, label.string(), 80, &findings);
    AddEntry(*d, img.filename().string(), Split::kTrain, std::string(bmp.begin(), bmp.end()), rgb->cols,
             rgb->rows, CanonicalBoxes(boxes));
  }
  if (d->manifest.entries.empty()) return nullptr;
  cached = std::move(d);
  return cached.get();
}

// Per-sample values and their clustered mean: boxes are grouped by sample,
// so the standard error of a per-box mean uses the ratio estimator.
struct StatSeries {
  std::vector<double> sum;    // per sample: sum of the value over its boxes (or the value)
  std::vector<double> count;  // per sample: number of boxes (or 1)
  double Mean() const {
    double s = 0, n = 0;
    for (size_t i = 0; i < sum.size(); ++i) s += sum[i], n += count[i];
    return n > 0 ? s / n : 0;
  }
  // Standard error of Mean() over independent samples (clusters).
  double StdError() const {
    const double m = Mean();
    double n = 0, r2 = 0;
    for (size_t i = 0; i < sum.size(); ++i) {
      n += count[i];
      r2 += (sum[i] - m * count[i]) * (sum[i] - m * count[i]);
    }
    const double k = static_cast<double>(sum.size());
    return n > 0 && k > 1 ? std::sqrt(r2 * k / (k - 1)) / n : 0;
  }
};

struct LoaderStatistics {
  int64_t samples = 0;
  StatSeries boxes, empty, box_w, box_h, box_area, border, pixel_mean;
  // Every value, for the percentiles: per sample (boxes) or per box.
  std::vector<double> all_boxes, all_w, all_h, all_area;
};

// Statistics of epochs [first, first + epochs) of a coco128 loader whose
// total run is `total_epochs` (close_mosaic 10, the default).
LoaderStatistics MeasureLoader(const MemData& d, int first, int epochs, int total_epochs) {
  LoaderOptions o;
  o.imgsz = 320;
  o.batch = 16;
  o.workers = 2;
  o.prefetch = 2;
  o.epochs = total_epochs;
  o.seed = 7;
  auto l = Make(d, o);
  LoaderStatistics st;
  if (l == nullptr) return st;
  // Border: a box edge within 1e-3 of the image edge (normalized), i.e. a box
  // the affine or the mosaic clipped, or an object that touched its photo's edge.
  constexpr double kBorder = 1e-3;
  for (int e = first; e < first + epochs; ++e) {
    EXPECT_TRUE(l->StartEpoch(e).IsOk());
    for (;;) {
      auto b = l->Next();
      EXPECT_TRUE(b.IsOk()) << b.GetStatus().ToString();
      if (!b.IsOk() || !b->has_value()) break;
      const Batch& batch = **b;
      const size_t plane = static_cast<size_t>(batch.height) * batch.width * 3;
      for (int i = 0; i < batch.size; ++i) {
        double pix = 0;
        const float* p = batch.images.data() + static_cast<size_t>(i) * plane;
        for (size_t k = 0; k < plane; ++k) pix += p[k];
        double n = 0, w = 0, h = 0, a = 0, border = 0;
        for (int64_t r = 0; r < batch.NumTargets(); ++r) {
          const float* t = batch.targets.data() + r * 6;
          if (static_cast<int>(t[0]) != i) continue;
          n += 1, w += t[4], h += t[5], a += static_cast<double>(t[4]) * t[5];
          st.all_w.push_back(t[4]), st.all_h.push_back(t[5]);
          st.all_area.push_back(static_cast<double>(t[4]) * t[5]);
          const double x1 = t[2] - t[4] / 2.0, x2 = t[2] + t[4] / 2.0;
          const double y1 = t[3] - t[5] / 2.0, y2 = t[3] + t[5] / 2.0;
          if (x1 <= kBorder || y1 <= kBorder || x2 >= 1 - kBorder || y2 >= 1 - kBorder) border += 1;
        }
        st.samples++;
        st.boxes.sum.push_back(n), st.boxes.count.push_back(1);
        st.all_boxes.push_back(n);
        st.empty.sum.push_back(n == 0 ? 1 : 0), st.empty.count.push_back(1);
        st.border.sum.push_back(border), st.border.count.push_back(1);
        st.box_w.sum.push_back(w), st.box_w.count.push_back(n);
        st.box_h.sum.push_back(h), st.box_h.count.push_back(n);
        st.box_area.sum.push_back(a), st.box_area.count.push_back(n);
        st.pixel_mean.sum.push_back(pix / static_cast<double>(plane) * 255.0),
            st.pixel_mean.count.push_back(1);
      }
      l->Recycle(std::move(**b));
    }
  }
  return st;
}

// "key": { ... "mean": <number> } inside the block `section` of the JSON text.
std::optional<double> RefValue(const std::string& json, const std::string& section, const std::string& key,
                               const std::string& field = "mean") {
  size_t s = json.find("\"" + section + "\"");
  if (s == std::string::npos) return std::nullopt;
  size_t k = json.find("\"" + key + "\"", s);
  if (k == std::string::npos) return std::nullopt;
  size_t colon = json.find(':', k);
  if (field.empty()) return std::stod(json.substr(colon + 1));  // "key": number
  size_t f = json.find("\"" + field + "\"", colon);
  if (f == std::string::npos) return std::nullopt;
  return std::stod(json.substr(json.find(':', f) + 1));
}

// Percentile q (0-100) with linear interpolation between order statistics.
double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - static_cast<double>(lo)) * (v[hi] - v[lo]);
}

void PrintPercentiles(const LoaderStatistics& st, const std::string& json, const std::string& section) {
  const std::pair<const char*, const std::vector<double>*> rows[] = {{"boxes_per_sample", &st.all_boxes},
                                                                     {"box_w", &st.all_w},
                                                                     {"box_h", &st.all_h},
                                                                     {"box_area", &st.all_area}};
  std::printf("%-18s %s\n", "percentiles", "p5 p25 p50 p75 p95: kestrel / reference");
  for (const auto& [key, values] : rows) {
    std::printf("%-18s", key);
    for (const char* q : {"p5", "p25", "p50", "p75", "p95"}) {
      auto ref = RefValue(json, section, key, q);
      std::printf("  %.4g/%.4g", Percentile(*values, std::atof(q + 1)), ref ? *ref : NAN);
    }
    std::printf("\n");
  }
}

void CompareWithReference(const LoaderStatistics& st, const std::string& json, const std::string& section) {
  PrintPercentiles(st, json, section);
  const double ref_n = *RefValue(json, section, "samples", "");
  struct Row {
    const char* key;
    const char* field;
    const StatSeries* ours;
  };
  const Row rows[] = {{"boxes_per_sample", "mean", &st.boxes},
                      {"empty_fraction", "", &st.empty},
                      {"box_w", "mean", &st.box_w},
                      {"box_h", "mean", &st.box_h},
                      {"box_area", "mean", &st.box_area},
                      {"border_boxes_per_sample", "", &st.border},
                      {"pixel_mean_0_255", "mean", &st.pixel_mean}};
  std::printf("%-26s %12s %12s %10s %8s  (%s: ours %lld samples, reference %.0f)\n", "statistic", "kestrel",
              "reference", "se", "z", section.c_str(), static_cast<long long>(st.samples), ref_n);
  for (const Row& r : rows) {
    auto ref = RefValue(json, section, r.key, r.field);
    ASSERT_TRUE(ref.has_value()) << r.key;
    const double ours = r.ours->Mean();
    // The reference mean is over ref_n samples of (we assume) the same
    // distribution: its standard error scales ours by sqrt(n_ours / n_ref).
    const double se_ours = r.ours->StdError();
    const double se_ref = se_ours * std::sqrt(static_cast<double>(st.samples) / ref_n);
    const double se = std::sqrt(se_ours * se_ours + se_ref * se_ref);
    const double z = se > 0 ? (ours - *ref) / se : 0;
    std::printf("%-26s %12.5f %12.5f %10.5f %8.2f\n", r.key, ours, *ref, se, z);
    EXPECT_LE(std::abs(z), kStatTolerance)
        << section << " " << r.key << ": kestrel " << ours << " vs reference " << *ref
        << " (combined standard error " << se << ")";
  }
}

std::optional<std::string> ReferenceAugStats() {
  std::ifstream in(SharedDir() + "/reference/training_coco128/aug_stats.json");
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Epochs measured per statistic: KESTREL_STATS_EPOCHS, else 16.
int StatsEpochs() {
  const char* v = std::getenv("KESTREL_STATS_EPOCHS");
  return v != nullptr ? std::atoi(v) : 16;
}

TEST(LoaderStatsTest, MosaicEpochsMatchReferenceLoaderOnCoco128) {
  auto json = ReferenceAugStats();
  const MemData* d = Coco128Train();
  if (!json || d == nullptr) GTEST_SKIP() << "no ../shared/datasets/coco128 or ../shared/reference";
  const int epochs = StatsEpochs();
  LoaderStatistics st = MeasureLoader(*d, 0, epochs, epochs + 10);
  CompareWithReference(st, *json, "mosaic_on_3_epochs");
}

TEST(LoaderStatsTest, ClosedMosaicEpochsMatchReferenceLoaderOnCoco128) {
  auto json = ReferenceAugStats();
  const MemData* d = Coco128Train();
  if (!json || d == nullptr) GTEST_SKIP() << "no ../shared/datasets/coco128 or ../shared/reference";
  const int epochs = StatsEpochs();
  // Epochs >= total - close_mosaic (10) have mosaic closed: a 10-epoch run
  // is closed throughout, so at most 10 epochs are measured here.
  const int closed = std::min(epochs, 10);
  LoaderStatistics st = MeasureLoader(*d, 10 - closed, closed, 10);
  CompareWithReference(st, *json, "mosaic_closed_1_epoch");
}

}  // namespace
}  // namespace kestrel::data
