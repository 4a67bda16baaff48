#include "app/imgsz.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "app/detector.h"
#include "core/env.h"
#include "core/parse.h"
#include "export/onnx_info.h"
#include "model/pt_checkpoint.h"

namespace kestrel::app {
namespace {

constexpr int kStride = 32;

// An ONNX file's nominal side: its fixed input, else the exporter's metadata
// "imgsz" ("[320, 320]" or "320"; the long side). 0 when neither says.
Result<int> OnnxImgsz(const std::string& path, std::string* source) {
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, Env::Default().ReadFile(path));
  KESTREL_ASSIGN_OR_RETURN(exporter::OnnxDetectorInfo info, exporter::ReadOnnxDetectorInfo(bytes, path));
  if (info.FixedSize()) {
    *source = "the ONNX file's input side";
    return std::max(info.height, info.width);
  }
  auto it = info.metadata.find("imgsz");
  if (it == info.metadata.end()) return 0;
  std::string text = it->second;
  std::replace_if(
      text.begin(), text.end(), [](char c) { return c == '[' || c == ']' || c == ','; }, ' ');
  int side = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    while (pos < text.size() && std::isspace(static_cast<unsigned char>(text[pos]))) ++pos;
    size_t end = pos;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end]))) ++end;
    if (end == pos) break;
    KESTREL_ASSIGN_OR_RETURN(int64_t v, ParseInt64(std::string_view(text).substr(pos, end - pos),
                                                   {path, 0, "imgsz"}, 1, 65536, "an image side"));
    side = std::max(side, static_cast<int>(v));
    pos = end;
  }
  *source = "the ONNX file's metadata";
  return side;
}

}  // namespace

Result<ImgszChoice> ChooseImgsz(const std::string& weights, int requested) {
  ImgszChoice c;
  if (requested > 0) {
    c.imgsz = requested;
    c.why = "(given)";
    return c;
  }
  std::string source;
  int recorded = 0;
  if (IsOnnxModelPath(weights)) {
    KESTREL_ASSIGN_OR_RETURN(recorded, OnnxImgsz(weights, &source));
  } else {
    KESTREL_ASSIGN_OR_RETURN(recorded, model::ReadRecordedImgsz(weights));
    source = model::FileLooksLikeZip(weights) ? "the weights' training args" : "the weights' metadata";
  }
  if (recorded <= 0) {
    c.why = "(the weights record no training size: the default " + std::to_string(kFallbackImgsz) +
            "; imgsz= overrides)";
    return c;
  }
  c.from_weights = true;
  c.imgsz = (recorded + kStride - 1) / kStride * kStride;
  c.why = "(from " + source +
          (c.imgsz != recorded ? ", " + std::to_string(recorded) + " rounded up to a multiple of 32" : "") +
          "; imgsz= overrides)";
  return c;
}

}  // namespace kestrel::app
