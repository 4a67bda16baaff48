// The image size predict, val model=, compare and export run at when the
// command does not give one: the size the weights were trained at, as the
// reference framework takes it from a checkpoint (issue 28). Torch-free.
#pragma once

#include <string>

#include "core/status.h"

namespace kestrel::app {

// The default network input side when the weights record none.
inline constexpr int kFallbackImgsz = 640;

struct ImgszChoice {
  int imgsz = kFallbackImgsz;  // pixels, the square input side (or an export's long side)
  // Why, as printed after "imgsz=<n> ": "(from the weights' training args;
  // imgsz= overrides)", "(given)", "(the weights record none: the default
  // 640; imgsz= overrides)", ...
  std::string why;
  bool from_weights = false;  // true: read from the weights (or an ONNX file's input)
  std::string Line() const { return "imgsz=" + std::to_string(imgsz) + " " + why; }
};

// `requested` > 0 (an explicit imgsz=) wins: returned as given, unchecked
// (the use case's validation names a bad value). `requested` == 0 means
// "not given": the size recorded in `weights` —
//   .pt           train_args["imgsz"] (the long side of an [h, w] pair)
//   .safetensors  metadata "imgsz" (Kestrel's trainer writes it)
//   .onnx         the input side when fixed, else metadata "imgsz"
// — rounded up to a multiple of 32 when it is not one (as the reference's
// check_imgsz does; `why` says so), else kFallbackImgsz. Errors: the weights
// file's (NotFound, Corruption, InvalidArgument), located at `weights`.
Result<ImgszChoice> ChooseImgsz(const std::string& weights, int requested);

}  // namespace kestrel::app
