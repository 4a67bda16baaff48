// Torch-free reporting parts of the trainer: the per-epoch progress line,
// results.csv, args.yaml, the epoch history as JSON (stored in checkpoints)
// and the train_batch0.jpg preview.
#pragma once
#include <array>
#include <nlohmann/json_fwd.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "data/loader.h"
#include "train/samples.h"
#include "train/trainer.h"

namespace kestrel::train {

std::string HistoryToJson(const std::vector<EpochRecord>& history);
Result<std::vector<EpochRecord>> HistoryFromJson(const std::string& text);

// results.csv, in the reference trainer's column order and meaning so tools
// written for its files read Kestrel's: `epoch` (1-based), `time` (wall
// seconds of the run up to the end of that epoch: the running sum of
// EpochRecord::seconds, each epoch's validation included, continued across
// a resume), the three mean train loss items, precision, recall, mAP50,
// mAP50-95 (0 when not validated), the three mean val loss items, and the
// last LR of param groups 0-2.
inline constexpr std::array<const char*, 15> kResultsCsvColumns = {"epoch",
                                                                   "time",
                                                                   "train/box_loss",
                                                                   "train/cls_loss",
                                                                   "train/dfl_loss",
                                                                   "metrics/precision(B)",
                                                                   "metrics/recall(B)",
                                                                   "metrics/mAP50(B)",
                                                                   "metrics/mAP50-95(B)",
                                                                   "val/box_loss",
                                                                   "val/cls_loss",
                                                                   "val/dfl_loss",
                                                                   "lr/pg0",
                                                                   "lr/pg1",
                                                                   "lr/pg2"};
// The file's text: the comma-separated header, then one row per record,
// every number as the reference prints it (printf "%.6g"), '\n' line ends.
std::string ResultsCsvText(const std::vector<EpochRecord>& history);
// Writes ResultsCsvText(history) to `path` atomically.
Status WriteResultsCsv(Env& env, const std::string& path, const std::vector<EpochRecord>& history);

// args.yaml: flat YAML, values as JSON scalars. As the reference's file:
// `task: "detect"` and `mode: "train"` first, then the effective config
// (OptionSet::ToJson(), keys sorted), then `save_dir`: the run folder, the
// directory of `path` as given. Written atomically.
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
// The terminal form (TrainHooks::tty, redrawn with '\r'): a bar of the
// epoch's batches, percent, the epoch's elapsed and remaining time, rate and
// the running losses: "epoch 3/10 [######--------------]  30% 9/30
// 0:04<0:10 2.10 it/s  box 1.2345  cls 2.3456  dfl 1.1111  inst 45".
// `epoch_elapsed_s`: seconds since the epoch's first batch.
std::string FormatProgressBar(const ProgressLine& p, double epoch_elapsed_s);

// Draws up to 16 images of `batch` with their target boxes into a grid and
// writes it as JPEG (atomically): train_batch{0,1,2}.jpg, the first three
// batches of a run with plots=true, as the reference trainer.
Status WriteBatchPreview(Env& env, const std::string& path, const data::Batch& batch,
                         const std::vector<std::string>& names);

// val_batch{i}_labels.jpg and val_batch{i}_pred.jpg in `run_dir` for each
// grids[i] (Validator::LastGrids: the first images of val batch i with
// their detections): the reference validator's plot_images mosaics, 4
// columns, labels in class colour with the class name, predictions with
// "name 0.87". Images are read again through `source` (at most 48); an
// unreadable one fails the call naming it. Each file written atomically.
Status WriteValBatchGrids(Env& env, const std::string& run_dir,
                          const std::vector<std::vector<SampleImage>>& grids, const data::ImageSource& source,
                          const std::vector<std::string>& names);

}  // namespace kestrel::train
