// `kestrel train` as a use case: one training run in this process through
// the program's train backend (app/backends.h: kestrel-torch lends
// train::Train), and the lines that close it. The train job kind's attempt
// runner is train_job.h. Torch-free header and implementation.
#pragma once

#include <string>

#include "core/status.h"
#include "train/trainer.h"

namespace kestrel::app {

// Trains with `options` and `hooks` (train/trainer.h) on the program's train
// backend. kFailedPrecondition naming kestrel-torch when this program has
// none (`kestrel` hands `train` to kestrel-torch before it gets here);
// otherwise the backend's result: setup problems (bad options, unknown
// dataset, corrupted checkpoint, I/O) are errors, how the run ended is in
// the summary.
Result<train::TrainSummary> RunTraining(const train::TrainOptions& options, const train::TrainHooks& hooks);

// The closing lines of a run, for people: how it ended, the run directory,
// the best epoch with its mAP50 and mAP50-95 — or, for a run whose epochs
// were not validated, why not and which weights are which, never an mAP that
// was not measured (docs/training.md "val=false") — its warnings and where
// the weights are. Starts with an empty line; each line ends with '\n'.
std::string TrainSummaryText(const train::TrainSummary& summary);

}  // namespace kestrel::app
