// Records of hyperparameter studies as stored by MetadataStore (issue 32,
// docs/tune.md "In the store"; migration 14): one row per study and one per
// trial. The store keeps them as given and numbers studies; what the
// settings and params mean (the search space, the sampler, the trial
// states) is the application layer's (app/tune_study.h) and src/tune's.
// Values the store never reads (settings, params, intermediate values) are
// JSON text written and read back byte for byte.
#pragma once

#include <cstdint>
#include <string>

namespace kestrel::store {

struct StudyRecord {
  int64_t id = 0;                    // assigned by CreateStudy
  std::string name;                  // unique; a study's identity with space_hash
  std::string space_hash;            // tune::SpaceHash of the search space (64 hex)
  std::string space_json;            // tune::SpaceToJson, compact
  std::string settings_json = "{}";  // the study's settings and base train keys (app/tune_study.h)
  // running | stopping | stopped | finished (app/tune_study.h StudyState).
  std::string state = "running";
  int64_t job_id = 0;  // the `tune` job coordinating it (0: none yet)
  int64_t created_ms = 0, updated_ms = 0;
};

struct TrialRecord {
  int64_t study_id = 0;
  int64_t number = 0;  // 0, 1, 2, ... in suggestion order; unique per study
  int64_t job_id = 0;  // its `train` job (0: not submitted yet)
  // queued | running | succeeded | pruned | failed | infra_failed.
  std::string state = "queued";
  std::string params_json = "[]";        // the sampler's internal values, one per space param
  std::string value;                     // the objective as decimal text ("" = none)
  std::string intermediate_json = "[]";  // per-epoch objective, epoch 1 first
  int64_t epochs_run = 0;                // epochs its job trained (all attempts)
  // The epoch (a rung) the pruner stopped it at; 0 = never pruned or
  // promoted since. Set when the stop is decided, before the job is
  // cancelled, so a restarted coordinator finishes the same stop.
  int64_t pruned_at = 0;
  int64_t promotions = 0;  // ASHA continuations from its checkpoint
  int64_t created_ms = 0, updated_ms = 0;
};

}  // namespace kestrel::store
