// `kestrel compare` as a use case (docs/evaluation.md): two models on one
// dataset split, each scored as `val model=` scores one (score_split.h,
// loaded by the program's backends), metric deltas, plots, the images only
// one of them gets right, an HTML report. Torch-free and OpenCV-free header
// (the drawing lives in compare.cc).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "app/evaluate.h"
#include "app/predict.h"
#include "app/val_keys.h"
#include "core/env.h"
#include "core/status.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

struct CompareRequest {
  std::string model_a, model_b;  // A and B as given: weights files, or what the resolver resolves
  std::string data;              // dataset NAME[@VERSION] (a registry reference)
  std::string split = "val";
  double conf = 0.001, iou = 0.7;              // the validator's settings, as `val model=`
  int imgsz = 0, batch = 16, max_det = 300;    // imgsz 0: each model's training size (app/imgsz.h)
  std::string project = "runs/compare", name;  // name "" = compare, compare2, ...
  bool exist_ok = false;
};

struct CompareResult {      // NOLINT(bugprone-exception-escape): an aggregate; the check misreads its
                            // implicit members (nlohmann::json) as throwing
  std::string dir;          // the run folder, complete (compare.json written last)
  std::string report_sha;   // compare.json in the artifact store
  std::string report_path;  // ... and its path there
  std::string html_sha;     // compare.html in the artifact store (named by the report)
  std::string html_path;
  nlohmann::json report;     // compare.json: {"kind": "kestrel.compare", "a", "b", "delta", ...}
  std::string title;         // "kestrel compare: A ... vs B ... on NAME@vN SPLIT"
  std::string metrics_text;  // eval::CompareMetricsText of A and B
  size_t images = 0;         // in the split
  size_t a_right_b_wrong = 0, b_right_a_wrong = 0;  // image counts (docs/evaluation.md "right")
};

// Resolves and scores A, then B (through `resolve`, when given: the CLI's
// accepts model references; the report names the models as given), as
// EvaluateModel scores one (app/evaluate.h), finds the images one model gets
// right and the other wrong, renders PR overlay, both confusion matrices and
// up to 8 side-by-side images per list (everything before anything is
// written), writes the run folder beside itself and moves it in, then
// stores compare.html and compare.json in `blobs`.
Result<CompareResult> CompareModels(Env& env, store::MetadataStore& meta, store::ArtifactStore& blobs,
                                    const CompareRequest& request, const WeightsResolver& resolve = {});

// {"ok": true, "dir", "report_sha", "report_path", "html_sha", "html_path",
// "report"}: what `kestrel compare --json` prints.
nlohmann::json CompareResultJson(const CompareResult& result);
// The human summary: title and image count, the metric table, the two
// counts, the run folder and both stored blobs.
std::string CompareResultText(const CompareResult& result);

}  // namespace kestrel::app
