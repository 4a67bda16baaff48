// Internal to tune_study.cc (the coordinator) and tune_study_views.cc (the
// read-only views): the store's trial record text read back as the tune
// library's types. Not for other modules: include app/tune_study.h.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "store/metadata_store.h"
#include "tune/sampler.h"

namespace kestrel::app::tune_internal {

// A JSON array of numbers (a trial's params or per-epoch values as stored);
// kCorruption naming `what` when the text is anything else.
Result<std::vector<double>> DoubleArray(const std::string& text, const std::string& what);

// A stored trial as the samplers and pruners see it (params in their
// internal coordinates, the value only when one was recorded).
Result<tune::Trial> ToTrial(const store::TrialRecord& r);
Result<std::vector<tune::Trial>> ToTrials(const std::vector<store::TrialRecord>& recs);

}  // namespace kestrel::app::tune_internal
