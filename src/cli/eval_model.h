// The model-running half of the eval commands (model_cmd.cc): `val model=`,
// `predict`, `compare`, and LoadSplit (eval_cmd.cc, always built). The model
// functions are defined only with LibTorch (KESTREL_CLI_WITH_TORCH);
// torch-free header (the predictor hides LibTorch).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "data/registry.h"
#include "eval/dataset_eval.h"

namespace kestrel::cli {

struct ModelRunOptions {
  int imgsz = 640;
  int batch = 16;
  double conf = 0.001;  // validator settings (multi-label NMS)
  double iou = 0.7;
  int max_det = 300;
  bool rect = true;  // eval/val_shapes.h: batches by aspect ratio (false: imgsz x imgsz)
  double pad = 0.5;  // rect border in strides
};

struct ModelRun {
  std::vector<std::vector<eval::Detection>> per_image;  // parallel to split.images, original pixels
  nlohmann::json info;                                  // model spec, imgsz, batch, NMS settings
  nlohmann::json speed;  // {"preprocess_ms", "inference_ms", "postprocess_ms", "images"} per image
  std::string speed_text;
};

// Runs `weights` on every image of `split` (image bytes from the store).
// InvalidArgument when the model's class count differs from the dataset's.
Result<ModelRun> RunModelOnSplit(store::ArtifactStore& blobs, const std::string& weights,
                                 const eval::EvalSplit& split, const ModelRunOptions& opts);

// NAME[@VERSION] and the ground truth of one split (eval_cmd.cc).
struct LoadedSplit {
  data::VersionView version;
  eval::EvalSplit split;
};
Result<LoadedSplit> LoadSplit(Stores& stores, const std::string& spec, const std::string& split_name);

// What `val model=` computes: RunModelOnSplit then eval::EvaluateSplit with
// the same conf / iou / max_det. `val model=` and `compare` both use it.
struct ScoredModel {
  ModelRun run;
  eval::EvalResult result;
};
Result<ScoredModel> ScoreModelOnSplit(store::ArtifactStore& blobs, const std::string& weights,
                                      const eval::EvalSplit& split, const ModelRunOptions& opts);

// Registers `predict` and `compare`.
void AddModelCommands(CLI::App& app, Context& ctx, int* exit_code);

}  // namespace kestrel::cli
