// `kestrel val` as use cases (docs/evaluation.md): the ground truth of one
// dataset split (LoadSplit), scoring detections on it and writing the run
// folder and the result record (WriteValRun), `val predictions=`
// (EvaluatePredictions: detections made elsewhere) and `val model=`
// (EvaluateModel: a network run by the program's backend, score_split.h).
// `kestrel val --json` and `kestrel-deploy val --json` print ValRunJson
// unchanged.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/val_keys.h"
#include "core/env.h"
#include "core/status.h"
#include "data/version.h"
#include "eval/dataset_eval.h"
#include "eval/detection.h"
#include "eval/metrics.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// NAME[@VERSION] and the ground truth of one split ("train", "val", "test").
struct LoadedSplit {  // NOLINT(bugprone-exception-escape): an aggregate; the check misreads its
                      // implicit members (as data::VersionView's)
  data::VersionView version;
  eval::EvalSplit split;
};
// Unknown dataset or version: the registry's error; an empty split or one
// whose labels cannot be read: the error with `spec` as context. `subset`
// (optional; val's classes= and single_cls) is applied to the version's
// labels first (train::DataSubset::Apply: the reference validator's
// dataset), an unknown class is an error naming classes.
Result<LoadedSplit> LoadSplit(store::MetadataStore& meta, store::ArtifactStore& blobs,
                              const std::string& spec, const std::string& split_name,
                              const train::DataSubset* subset = nullptr);

// Detections scored on a LoadedSplit, by whoever made them.
struct ScoredSplit {
  eval::EvalResult result;
  std::vector<std::vector<eval::Detection>> per_image;  // parallel to split.images, original pixels
  std::string source_kind;                              // "predictions" or "model" (the record's provenance)
  std::string source;                                   // the predictions path or the weights file
  nlohmann::json extra =
      nlohmann::json::object();  // provenance extra (format and image_ids; or the model's run settings)
  nlohmann::json speed;          // null, or {"preprocess_ms", ...} mean per image (the record's "speed")
  std::string speed_text;        // "" or the speed line of the human summary
};

// What one evaluation computed and wrote.
struct ValRun {
  nlohmann::json record;  // result.json: eval::EvalRecordJson plus speed, coco, predictions_json
  eval::EvalResult result;
  std::string dir;               // the run folder, complete
  std::string record_sha;        // result.json in the artifact store
  std::string record_path;       // ... and its path there
  std::string predictions_path;  // dir/predictions.json with keys.save_json, else ""
  std::string text;              // the human summary `kestrel val` prints
};

// Everything `keys` asks for beyond the metrics (coco_metrics, save_json,
// plots) is computed and rendered before anything is written, so a failure
// (undecodable image, impossible image_ids) writes nothing; the run folder
// (`dir_or_empty`, or with "" the next free keys.project/keys.name) is built
// beside itself and moved in when complete (result.json last); then the
// record goes into `blobs`.
Result<ValRun> WriteValRun(Env& env, store::ArtifactStore& blobs, const ValKeys& keys,
                           const LoadedSplit& loaded, const ScoredSplit& scored,
                           const std::string& dir_or_empty);

// `val predictions=`: keys.predictions (YOLO txt folder or COCO results
// JSON) scored on keys.data's split (a registry reference), then
// WriteValRun. keys.predictions and keys.data must be set.
Result<ValRun> EvaluatePredictions(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                                   const ValKeys& keys, const std::string& dir_or_empty = "");

// `val model=`: keys.model (a weights file or an exported .onnx file,
// already resolved) loaded by the program's backend (app/backends.h
// LoadDetector: keys.device, keys.runtime) and run on keys.data's split (a
// registry reference) with the validator's settings (multi-label NMS at
// keys.conf / keys.iou / keys.max_det, keys.rect batches), scored with the
// labels letterboxed as the reference validator scores them; then
// WriteValRun into `dir_or_empty` (or the next free keys.project/keys.name).
// kInvalidArgument naming field "nc" of the weights when the model's class
// count differs from the dataset's; LoadDetector's errors. The record
// carries the model's settings as provenance extra and "speed".
Result<ValRun> EvaluateModel(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                             const ValKeys& keys, const std::string& dir_or_empty = "");

// {"ok": true, "dir", "record_sha", "record_path", "result": record} and
// "predictions_json" (the file) when one was written.
nlohmann::json ValRunJson(const ValRun& run);

}  // namespace kestrel::app
