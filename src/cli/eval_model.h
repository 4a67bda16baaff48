// The model-running half of the eval commands (model_cmd.cc): `val model=`,
// `predict`, `compare`. Built only with LibTorch (KESTREL_CLI_WITH_TORCH);
// torch-free header (the predictor hides LibTorch).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "eval/dataset_eval.h"

namespace kestrel::cli {

struct ModelRunOptions {
  int imgsz = 640;
  int batch = 16;
  double conf = 0.001;  // validator settings (multi-label NMS)
  double iou = 0.7;
  int max_det = 300;
};

struct ModelRun {
  std::vector<std::vector<eval::Detection>> per_image;  // parallel to split.images, original pixels
  nlohmann::json info;   // model spec, imgsz, batch, NMS settings
  nlohmann::json speed;  // {"preprocess_ms", "inference_ms", "postprocess_ms", "images"} per image
  std::string speed_text;
};

// Runs `weights` on every image of `split` (image bytes from the store).
// InvalidArgument when the model's class count differs from the dataset's.
Result<ModelRun> RunModelOnSplit(store::ArtifactStore& blobs, const std::string& weights,
                                 const eval::EvalSplit& split, const ModelRunOptions& opts);

// Registers `predict` and `compare`.
void AddModelCommands(CLI::App& app, Context& ctx, int* exit_code);

}  // namespace kestrel::cli
