// Deterministic synthetic detection datasets, for tests, smoke trainings and
// demos that must not download anything.
//
// Each image is a textured background (smooth value noise, a gradient, a few
// random lines, per-pixel grain) with 1-6 filled shapes, or none for the
// background images. Class k is shape k % 8 (circle, rectangle, triangle,
// ellipse, star, cross, ring, diamond); when classes > 8, class k also owns
// hue band k / 8 of ceil(classes / 8) bands, so shapes that repeat differ by
// colour. By default images are imgsz x imgsz with 1-6 objects of 8%-50% of
// imgsz across; objects are fully inside the image, may overlap, but every
// object keeps >= 70% of its pixels visible (so with large objects fewer than
// the drawn count may fit: after 30 rejected placements an object is dropped).
//
// Photo-like sets (issue 11: one or two large objects on large, non-square
// images of widely varying resolution): min_side/max_side > 0 draw each
// image's width and height independently from [min_side, max_side], and each
// object's width and height independently as a fraction in
// [min_object, max_object] of the image's width and height (the shape is
// stretched to that box). With min_side = max_side = 0 nothing changes: every
// existing option set gives the same bytes as before these keys existed.
//
// Layout written under out_dir (YOLO):
//   data.yaml                         path: ., train/val folders, nc, names
//   images/{train,val}/synth_NNNNN.jpg  BGR JPEG, quality 90, imgsz x imgsz
//                                       (or its drawn width x height)
//   labels/{train,val}/synth_NNNNN.txt  "cls cx cy w h\n", normalized to
//                                       [0, 1], 6 decimals; empty file for a
//                                       background image
// Boxes are tight around each shape's full (amodal) pixel mask; pixel i
// covers [i, i+1).
//
// Determinism: all randomness comes from SplitMix64 seeded by
// (seed, image index); no std distributions. Same options + same OpenCV /
// libjpeg build -> byte-identical files. Labels depend only on this code.
#pragma once

#include <cstdint>
#include <opencv2/core/mat.hpp>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/options.h"
#include "core/status.h"
#include "data/dataset.h"

namespace kestrel::data {

inline constexpr int kSynthShapeCount = 8;

struct SynthOptions {
  int images = 64;             // total images over both splits, 1..1'000'000
  int classes = 3;             // 1..64, see the file comment
  int imgsz = 160;             // square image side in pixels, 32..4096
  uint64_t seed = 0;           // any value; different seeds, different data
  double val_fraction = 0.25;  // llround(images * val_fraction) go to val, [0, 1]
  // llround(images * background_fraction) images have no objects, [0, 1].
  double background_fraction = 0.0625;
  // Objects per non-background image, drawn uniformly in [min, max], 1..32.
  int min_objects = 1;
  int max_objects = 6;
  // Object extent as a fraction of the image side (per axis with min_side > 0).
  double min_object = 0.08;  // [0.01, 1]
  double max_object = 0.50;  // [min_object, 1]
  // 0 = square imgsz images. Otherwise each image is W x H with W and H drawn
  // independently in [min_side, max_side] (32..4096; both 0 or both set).
  int min_side = 0;
  int max_side = 0;
  // Concurrent env.WriteFileAtomic calls, 1..64. Each write fsyncs, so
  // latency, not CPU, dominates; the files are identical for any value.
  int write_threads = 8;

  // images, classes, imgsz, val_fraction, background_fraction, min_objects,
  // max_objects, min_object, max_object, min_side, max_side with their ranges
  // (seed and write_threads are not keys: seed is unsigned, threads are not
  // part of the data).
  void Bind(OptionSet& s);
  // The bound ranges, write_threads, and the rules between fields
  // (min <= max; min_side and max_side both 0 or both >= 32);
  // kInvalidArgument naming the field.
  Status Validate() const;
};

// "circle", "rectangle", ..., then "circle_1", "rectangle_1", ... for
// classes beyond the eight shapes (suffix = hue band).
std::vector<std::string> SynthClassNames(int classes);

// One rendered image and its labels.
struct SynthSample {
  cv::Mat image;           // CV_8UC3, BGR, imgsz x imgsz or W x H (before JPEG)
  std::vector<Box> boxes;  // normalized cx, cy, w, h; empty for background
  Split split = Split::kTrain;
  std::string stem;  // "synth_00012"
};

// Renders image `index` (0-based, < options.images) exactly as
// WriteSynthDataset would, without touching the filesystem.
Result<SynthSample> RenderSynthSample(const SynthOptions& options, int index);

// Writes the dataset described in the file comment. `out_dir` must not exist
// or be an empty folder (kFailedPrecondition otherwise). Every file is written
// with env.WriteFileAtomic (from options.write_threads threads, so `env` must
// be thread-safe); data.yaml is written last, so a folder without it is an
// interrupted run. 64 images at 160 px: ~0.25 s of CPU plus the fsyncs.
Status WriteSynthDataset(const SynthOptions& options, const std::string& out_dir, Env& env = Env::Default());

}  // namespace kestrel::data
