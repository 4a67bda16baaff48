// How a model sees a split when it is validated: which images form each
// batch, the input shape of each batch, and where one image lands in it --
// the reference validator's rules (rect batches with half a stride of
// border), so the same weights give the same mAP. `kestrel val model=`,
// `compare` and the per-epoch validation all use this.
// docs/evaluation.md "Validation batches".
//
// PlanValBatches and ComputeValGeometry are pure arithmetic; the letterbox
// uses OpenCV inside the .cc only. Sizes are oriented pixels {width, height}.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "eval/box.h"
#include "eval/postprocess.h"
#include "eval/prediction_io.h"

namespace kestrel::eval {

struct ValShapeOptions {
  int imgsz = 640;  // every image is resized so its long side is imgsz; multiple of stride
  int batch = 16;   // images per batch, >= 1
  // true: images sorted by aspect ratio r = height / width and cut into
  // consecutive batches; a batch whose largest r < 1 gets shape (h, w)
  // proportional to (r_max, 1), one whose smallest r > 1 gets (1, 1 / r_min),
  // any other (1, 1). false: split order, every batch imgsz x imgsz.
  bool rect = true;
  // rect only: each side is ceil(rel * imgsz / stride + pad) * stride pixels
  // (0.5 = half a stride of border, the reference validator's value); >= 0.
  double pad = 0.5;
  int stride = 32;  // model stride, >= 1
  // InvalidArgument naming the field (imgsz not a positive multiple of
  // stride, batch < 1, pad < 0 or not finite, stride < 1).
  Status Validate() const;
};

struct ValBatchShape {
  std::vector<size_t> images;  // indices into PlanValBatches' `sizes`, in batch order
  int height = 0;              // network input pixels, multiple of the stride
  int width = 0;
};

// The batches of a split whose images have `sizes` (oriented pixels, > 0;
// a size <= 0 counts as square). Every index appears exactly once; all
// batches but the last have opts.batch images. Ties in r keep the order
// numpy's default argsort gives (the reference sorts with it), so batch
// membership matches the reference on splits with repeated aspect ratios.
// REQUIRES: opts.Validate() is OK.
std::vector<ValBatchShape> PlanValBatches(const std::vector<ImageSize>& sizes, const ValShapeOptions& opts);

// Where one image of width x height lands in an input of input_width x
// input_height (the reference validator's two steps):
//   1. resize so the long side is imgsz: r = imgsz / max(w, h); when r != 1
//      the size is (min(ceil(w r), imgsz), min(ceil(h r), imgsz)), bilinear;
//   2. letterbox into the input: shrink further only if it does not fit
//      (rounded sizes), centred with pads left = round(dw - 0.1), top =
//      round(dh - 0.1) where dw, dh are half the leftover (round half to
//      even), grey 114 around.
struct ValGeometry {
  int resized_width = 0;  // after step 1
  int resized_height = 0;
  int placed_width = 0;  // after step 2 (== resized unless it had to shrink)
  int placed_height = 0;
  int input_width = 0;
  int input_height = 0;
  // input = original * scale + pad with pad = (left, top) and scale =
  // resized_height / height: the reference maps boxes back with the height
  // ratio of step 1 on both axes (they differ by the rounding of step 1).
  Letterbox letterbox;
};
// REQUIRES: all sizes > 0.
ValGeometry ComputeValGeometry(int width, int height, int imgsz, int input_width, int input_height);

// `predict`'s placement (one step): the image scaled by ComputeLetterbox(w,
// h, size, size) (upscaling allowed, resized size rounded half to even) and
// centred in a size x size input. Letterboxed by ValLetterboxToChw like a
// validation image, so both paths share one letterbox. REQUIRES: sizes > 0.
ValGeometry ComputeSquareGeometry(int width, int height, int size);

// Writes the letterboxed image into `chw`: float [3, input_height,
// input_width], channel order as given, values pixel / 255. `pixels` is an
// 8-bit 3-channel interleaved image of g's original size (rows x cols,
// `row_bytes` per row). InvalidArgument when the size does not match g.
Status ValLetterboxToChw(const uint8_t* pixels, int rows, int cols, size_t row_bytes, const ValGeometry& g,
                         float* chw);

// A ground-truth box as the reference validator scores it: the label goes
// to the letterboxed input (normalized by the resized size) and comes back
// through Letterbox (the height ratio), then is clipped to the image. Equal
// to `b` up to float rounding when the resize kept the aspect ratio exactly.
Box ValLabelRoundTrip(const Box& b, const ValGeometry& g, int width, int height);

}  // namespace kestrel::eval
