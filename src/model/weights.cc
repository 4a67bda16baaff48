#include "model/weights.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/utils.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json.h"
#include "model/pt_checkpoint.h"

namespace kestrel::model {

namespace {

struct DtypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16}, {"F64", at::kDouble},
    {"I64", at::kLong},  {"I32", at::kInt},   {"I16", at::kShort},     {"I8", at::kChar},
    {"U8", at::kByte},   {"BOOL", at::kBool},
};

std::string ShapeString(at::IntArrayRef shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

const std::set<std::string>& ReservedMetadataKeys() {
  static const std::set<std::string> keys = {
      "format", "kestrel_format_version", "arch", "scale", "nc", "names", "reg_max", "strides", "graph"};
  return keys;
}

bool IsFloatDtype(const std::string& d) { return d == "F32" || d == "F16" || d == "BF16" || d == "F64"; }

// "model.22.cv3.1.2.weight" -> "model.22.cv3.1.2." (the stage), else "".
std::string ClassStagePrefix(const std::string& name, int detect_index) {
  const std::string head = "model." + std::to_string(detect_index) + ".cv3.";
  if (name.rfind(head, 0) != 0) return "";
  size_t level_end = name.find('.', head.size());
  if (level_end == std::string::npos) return "";
  size_t stage_end = name.find('.', level_end + 1);
  if (stage_end == std::string::npos) return "";
  return name.substr(0, stage_end + 1);
}

}  // namespace

Result<at::Tensor> ToTorch(const SafeTensor& tensor, const std::string& name) {
  for (const auto& d : kDtypes) {
    if (tensor.dtype != d.name) continue;
    try {
      at::Tensor out = at::empty(tensor.shape, at::TensorOptions().dtype(d.type));
      const size_t nbytes = static_cast<size_t>(out.numel()) * out.element_size();
      if (nbytes != tensor.data.size()) {
        return Status::Corruption("tensor '" + name + "' holds " + std::to_string(tensor.data.size()) +
                                  " bytes, shape " + ShapeString(tensor.shape) + " " + tensor.dtype +
                                  " needs " + std::to_string(nbytes));
      }
      if (nbytes) std::memcpy(out.data_ptr(), tensor.data.data(), nbytes);
      return out;
    } catch (const c10::Error& e) {
      return Status::Internal("tensor '" + name + "': " + e.what_without_backtrace());
    }
  }
  return Status::InvalidArgument("tensor '" + name + "' has unsupported dtype " + tensor.dtype);
}

Result<SafeTensor> FromTorch(const at::Tensor& tensor) {
  for (const auto& d : kDtypes) {
    if (tensor.scalar_type() != d.type) continue;
    try {
      at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
      SafeTensor out;
      out.dtype = d.name;
      out.shape.assign(cpu.sizes().begin(), cpu.sizes().end());
      out.data.assign(static_cast<const char*>(cpu.data_ptr()),
                      static_cast<size_t>(cpu.numel()) * cpu.element_size());
      return out;
    } catch (const c10::Error& e) {
      return Status::Internal(std::string("copying a tensor to CPU: ") + e.what_without_backtrace());
    }
  }
  return Status::InvalidArgument(std::string("unsupported tensor dtype ") +
                                 c10::toString(tensor.scalar_type()));
}

Status LoadWeights(YoloImpl& model, const std::string& path, LoadMode mode, LoadReport* report) {
  // safetensors or an Ultralytics .pt, by magic bytes (pt_checkpoint.h).
  KESTREL_ASSIGN_OR_RETURN(SafeTensorFile file, ReadWeightsFile(path));
  return LoadWeights(model, file, path, mode, report);
}

