#include "export/onnx_info.h"

#include <onnx/onnx_pb.h>

#include <cctype>
#include <cstdlib>
#include <utility>

namespace kestrel::exporter {
namespace {

Status Bad(const std::string& msg, const std::string& path) {
  return Status::InvalidArgument(msg, {path, 0, "model"});
}

OnnxTensorInfo TensorInfo(const onnx::ValueInfoProto& v) {
  OnnxTensorInfo t;
  t.name = v.name();
  if (v.type().has_tensor_type() && v.type().tensor_type().has_shape()) {
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      t.shape.push_back(d.has_dim_value() ? d.dim_value() : -1);
    }
  }
  return t;
}

bool IsFloatTensor(const onnx::ValueInfoProto& v) {
  return v.type().has_tensor_type() && v.type().tensor_type().elem_type() == onnx::TensorProto::FLOAT;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A small cursor over the names literal.
struct Cursor {
  const std::string& s;
  size_t i = 0;
  void SkipSpace() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
  }
  bool Eat(char c) {
    SkipSpace();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
};

// The rest of an nms=true file's layout (docs/export.md "NMS in the graph"):
// output0 float32 [batch, max_det, 6] with the input's batch; the class
// count is the `names` metadata's (the output does not carry it).
Result<OnnxDetectorInfo> ReadNmsLayout(OnnxDetectorInfo info, const std::vector<int64_t>& in,
                                       const std::vector<int64_t>& out, bool float_output,
                                       const std::string& path) {
  // The NonMaxSuppression tail's output may carry no declared shape: its
  // rows are then the file's max_det metadata.
  std::vector<int64_t> shape = out;
  if (shape.empty() || (shape.size() == 3 && shape[1] == -1)) {
    auto md = info.metadata.find("max_det");
    const int64_t rows = md != info.metadata.end() ? std::strtoll(md->second.c_str(), nullptr, 10) : 0;
    if (rows >= 1) shape = {in[0], rows, 6};
  }
  if (!float_output || shape.size() != 3 || (shape[0] != in[0] && shape[0] != -1) || shape[1] < 1 ||
      shape[2] != 6) {
    return Bad("output '" + info.output.name +
                   "' of an nms=true file must be float32 [batch, max_det, 6] with the input's batch, is " +
                   ShapeText(out),
               path);
  }
  auto it = info.metadata.find("names");
  if (it == info.metadata.end()) {
    return Bad("an nms=true file needs its names metadata (the class count is not in its output)", path);
  }
  Result<std::vector<std::string>> names = ParseNamesMetadata(it->second);
  if (!names.IsOk()) return Bad(names.GetStatus().Message(), path);
  if (names->empty()) return Bad("metadata names is empty", path);
  info.nms = true;
  info.max_det = shape[1];
  info.batch = static_cast<int>(in[0]);
  info.height = static_cast<int>(in[2]);
  info.width = static_cast<int>(in[3]);
  info.nc = static_cast<int>(names->size());
  info.names = std::move(names).Value();
  auto arch = info.metadata.find("arch");
  info.arch = arch != info.metadata.end() ? arch->second : "onnx";
  return info;
}

}  // namespace

Result<std::vector<std::string>> ParseNamesMetadata(const std::string& text) {
  const Status bad =
      Status::InvalidArgument("metadata names is not a {0: 'name', ...} literal: " + text, {"", 0, "names"});
  Cursor c{text};
  if (!c.Eat('{')) return bad;
  std::vector<std::string> names;
  if (c.Eat('}')) return names;
  do {
    c.SkipSpace();
    size_t start = c.i;
    while (c.i < text.size() && std::isdigit(static_cast<unsigned char>(text[c.i])) != 0) ++c.i;
    if (c.i == start || c.i - start > 9 || std::stoi(text.substr(start, c.i - start)) != int(names.size()))
      return bad;
    if (!c.Eat(':')) return bad;
    c.SkipSpace();
    if (c.i >= text.size() || (text[c.i] != '\'' && text[c.i] != '"')) return bad;
    const char quote = text[c.i++];
    std::string name;
    for (;; ++c.i) {
      if (c.i >= text.size()) return bad;
      if (text[c.i] == quote) break;
      if (text[c.i] == '\\' && ++c.i >= text.size()) return bad;
      name += text[c.i];
    }
    ++c.i;
    names.push_back(std::move(name));
  } while (c.Eat(','));
  if (!c.Eat('}')) return bad;
  c.SkipSpace();
  if (c.i != text.size()) return bad;
  return names;
}

Result<OnnxDetectorInfo> ReadOnnxDetectorInfo(const std::string& bytes, const std::string& path) {
  onnx::ModelProto proto;
  if (bytes.empty() || !proto.ParseFromString(bytes) || !proto.has_graph()) {
    return Bad("not an ONNX model (the protobuf does not parse)", path);
  }
  const onnx::GraphProto& g = proto.graph();
  // nms=true files: output0 holds final detections [batch, max_det, 6].
  bool nms = false;
  for (const auto& e : proto.metadata_props()) nms = nms || (e.key() == "nms" && e.value() == "true");
  for (const auto& n : g.node()) nms = nms || n.op_type() == "NonMaxSuppression";
  // Initializers may be listed as graph inputs by older exporters.
  std::vector<const onnx::ValueInfoProto*> inputs;
  for (const auto& in : g.input()) {
    bool is_init = false;
    for (const auto& init : g.initializer()) is_init = is_init || init.name() == in.name();
    if (!is_init) inputs.push_back(&in);
  }
  if (inputs.size() != 1 || g.output_size() != 1) {
    return Bad("expected one input and one output (a kestrel export detection graph), found " +
                   std::to_string(inputs.size()) + " and " + std::to_string(g.output_size()),
               path);
  }
  OnnxDetectorInfo info;
  info.input = TensorInfo(*inputs[0]);
  info.output = TensorInfo(g.output(0));
  info.producer = proto.producer_name();
  const auto& in = info.input.shape;
  const auto& out = info.output.shape;
  // -1: dynamic; 0 is no size at all.
  auto sized = [](int64_t d) { return d == -1 || d >= 1; };
  if (!IsFloatTensor(*inputs[0]) || in.size() != 4 || in[1] != 3 || !sized(in[0]) || !sized(in[2]) ||
      !sized(in[3]) || (in[2] == -1) != (in[3] == -1)) {
    return Bad("input '" + info.input.name +
                   "' must be float32 [batch, 3, height, width] (height and width " +
                   "both fixed or both dynamic), is " + ShapeText(in),
               path);
  }
  for (const auto& e : proto.metadata_props()) info.metadata[e.key()] = e.value();
  if (nms) {
    // Copies: `in` and `out` refer into `info`, which is moved.
    const std::vector<int64_t> in_shape = in, out_shape = out;
    return ReadNmsLayout(std::move(info), in_shape, out_shape, IsFloatTensor(g.output(0)), path);
  }
  if (!IsFloatTensor(g.output(0)) || out.size() != 3 || out[0] != in[0] || out[1] < 5 || !sized(out[2]) ||
      (out[2] == -1) != (in[2] == -1)) {
    return Bad("output '" + info.output.name +
                   "' must be float32 [batch, 4 + nc, anchors] (no NMS inside) with the input's batch, is " +
                   ShapeText(out),
               path);
  }
  info.batch = static_cast<int>(in[0]);
  info.height = static_cast<int>(in[2]);
  info.width = static_cast<int>(in[3]);
  info.nc = static_cast<int>(out[1] - 4);
  info.anchors = out[2];  // -1 exactly when height and width are dynamic
  if (auto it = info.metadata.find("names"); it != info.metadata.end()) {
    Result<std::vector<std::string>> names = ParseNamesMetadata(it->second);
    if (!names.IsOk()) return Bad(names.GetStatus().Message(), path);
    if (names->size() != static_cast<size_t>(info.nc)) {
      return Bad("metadata names has " + std::to_string(names->size()) + " entries, the output has " +
                     std::to_string(info.nc) + " classes",
                 path);
    }
    info.names = std::move(names).Value();
  } else {
    for (int c = 0; c < info.nc; ++c) info.names.push_back("class" + std::to_string(c));
  }
  auto arch = info.metadata.find("arch");
  info.arch = arch != info.metadata.end() ? arch->second : "onnx";
  return info;
}

}  // namespace kestrel::exporter
