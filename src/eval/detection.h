// The two records every eval function speaks: a predicted detection and a
// ground-truth box. Pixel space (letterboxed input or original image) is
// stated by the function that produces or consumes them.
#pragma once

#include "eval/box.h"

namespace kestrel::eval {

// One predicted box. `box` xyxy pixels; `score` (confidence) in [0, 1];
// `class_id` in [0, nc); `runner_up` the best score of any other class at
// the same anchor (0 with one class, or where the producer does not know it:
// an ONNX graph with NMS inside, predictions read from a file): how close
// the box came to another label (what class-margin selection ranks by).
struct Detection {
  Box box;
  float score = 0;
  int class_id = 0;
  float runner_up = 0;
};

// One labelled object. `box` xyxy pixels of the original image; `class_id`
// in [0, nc).
struct GroundTruth {
  Box box;
  int class_id = 0;
};

}  // namespace kestrel::eval