Status LoadWeights(YoloImpl& model, const SafeTensorFile& file, const std::string& origin, LoadMode mode,
                   LoadReport* report) {
  if (model.IsFused()) {
    return Status::FailedPrecondition("cannot load weights into a fused model; load, then Fuse()", {origin});
  }
  const int detect_index = static_cast<int>(BuildLayerPlan(model.Spec()).size()) - 1;
  // Model state: parameters then buffers, keyed by the state-dict name.
  std::map<std::string, at::Tensor> state;
  for (const auto& item : model.named_parameters()) state[item.key()] = item.value();
  for (const auto& item : model.named_buffers()) state[item.key()] = item.value();

  std::vector<std::string> missing, unexpected, mismatched, bad_dtype;
  std::set<std::string> skip_stages;  // fine-tune: class-branch stages to leave initialized
  for (const auto& [name, dst] : state) {
    auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      missing.push_back(name + " " + ShapeString(dst.sizes()));
      continue;
    }
    const SafeTensor& src = it->second;
    if (!dst.sizes().equals(src.shape)) {
      const std::string stage = ClassStagePrefix(name, detect_index);
      if (mode == LoadMode::kFineTune && !stage.empty()) {
        skip_stages.insert(stage);
      } else {
        mismatched.push_back(name + ": file " + ShapeString(src.shape) + " vs model " +
                             ShapeString(dst.sizes()));
      }
      continue;
    }
    const bool want_float = at::isFloatingType(dst.scalar_type());
    if (want_float ? !IsFloatDtype(src.dtype) : src.dtype != "I64") {
      bad_dtype.push_back(name + ": file " + src.dtype + ", model " + c10::toString(dst.scalar_type()));
    }
  }
  for (const auto& [name, src] : file.tensors) {
    if (!state.count(name)) unexpected.push_back(name + " " + ShapeString(src.shape));
  }
  if (!missing.empty() || !unexpected.empty() || !mismatched.empty() || !bad_dtype.empty()) {
    std::string msg = "weights do not match " + model.Spec().Name() +
                      " (nc=" + std::to_string(model.NumClasses()) + "): " + std::to_string(missing.size()) +
                      " missing, " + std::to_string(unexpected.size()) + " unexpected, " +
                      std::to_string(mismatched.size()) + " shape-mismatched, " +
                      std::to_string(bad_dtype.size()) + " wrong dtype";
    auto cls = file.tensors.find("model." + std::to_string(detect_index) + ".cv3.0.2.bias");
    if (mode == LoadMode::kStrict && cls != file.tensors.end() && cls->second.shape.size() == 1 &&
        cls->second.shape[0] != model.NumClasses()) {
      msg += " (the file has nc=" + std::to_string(cls->second.shape[0]) +
             "; fine-tune mode loads all but the class branch)";
    }
    constexpr size_t kMaxListed = 20;
    size_t listed = 0, total = missing.size() + unexpected.size() + mismatched.size() + bad_dtype.size();
    auto list = [&](const char* what, const std::vector<std::string>& names) {
      for (const auto& n : names) {
        if (listed == kMaxListed) return;
        msg += std::string("\n  ") + what + ": " + n;
        ++listed;
      }
    };
    list("missing", missing);
    list("unexpected", unexpected);
    list("shape mismatch", mismatched);
    list("dtype", bad_dtype);
    if (total > listed) msg += "\n  ... and " + std::to_string(total - listed) + " more";
    return Status::InvalidArgument(msg, {origin});
  }

  // A hidden-width change skips the whole class branch so no stage mixes
  // pretrained and fresh weights.
  bool whole_branch = false;
  for (const auto& stage : skip_stages) {
    if (stage.size() < 2 || stage[stage.size() - 2] != '2') whole_branch = true;
  }
  const std::string cv3 = "model." + std::to_string(detect_index) + ".cv3.";
  auto skipped = [&](const std::string& name) {
    if (whole_branch) return name.rfind(cv3, 0) == 0;
    const std::string stage = ClassStagePrefix(name, detect_index);
    return !stage.empty() && skip_stages.count(stage) > 0;
  };

  // Convert everything before touching the model (all-or-nothing).
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (model tensor, file values)
  LoadReport local;
  for (const auto& [name, dst] : state) {
    if (skipped(name)) {
      local.skipped_names.push_back(name);
      continue;
    }
    auto t = ToTorch(file.tensors.at(name), name);
    if (!t.IsOk()) return t.GetStatus().WithLocation({origin, 0, name});
    copies.emplace_back(dst, std::move(t).Value());
  }
  try {
    torch::NoGradGuard no_grad;
    for (auto& [dst, src] : copies) dst.copy_(src);
    if (!skip_stages.empty()) model.ResetClassifier(whole_branch);
  } catch (const c10::Error& e) {
    return Status::Internal(std::string("copying weights into the model: ") + e.what_without_backtrace(),
                            {origin});
  }
  local.loaded = static_cast<int>(copies.size());
  local.skipped = static_cast<int>(local.skipped_names.size());
  local.metadata = file.metadata;
  if (report) *report = std::move(local);
  return Status();
}

Result<SafeTensorFile> WeightsToSafeTensors(YoloImpl& model, const SaveOptions& options) {
  if (model.IsFused()) {
    return Status::FailedPrecondition("a fused model cannot be saved (its state-dict names differ)");
  }
  const ModelSpec& spec = model.Spec();
  if (!options.names.empty() && static_cast<int>(options.names.size()) != spec.nc) {
    return Status::InvalidArgument(
        std::to_string(options.names.size()) + " class names for a model with nc=" + std::to_string(spec.nc),
        {"", 0, "names"});
  }
  SafeTensorFile file;
  for (const auto& [key, value] : options.extra_metadata) {
    if (ReservedMetadataKeys().count(key)) {
      return Status::InvalidArgument("metadata key '" + key + "' is reserved", {"", 0, key});
    }
    file.metadata[key] = value;
  }
  auto add = [&](const std::string& name, const at::Tensor& t) -> Status {
    auto st = FromTorch(t);
    if (!st.IsOk()) return st.GetStatus().WithLocation({"", 0, name});
    file.tensors[name] = std::move(st).Value();
    return Status();
  };
  for (const auto& item : model.named_parameters()) KESTREL_RETURN_IF_ERROR(add(item.key(), item.value()));
  for (const auto& item : model.named_buffers()) KESTREL_RETURN_IF_ERROR(add(item.key(), item.value()));
  file.metadata["format"] = "kestrel.yolo.weights";
  file.metadata["kestrel_format_version"] = std::to_string(kWeightsFormatVersion);
  file.metadata["arch"] = spec.graph ? kCustomArch : FamilyName(spec.family);
  if (spec.graph) file.metadata["graph"] = GraphYaml(spec).dump();
  file.metadata["scale"] = spec.scale.name;
  file.metadata["nc"] = std::to_string(spec.nc);
  file.metadata["names"] = DumpJson(nlohmann::json(options.names));
  file.metadata["reg_max"] = std::to_string(kRegMax);
  file.metadata["strides"] = DumpJson(nlohmann::json(BuildLayerPlan(spec).back().detect_strides));
  return file;
}

Status SaveWeights(YoloImpl& model, const std::string& path, const SaveOptions& options) {
  auto file = WeightsToSafeTensors(model, options);
  if (!file.IsOk()) return file.GetStatus().WithLocation({path});
  Env& env = options.env ? *options.env : Env::Default();
  return env.WriteFileAtomic(path, SerializeSafeTensors(*file));
}

}  // namespace kestrel::model
