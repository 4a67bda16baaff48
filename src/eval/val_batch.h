// The validation image grids `kestrel val` (and a training run, for its
// first three val batches) writes beside its plots, as the common
// validator's val_batch0_labels.jpg / val_batch0_pred.jpg: the first
// images of the split (manifest order) in a 4-column grid, one with the
// ground truth (class colour and name), one with the predictions (score
// >= 0.25, "name 0.87"). docs/evaluation.md.
//
// Boxes: xyxy pixels of the original (EXIF-oriented) image, as EvalSplit;
// images come from DecodeImage, so they are the same pixels.
// Thread-safety: pure functions (the reader is called from this thread).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "eval/dataset_eval.h"
#include "eval/detection.h"

namespace kestrel::eval {

struct ValBatchOptions {
  size_t max_images = 16;   // images per grid (the first of the split), >= 1
  int columns = 4;          // tiles per row
  int tile_size = 320;      // pixels per tile side
  float min_score = 0.25f;  // predictions drawn in the predictions grid
};

struct ValBatchGrids {
  std::string labels_jpg;  // val_batch0_labels.jpg bytes
  std::string pred_jpg;    // val_batch0_pred.jpg bytes
  size_t images = 0;       // tiles in each grid
};

// Encoded bytes of image `im` (e.g. from the artifact store by im.image_sha).
using ImageBytesReader = std::function<Result<std::string>(const SplitImage& im)>;

// Renders both grids. `per_image` parallel to split.images. Fails (naming
// the image) when an image cannot be read or decoded; nothing is returned
// partially.
Result<ValBatchGrids> RenderValBatch(const EvalSplit& split,
                                     const std::vector<std::vector<Detection>>& per_image,
                                     const ImageBytesReader& read, const ValBatchOptions& opts = {});

// The same grids of any list of images (the trainer's val_batch{0,1,2}:
// the first images of each validation batch, in batch order): `images[i]`
// (path, size, labels) with its predictions `per_image[i]`; up to
// opts.max_images tiles. `read` is called with the element images[i] itself.
Result<ValBatchGrids> RenderValBatch(const std::vector<SplitImage>& images,
                                     const std::vector<std::string>& names,
                                     const std::vector<std::vector<Detection>>& per_image,
                                     const ImageBytesReader& read, const ValBatchOptions& opts = {});

}  // namespace kestrel::eval
