// Torch-free reporting parts of the trainer: the per-epoch progress line,
// results.csv, args.yaml, the epoch history as JSON (stored in checkpoints)
// and the train_batch0.jpg preview.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/loader.h"
#include "train/trainer.h"

namespace kestrel::train {

std::string HistoryToJson(const std::vector<EpochRecord>& history);
Result<std::vector<EpochRecord>> HistoryFromJson(const std::string& text);

// results.csv: header + one row per epoch (losses, P, R, mAP50, mAP50-95,
// lr per group, seconds), written atomically.
Status WriteResultsCsv(Env& env, const std::string& path, const std::vector<EpochRecord>& history);

// args.yaml: the effective config (OptionSet::ToJson()) as flat YAML.
Status WriteArgsYaml(Env& env, const std::string& path, const nlohmann::json& config);

// Progress of the epoch in progress. Plain mode prints one line per call to
// Line(); tty mode redraws one line with '\r'.
struct ProgressLine {
  int epoch = 0, epochs = 0;  // 1-based epoch
  int64_t batch = 0, batches = 0;
  double box = 0, cls = 0, dfl = 0;  // running means
  int64_t instances = 0;             // targets in the last batch
  double it_per_s = 0;
  double eta_s = 0;  // whole run
};
std::string FormatProgress(const ProgressLine& p);

// Draws up to 16 images of `batch` with their target boxes into a grid and
// writes it as JPEG (atomically).
Status WriteBatchPreview(Env& env, const std::string& path, const data::Batch& batch,
                         const std::vector<std::string>& names);

}  // namespace kestrel::train
