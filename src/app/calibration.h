// INT8 calibration images for `kestrel export int8=true` (docs/export.md
// "INT8"): images of a dataset version letterboxed exactly as validation
// letterboxes them (eval::ComputeValGeometry + eval::ValLetterboxToChw, the
// code `kestrel val` runs). Torch-free and OpenCV-free header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

struct CalibrationSet {
  std::vector<std::vector<float>> images;  // [3, h, w] each: RGB 0..1, letterboxed as validation does
  std::string dataset;                     // "NAME@vN"
  std::string version_id;
  std::string split;         // the split the images came from ("train", or "val" when train is empty)
  int64_t split_images = 0;  // images in that split
  int64_t candidates = 0;    // the first round(fraction * split_images) of them (at least 1)
};

// Up to `count` images of `data`'s (NAME[@VERSION] or a data.yaml, as `val
// data=` takes) train split (its val split when the train split has no
// images): the first round(fraction * size) images in manifest order (at
// least one; Ultralytics' `fraction`), of which `count` are taken evenly
// spaced, each letterboxed into h x w (the image's long side to max(h, w),
// centred, grey 114). Errors: the registry's for an unknown dataset, an
// undecodable image's (naming it); InvalidArgument naming `calib` (count
// < 1) or `fraction` (not in (0, 1]).
Result<CalibrationSet> LoadCalibrationImages(store::MetadataStore& meta, store::ArtifactStore& blobs,
                                             const std::string& data, int count, double fraction, int h,
                                             int w);

}  // namespace kestrel::app
