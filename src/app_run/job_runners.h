// The LibTorch attempt runners of the built-in job kinds (app/job_kinds.h):
// train (app_run/train_job.h), val and export. kestrel-torch's main() sets
// them (SetLibTorchRunners); the programs without LibTorch have the rows
// without runners. Torch-free header.
#pragma once

#include "app/job_kinds.h"

namespace kestrel::app {

// The val kind's runner (`kestrel val --job ID --attempt N`): the job's val
// keys applied, model= scored on its dataset version's split into
// ctx.AttemptDir() (EvaluateModel: the files of `kestrel val`). The result:
// model, map50, map50_95, run_dir; details data, split, images, instances,
// precision, recall, fitness, record_sha, record_path.
Result<AttemptResult> RunValAttempt(AttemptContext& ctx);

// The export kind's runner (`kestrel export --job ID --attempt N`): the
// job's export keys applied, $KESTREL_HOME/jobs/<id>/<model>.onnx written —
// the same path for every attempt, so a retry after a crash exports again
// and the verified temp file is renamed over whatever an earlier attempt
// left — verified and recorded on the registered model (ExportAndRecord,
// as `kestrel export` does). `stage=export elapsed_s=N` every 10 s keeps the
// supervisor's hang timer from taking a long verification for a hung child.
// The result: model, path, verified; details format, max_abs_diff,
// max_abs_diff_boxes, max_abs_diff_scores, max_rel_diff_boxes, tolerance,
// bytes, verification, registry.
Result<AttemptResult> RunExportAttempt(AttemptContext& ctx);

// Sets the train, val and export runners of `kinds`. REQUIRES: before any
// thread reads the table (main()).
Status SetLibTorchRunners(JobKindTable& kinds);

}  // namespace kestrel::app
