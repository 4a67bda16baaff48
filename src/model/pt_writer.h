// Writing weights as a reference-framework (Ultralytics 8.3) checkpoint, the
// `.pt` that YOLO("best.pt") and torch.load read: torch.save's zip archive
// (`<name>/data.pkl`, `<name>/data/<k>` storages, `<name>/byteorder`,
// `<name>/version`) around a protocol-2 pickle of the checkpoint dict
// (date, version, epoch, best_fitness, model = the DetectionModel's module
// tree with its yaml, names, stride and args, ema/updates/optimizer None,
// train_args, train_metrics). The pickle is emitted as data by Kestrel's own
// writer: nothing is imported or executed. Layout and what was verified
// against the reference: docs/formats.md ("Writing .pt"), docs/model.md.
//
// Torch-free (kestrel_model_spec), like the reader in pt_checkpoint.h, which
// reads every written file back.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/safetensors.h"
#include "core/status.h"
#include "model/spec.h"

namespace kestrel::model {

// The reference version whose module layout and checkpoint keys are written
// (its "version" key).
inline constexpr const char* kPtLayoutVersion = "8.3.112";

struct PtWriteOptions {
  ModelSpec spec;                  // family, scale and nc of the weights
  std::vector<std::string> names;  // class names, exactly spec.nc of them; empty: "class0", "class1", ...
  // The reference's 0-based epoch of these weights; -1 for final weights (its
  // stripped best.pt/last.pt and exported files say -1).
  int epoch = -1;
  std::optional<double> best_fitness;  // None when unset
  // The run's arguments under the reference's keys ({"imgsz": 320, "epochs":
  // 30, ...}): an object whose values are null, bool, number, string or
  // arrays of those. "task" ("detect") and "mode" ("train") are added first
  // when absent. The reference reads train_args.imgsz as the weights' size.
  nlohmann::json train_args = nlohmann::json::object();
  nlohmann::json train_metrics;       // an object of numbers ("metrics/mAP50-95(B)": ...), or null (omitted)
  std::string date;                   // ISO 8601 ("2026-12-04T02:44:53.184774"); the caller's clock
  std::string archive_name = "best";  // the zip's top folder; torch.save uses the file's stem
};

// The checkpoint's bytes. `weights` is the model's state dict under
// nn.Module names ("model.0.conv.weight", ...; what WeightsToSafeTensors and
// ReadWeightsFile give): F32/F16/BF16/F64 and I64 tensors, each written
// unchanged as a storage of its dtype. Every tensor the family's module tree
// has must be present with its shape and nothing else may be (errors:
// InvalidArgument naming the tensor); names must have spec.nc entries.
Result<std::string> SerializePtCheckpoint(const SafeTensorFile& weights, const PtWriteOptions& options);

// SerializePtCheckpoint written crash-safely (Env::WriteFileAtomic) to `path`.
Status WritePtCheckpoint(Env& env, const std::string& path, const SafeTensorFile& weights,
                         const PtWriteOptions& options);

// "YYYY-MM-DDTHH:MM:SS.ffffff" (UTC) for `unix_millis`, the form of the
// checkpoint's "date".
std::string PtDate(int64_t unix_millis);

}  // namespace kestrel::model
