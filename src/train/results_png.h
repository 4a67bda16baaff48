// results.png of a run folder: the epoch history (EpochRecord) as the
// Ultralytics-style grid of loss and metric curves (eval/results_plot.h).
// Written by the trainer after every epoch, beside results.csv.
#pragma once

#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "eval/results_plot.h"
#include "train/trainer.h"

namespace kestrel::train {

// Two rows of five panels: train box/cls/dfl loss, precision, recall; val
// box/cls/dfl loss, mAP50, mAP50-95. Without a val split (`has_val` false)
// the val and metric panels say so instead of plotting zeros.
eval::ResultsTable ResultsTableFromHistory(const std::vector<EpochRecord>& history, bool has_val);

// Renders and writes `path` atomically (temp file + rename through `env`),
// so a reader always finds a complete picture of the epochs so far. A
// rendering failure is logged as a warning and returns OK (a plot never
// ends a training run); a write failure is returned.
Status WriteResultsPng(Env& env, const std::string& path, const std::vector<EpochRecord>& history,
                       bool has_val);

}  // namespace kestrel::train
