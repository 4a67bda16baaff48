// Post-processing of YOLOv8-style detector output: decode, NMS, and mapping
// boxes from the letterboxed network input back to the original image.
//
// Thread-safety: all functions are pure (no shared state); call them from any
// number of threads.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "eval/box.h"
#include "eval/detection.h"

namespace kestrel::eval {

// How an original image of (width, height) pixels was placed into the network
// input: input = original * scale + pad. Pads are the left/top borders.
struct Letterbox {
  double scale = 1.0;
  double pad_x = 0.0;
  double pad_y = 0.0;
};

// The geometry of the common YOLO letterbox (no auto-stride padding): scale =
// min(in_w / w, in_h / h) (upscaling allowed unless `scale_up` is false),
// resized size rounded to integers, pads = round(half the remaining border -
// 0.1) on the left/top. REQUIRES: all sizes > 0.
Letterbox ComputeLetterbox(int orig_width, int orig_height, int input_width, int input_height,
                           bool scale_up = true);

// Maps a box from letterboxed-input pixels to original-image pixels and clips
// it to [0, orig_width] x [0, orig_height].
Box ScaleToOriginal(const Box& b, const Letterbox& lb, int orig_width, int orig_height);
// In place, for every detection.
void ScaleToOriginal(std::vector<Detection>& dets, const Letterbox& lb, int orig_width, int orig_height);

struct NmsOptions {
  float conf = 0.25f;        // keep class scores strictly greater than this
  float iou = 0.7f;          // suppress a box when IoU with a kept one is > this
  int max_det = 300;         // keep at most this many boxes per image
  int max_nms = 30000;       // at most this many candidates (highest scores) enter NMS
  bool agnostic = false;     // true: one class for suppression; false: per class
  bool multi_label = false;  // true: one candidate per (anchor, class) with score > conf
  // Validated by Validate(): conf in [0, 1), iou in [0, 1], max_det >= 1, max_nms >= 1.
  Status Validate() const;
};

// Decodes the raw output of one image: `raw` is row-major float [4 + nc,
// num_anchors]: rows 0..3 are cx, cy, w, h in letterboxed input pixels, rows
// 4.. are per-class scores (already sigmoid). Returns candidates (boxes xyxy
// in letterboxed input pixels) with score > opts.conf: the best class per
// anchor (first class wins ties), or every class above conf when
// opts.multi_label. Candidates are in anchor order, then class order (this
// order breaks score ties in Nms). REQUIRES: raw holds (4 + nc) * A floats.
std::vector<Detection> DecodeYoloOutput(const float* raw, int num_classes, int num_anchors,
                                        const NmsOptions& opts);

// Greedy NMS over candidates. Sorts by score descending (stable: ties keep
// input order), caps at max_nms, and keeps a box unless a kept box of the
// same class (any class when agnostic) has IoU > opts.iou with it. Result is
// in descending score order, at most max_det boxes. `conf` is not applied
// here (DecodeYoloOutput applies it).
//
// Class-aware mode gives exactly the kept set of the class-offset trick
// (shift every box by class_id * 7680 px so boxes of different classes never
// overlap, then one agnostic NMS) for boxes smaller than 7680 px, without the
// float rounding that the shift adds to coordinates.
std::vector<Detection> Nms(std::vector<Detection> candidates, const NmsOptions& opts);

// Decode + NMS in one call (what a validator runs per image). Boxes are in
// letterboxed input pixels; use ScaleToOriginal afterwards.
std::vector<Detection> PostprocessYolo(const float* raw, int num_classes, int num_anchors,
                                       const NmsOptions& opts);

}  // namespace kestrel::eval
