// Model weights as safetensors: the torch adapter for core's codec
// (SafeTensor <-> at::Tensor) and LoadWeights / SaveWeights for YOLO models.
// File layout and metadata keys: docs/model.md.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/safetensors.h"
#include "core/status.h"
#include "model/yolo.h"

namespace kestrel::model {

// ---- adapter ----
// Dtypes: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL (little-endian).
// ToTorch: a CPU tensor owning a copy of the bytes; `name` labels errors.
Result<at::Tensor> ToTorch(const SafeTensor& tensor, const std::string& name = "");
// FromTorch: any device / layout; copied to CPU, contiguous.
Result<SafeTensor> FromTorch(const at::Tensor& tensor);

// ---- loading ----
enum class LoadMode {
  // Every model parameter and buffer must be in the file with the same shape,
  // and the file must hold nothing else.
  kStrict,
  // As strict, except that tensors of the classification branch
  // (model.22.cv3.*) may differ in shape — a different class count. Those
  // stages are skipped and freshly initialized (only the final class convs
  // when nothing else differs; the whole cv3 branch when its hidden width
  // c3 = max(ch0, min(nc, 100)) differs too).
  kFineTune,
};

struct LoadReport {
  int loaded = 0;   // tensors copied into the model
  int skipped = 0;  // tensors left freshly initialized (fine-tune)
  std::vector<std::string> skipped_names;
  std::map<std::string, std::string> metadata;  // the file's __metadata__
};

// Loads `path` into `model` (its device; F16/BF16/F64 values converted to the
// parameter dtype). All-or-nothing: on error the model is unchanged. Errors:
// InvalidArgument listing missing, unexpected and shape-mismatched names (at
// most 20, then "... and N more"); NotFound/IoError/Corruption from reading;
// FailedPrecondition for a fused model. `report` may be null.
Status LoadWeights(YoloImpl& model, const std::string& path, LoadMode mode, LoadReport* report = nullptr);
// Same from an already parsed file; `origin` names it in errors.
Status LoadWeights(YoloImpl& model, const SafeTensorFile& file, const std::string& origin, LoadMode mode,
                   LoadReport* report = nullptr);

// ---- saving ----
struct SaveOptions {
  std::vector<std::string> names;                     // class names for metadata; empty or exactly nc entries
  std::map<std::string, std::string> extra_metadata;  // must not reuse Kestrel's keys
  Env* env = nullptr;                                 // nullptr: Env::Default()
};

// Params + buffers (incl. num_batches_tracked as I64) in model dtype, with
// metadata format, kestrel_format_version, arch, scale, nc, names, reg_max,
// strides, and for a custom graph arch "custom" and the graph (GraphYaml). Pass the EMA model to save EMA
// weights.
Result<SafeTensorFile> WeightsToSafeTensors(YoloImpl& model, const SaveOptions& options = {});
// WeightsToSafeTensors, serialized and written crash-safely
// (Env::WriteFileAtomic). FailedPrecondition for a fused model.
Status SaveWeights(YoloImpl& model, const std::string& path, const SaveOptions& options = {});

}  // namespace kestrel::model
