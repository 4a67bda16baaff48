#include "app/export_pt.h"

#include <filesystem>
#include <sstream>

#include "app/imgsz.h"
#include "model/pt_checkpoint.h"
#include "model/pt_writer.h"
#include "model/spec.h"

namespace kestrel::app {

namespace {

Status PtKeyError(const std::string& msg, const std::string& key) {
  return Status::InvalidArgument(msg, {"", 0, key});
}

std::string DefaultPtOutput(Env& env, const std::string& model_arg) {
  if (env.Stat(model_arg).exists) return std::filesystem::path(model_arg).replace_extension(".pt").string();
  std::string stem = model_arg;
  for (char& c : stem) {
    if (c == '@' || c == '/') c = '_';
  }
  return stem + ".pt";
}

}  // namespace

Result<ExportResult> ExportPtModel(Env& env, const ExportRequest& request,
                                   const ExportWeightsResolver& resolve) {
  // What only an ONNX graph has.
  if (request.dynamic)
    return PtKeyError("dynamic=true is an ONNX option; format=pt writes the weights", "dynamic");
  if (request.half)
    return PtKeyError("half=true is an ONNX option; format=pt keeps the weights' dtype", "half");
  if (request.int8) return PtKeyError("int8=true is an ONNX option", "int8");
  if (request.nms) return PtKeyError("nms=true is an ONNX option", "nms");
  if (!request.data.empty())
    return PtKeyError("data= is the ONNX export's mAP check; format=pt is checked by reading it back",
                      "data");
  ExportResult res;
  res.format = "pt";
  res.weights = request.model;
  if (resolve) KESTREL_RETURN_IF_ERROR(resolve(&res.weights));
  KESTREL_ASSIGN_OR_RETURN(model::WeightsInfo info, model::ReadWeightsInfo(res.weights));
  KESTREL_ASSIGN_OR_RETURN(ImgszChoice imgsz, ChooseImgsz(res.weights, request.imgsz_h));
  res.imgsz_h = res.imgsz_w = request.imgsz_h > 0 ? std::max(request.imgsz_h, request.imgsz_w) : imgsz.imgsz;
  res.imgsz_why = imgsz.why;
  KESTREL_ASSIGN_OR_RETURN(SafeTensorFile state, model::ReadWeightsFile(res.weights));
  // Tensors a .pt's reader adds nothing to; Kestrel's safetensors hold the state dict only.
  res.path = request.output.empty() ? DefaultPtOutput(env, request.model) : request.output;
  std::error_code ec;
  if (std::filesystem::equivalent(res.path, res.weights, ec)) {
    return PtKeyError("output " + res.path + " is the weights file itself; give another output=", "output");
  }
  res.arch = info.spec.Name();
  res.nc = info.spec.nc;
  if (static_cast<int>(info.names.size()) == info.spec.nc) {
    res.names = info.names;
    res.names_source = "weights";
  } else {
    for (int i = 0; i < info.spec.nc; ++i) res.names.push_back("class" + std::to_string(i));
    res.names_source = "default";
  }

  model::PtWriteOptions o;
  o.spec = info.spec;
  o.names = res.names;
  o.epoch = -1;  // final weights, as the reference's exported and stripped files say
  o.train_args = {{"model", std::filesystem::path(res.weights).filename().string()}, {"imgsz", res.imgsz_h}};
  o.date = model::PtDate(env.UnixMillis());
  o.archive_name = std::filesystem::path(res.path).stem().string();
  if (o.archive_name.empty()) o.archive_name = "model";
  KESTREL_ASSIGN_OR_RETURN(std::string bytes, model::SerializePtCheckpoint(state, o));

  // Read back with Kestrel's own reader before anything is written.
  KESTREL_ASSIGN_OR_RETURN(model::PtCheckpoint back, model::ParsePtCheckpoint(bytes, res.path));
  std::string mismatch;
  if (back.weights.tensors.size() != state.tensors.size()) mismatch = "tensor count";
  for (const auto& [name, t] : state.tensors) {
    auto it = back.weights.tensors.find(name);
    if (mismatch.empty() && (it == back.weights.tensors.end() || it->second.shape != t.shape ||
                             it->second.dtype != t.dtype || it->second.data != t.data)) {
      mismatch = name;
    }
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    res.parameters += n;
  }
  if (!mismatch.empty() || back.imgsz != res.imgsz_h || back.names != res.names) {
    return Status::Internal("the written .pt does not read back as the weights (" +
                                (mismatch.empty() ? std::string("imgsz or names") : mismatch) + ")",
                            {res.path});
  }
  res.verified = true;
  KESTREL_RETURN_IF_ERROR(env.WriteFileAtomic(res.path, bytes));
  res.bytes = static_cast<int64_t>(bytes.size());
  return res;
}

std::string ExportPtText(const ExportResult& r) {
  std::ostringstream s;
  s << "exported " << r.arch << " (" << r.nc << " classes) to " << r.path << " (" << r.bytes
    << " bytes, the reference framework's checkpoint layout " << model::kPtLayoutVersion << ")\n";
  s << "imgsz=" << r.imgsz_h << " recorded as train_args.imgsz " << r.imgsz_why << "\n";
  s << "names (" << r.names_source << "):";
  for (size_t i = 0; i < r.names.size() && i < 10; ++i) s << " " << r.names[i];
  if (r.names.size() > 10) s << " ... (" << r.names.size() << ")";
  s << "\nverified: read back by Kestrel's .pt reader, " << r.parameters << " tensor elements bit-equal to "
    << r.weights << "\n";
  return s.str();
}

}  // namespace kestrel::app
