// Evaluations and comparisons (docs/server.md "Evaluations and comparisons",
// docs/evaluation.md): the use cases behind `kestrel evaluations
// list|show|compare` and GET /api/evaluations..., /api/comparisons.
// Torch-free: nothing here runs a model. An evaluation is a succeeded val job
// (`kestrel submit kind=val`); its id is the job id. What it reads:
//   - the job (config, what was submitted, its result: record blob, attempt);
//   - the result record blob (result.json, eval::EvalRecordJson);
//   - $HOME/jobs/<id>/attempt-<n>/predictions.json when the job ran with
//     save_json=true (the path is built from the job id and attempt number,
//     never read from a stored string, and must be a regular file).
// Per-image views use the split's labels and the stored predictions; the
// "right" rule is eval::ImageIsRight (`kestrel compare`'s), the matrix cells
// are eval::ConfusionMatrix::MatchImage over the predictions the evaluator
// scored (eval::ScoredPredictions), against the labels the record was scored
// with (letterboxed as the validator scores them for a model's run).
//
// Request errors are located at {kRequestFile, 0, key} (app/jobs.h); an id
// that is not a succeeded val job is kNotFound (field "id"); an evaluation
// without stored predictions is kFailedPrecondition (field "id").
// Thread-safety: one instance per thread (it borrows the stores).
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// One evaluation as lists show it (from the job and its result; no blob read).
struct EvaluationSummary {
  int64_t id = 0;               // the val job's id
  std::string model;            // NAME@vN of the registered model scored, else model_submitted
  std::string model_submitted;  // model= as the user gave it
  std::string model_id;         // "" when the weights are no registered model's
  std::string weights;          // the weights file the job scored
  std::string dataset, version, version_id, split;  // version "vN"
  int64_t images = 0, instances = 0;
  double map50 = 0, map50_95 = 0, precision = 0, recall = 0, fitness = 0;
  int64_t created_ms = 0, finished_ms = 0;  // the job's submission and end
  int64_t attempt = 0;                      // the attempt that produced it
  std::string record_sha;                   // the result record blob
  bool has_predictions = false;             // predictions.json in the attempt folder
};

struct EvaluationListRequest {
  std::string model;    // a model reference (NAME: every version) or the text submitted; "" = any
  std::string dataset;  // NAME or NAME@vN (or @version-id prefix); "" = any
  std::string split;    // train|val|test; "" = any
  int64_t limit = 100;  // 1..1000
  int64_t offset = 0;   // >= 0
};

struct EvaluationList {
  std::vector<EvaluationSummary> evaluations;  // newest first
  std::optional<int64_t> next_offset;          // the next page's offset, when there is one
};

struct EvaluationDetail {  // NOLINT(bugprone-exception-escape): an aggregate; the check misreads
                           // its implicit members (as LoadedSplit's)
  EvaluationSummary summary;
  nlohmann::json record;  // result.json as stored
};

enum class ImageFilter { kAll, kRight, kWrong };

struct EvaluationImagesRequest {
  std::string filter = "all";  // all|right|wrong
  // "" = every image; else only the rows of the image with this SHA-256 (64
  // lowercase hex digits; kNotFound, field "sha", when the split has none).
  std::string sha;
  int64_t offset = 0;
  int64_t limit = 50;  // 1..500
};

// What an image page lists: per image the labels, the stored detections
// (score >= kMinShownScore, best first, at most kMaxShownDetections) and
// whether it is right (eval::ImageIsRight).
inline constexpr double kMinShownScore = 0.001;
inline constexpr size_t kMaxShownDetections = 300;

struct EvaluationImages {
  EvaluationSummary summary;
  std::vector<std::string> names;  // class names
  std::string filter;
  std::string sha;                                  // the sha= filter, "" = none
  int64_t total = 0;                                // images that pass the filter (and sha=)
  int64_t right = 0, wrong = 0;                     // over the whole split
  nlohmann::json images = nlohmann::json::array();  // the page
  std::optional<int64_t> next_offset;
};

struct ConfusionCellRequest {
  int64_t gt = -1, pred = -1;  // 0..nc (nc = background); required
  int64_t offset = 0;
  int64_t limit = 100;  // 1..1000
};

struct ConfusionCell {
  EvaluationSummary summary;
  int64_t gt = 0, pred = 0, nc = 0;
  std::vector<std::string> names;
  double conf = 0, iou = 0;  // the matrix's settings (record settings confusion_conf/iou)
  int64_t count = 0;         // boxes in the cell, recomputed from the predictions
  int64_t matrix_value = 0;  // the record's cell
  bool consistent = false;   // the whole recomputed matrix equals the record's
  nlohmann::json boxes = nlohmann::json::array();  // the page
  std::optional<int64_t> next_offset;
};

struct Comparison {  // NOLINT(bugprone-exception-escape): an aggregate; the check misreads
                     // its implicit members (as LoadedSplit's)
  EvaluationSummary a, b;
  nlohmann::json view;       // the comparison document (ComparisonJson, without "ok")
  std::string metrics_text;  // eval::CompareMetricsText of the two
  int64_t a_right_b_wrong = -1, b_right_a_wrong = -1;  // -1 without stored predictions
};

class Evaluations {
 public:
  // All borrowed; `home` is the Kestrel home holding jobs/<id>/attempt-<n>.
  Evaluations(store::MetadataStore& meta, store::ArtifactStore& blobs, Env& env, std::string home)
      : meta_(meta), blobs_(blobs), env_(env), home_(std::move(home)) {}

  Result<EvaluationList> List(const EvaluationListRequest& req);
  Result<EvaluationDetail> Show(int64_t id);
  Result<EvaluationImages> Images(int64_t id, const EvaluationImagesRequest& req);
  Result<ConfusionCell> Confusion(int64_t id, const ConfusionCellRequest& req);
  // kInvalidArgument (field "b") when the two are not on the same dataset
  // version and split.
  Result<Comparison> Compare(int64_t a, int64_t b);

 private:
  struct Loaded;
  Result<EvaluationSummary> Summarize(const store::JobRecord& job);
  Result<Loaded> Load(int64_t id, bool need_predictions);
  std::string AttemptDir(int64_t id, int64_t attempt) const;

  store::MetadataStore& meta_;
  store::ArtifactStore& blobs_;
  Env& env_;
  std::string home_;
  bool models_read_ = false;
  std::vector<store::ModelRecord> models_;                                    // read once per instance
  std::map<std::string, std::vector<store::DatasetVersionRecord>> versions_;  // per dataset, on demand
};

// The views `kestrel evaluations … --json` prints and the routes return.
nlohmann::json EvaluationSummaryJson(const EvaluationSummary& s);
// {"ok", "evaluations": [...], "next_offset"}.
nlohmann::json EvaluationListJson(const EvaluationList& l);
// {"ok", "evaluation": summary, "record", "curves": record.metrics.curves or null}.
nlohmann::json EvaluationDetailJson(const EvaluationDetail& d);
nlohmann::json EvaluationImagesJson(const EvaluationImages& p);
nlohmann::json ConfusionCellJson(const ConfusionCell& c);
// {"ok", "a", "b", "dataset", "version", "version_id", "split", "delta",
// "right_rule", "images", "curves", "confusion"}.
nlohmann::json ComparisonJson(const Comparison& c);

// The human text of `evaluations list|show|compare`.
std::string EvaluationListText(const EvaluationList& l);
std::string EvaluationDetailText(const EvaluationDetail& d);
std::string ComparisonText(const Comparison& c);

}  // namespace kestrel::app
