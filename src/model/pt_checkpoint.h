// Ultralytics / PyTorch `.pt` checkpoints, read without LibTorch and without
// executing anything: a bounded reader for torch.save's zip archive and a
// restricted unpickler that only rebuilds tensors and the containers around
// them (GLOBAL resolves to an allow-list; every other name is an error).
// What is accepted and refused: docs/formats.md ("PyTorch .pt checkpoints").
//
// Torch-free (built into kestrel_train_config beside spec.cc, so `kestrel
// submit` can check model=yolov8n.pt); the conversion to at::Tensor is the
// SafeTensor adapter in weights.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/safetensors.h"
#include "core/status.h"

namespace kestrel::model {

// Bounds for untrusted input; a file over any of them is an error, never a
// large allocation.
struct PtReadLimits {
  uint64_t max_file_bytes = 8ull << 30;      // whole .pt file
  uint64_t max_pickle_bytes = 256ull << 20;  // data.pkl
  uint64_t max_zip_entries = 1u << 20;       // central-directory records
  uint64_t max_nodes = 4u << 20;  // pickled values (each opcode makes at most one); 4x this in references
  uint64_t max_memo = 4u << 20;   // memo entries
  int max_nesting = 1000;         // container nesting in the pickle
  int max_module_depth = 64;      // nn.Module nesting when collecting the state dict
  uint64_t max_module_visits = 1u << 17;   // modules + entries walked (a shared child is walked again)
  uint64_t max_tensor_bytes = 4ull << 30;  // all rebuilt tensors together (after widening to F32/I64)
};

struct PtCheckpoint {
  // The detection model's state dict (nn.Module state_dict names:
  // "model.0.conv.weight", ...). Floating tensors are F32 (F16/BF16 widened,
  // F64 narrowed), integer and bool tensors I64; contiguous, row-major.
  SafeTensorFile weights;
  std::string source;       // "ema", "model", "object" (a pickled model) or "state_dict"
  std::string model_class;  // "ultralytics.nn.tasks.DetectionModel"; "" for a state_dict
  std::string scale;        // the model yaml's "scale" (n/s/m/l/x); "" when absent
  std::string arch;  // the family its module tree is ("yolov8", "yolo11", "yolov5u"); "" for a state_dict
  int nc = 0;        // the model's nc; 0 when absent
  std::vector<std::string> names;   // class names by index; empty when absent
  std::string ultralytics_version;  // the checkpoint's "version"; "" when absent
  // The training image size recorded in train_args["imgsz"] (the reference
  // trainer's args), pixels; for an [h, w] pair the long side. 0 when the
  // checkpoint records none (a bare state_dict, a model saved outside a run).
  int imgsz = 0;
};

// True when `prefix` starts with a zip local-file header ("PK\3\4"), i.e. a
// torch.save archive rather than safetensors.
bool LooksLikeZip(std::string_view prefix);
// LooksLikeZip on the first bytes of the file at `path`; false when unreadable.
bool FileLooksLikeZip(const std::string& path);

// Parses the bytes of a .pt file. `origin` names it in errors. Errors:
// Corruption (a damaged or truncated archive or pickle), InvalidArgument (a
// well-formed file that is not a YOLOv8/YOLO11/YOLOv5u detection checkpoint: the message
// says what was found and what is accepted), ResourceExhausted (a limit).
Result<PtCheckpoint> ParsePtCheckpoint(std::string_view bytes, const std::string& origin,
                                       const PtReadLimits& limits = {});
Result<PtCheckpoint> ReadPtCheckpoint(const std::string& path, const PtReadLimits& limits = {});

// Any weights file Kestrel accepts, chosen by magic bytes: a .pt archive
// (converted: its tensors, metadata format="ultralytics.pt", nc, names as a
// JSON array, scale, arch and imgsz (train_args' image size) when the
// checkpoint records them) or safetensors.
Result<SafeTensorFile> ReadWeightsFile(const std::string& path);

// The training image size a weights file records, in pixels; 0 when it
// records none. A .pt: train_args["imgsz"] (PtCheckpoint::imgsz); Kestrel's
// safetensors: metadata "imgsz" (written by the trainer; only the header is
// read). Errors: the file's (NotFound, Corruption, InvalidArgument), and
// Corruption naming "imgsz" for metadata that is not a positive integer.
Result<int> ReadRecordedImgsz(const std::string& path);

// The error for weights that are not on disk (model=yolov8n.pt as the
// reference framework takes it, where it would download the file): NotFound
// at `path`, field `key`, saying what was looked for (the absolute path),
// that nothing is downloaded (Kestrel has no network and never fetches
// weights), how to bring the file (copy it, or `kestrel models register`),
// and, when the file's stem names a known model (yolov8n, yolo11s,
// yolov5nu, ...), the model=<stem>.yaml alternative that builds that
// architecture from scratch. ReadWeightsFile (and so ReadWeightsInfo, which
// every command reads weights through) returns it for a missing file.
Status MissingWeightsError(const std::string& path, const std::string& key = "model");

// True for a model= value naming a weights file rather than a scale/yaml:
// it ends with ".pt" or ".safetensors" (any case).
bool IsWeightsPath(const std::string& model);

}  // namespace kestrel::model
