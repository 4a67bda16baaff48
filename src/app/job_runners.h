// The attempt runners of the built-in job kinds (app/job_kinds.h): train
// (train_job.h), val and export. Torch-free: they run networks through the
// program's backends (app/backends.h), and the LibTorch backend lends them
// to kestrel-torch's job-kind table (BuiltinKindRunners); the programs
// without it have the rows without runners.
#pragma once

#include <vector>

#include "app/backends.h"
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

// The runners above and the train kind's (train_job.h) as Backends::runners
// entries (app/backends.h): train, val, export. They reach LibTorch only
// through the program's backends, so the LibTorch backend, which they need
// (training, the reference an export is verified against, .pt weights),
// lends them (backend_torch::RegisterTorchBackend in kestrel-torch's main()).
std::vector<KindRunner> BuiltinKindRunners();

}  // namespace kestrel::app
