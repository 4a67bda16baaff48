// A hyperparameter study's plots as PNG (issue 32, docs/tune.md "Plots"):
// optimisation history with the best value so far, parallel coordinates,
// one slice plot per param and the importances bar chart. Drawn with the
// same canvas as the validation plots (OpenCV, no OpenCV types here), from
// a plain trial list so this module needs nothing of src/tune: the caller
// (`kestrel tune show --plots DIR`) copies each tune::Trial into a
// StudyPlotTrial (values through Param::FromInternal, choice indices as
// they are) and passes tune::ParamImportances' result when it has one.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/env.h"
#include "core/status.h"

namespace kestrel::eval {

// One sampled param of the study, in the space's order.
struct StudyPlotParam {
  std::string name;                  // the train key, e.g. "lr0"
  bool log = false;                  // numeric with a log prior: its axis is log-scaled (values > 0)
  std::vector<std::string> choices;  // non-empty: categorical; a trial's value is the choice index
};

// One trial. Only trials with a value enter the plots (the others are
// counted in the history plot's subtitle).
struct StudyPlotTrial {
  int64_t number = 0;           // the trial number (x of the history plot)
  std::vector<double> params;   // one per StudyPlotData::params: the value the trial used
                                // (not log'ed), or the choice index of a categorical
  std::optional<double> value;  // the objective of a succeeded trial; nullopt otherwise
};

struct StudyPlotData {
  std::string study;               // title prefix, e.g. the study name
  std::string metric = "fitness";  // the objective's name (y label)
  bool maximize = true;            // the direction: best-so-far and colours follow it
  std::vector<StudyPlotParam> params;
  std::vector<StudyPlotTrial> trials;
  // One per param (tune::ParamImportances, sums to 1), or empty when there
  // is none (fewer than 4 succeeded trials): the chart then says so.
  std::vector<double> importances;
};

// Pixel sizes (fixed, so tests and pages can rely on them).
inline constexpr int kStudyHistoryWidth = 900, kStudyHistoryHeight = 540;
inline constexpr int kStudyParallelWidth = 1100, kStudyParallelHeight = 560;
inline constexpr int kStudySlicePanelWidth = 420, kStudySlicePanelHeight = 340;  // 3 panels per row
inline constexpr int kStudySliceColumns = 3;
inline constexpr int kStudyImportanceWidth = 800;  // height: 90 + 36 per param

// history.png: each valued trial's objective against its number (a dot)
// and the best value so far (a step line; the max when maximizing).
Result<std::string> RenderStudyHistory(const StudyPlotData& d);

// parallel_coordinates.png: one vertical axis per param (log axes in
// log scale, categoricals with their choices as tick labels) and a last
// axis for the objective; one polyline per valued trial, coloured from
// light (worst) to dark blue (best), the best trial drawn last and thickest.
Result<std::string> RenderStudyParallelCoordinates(const StudyPlotData& d);

// slice.png: one panel per param (kStudySliceColumns per row), the
// objective against the param's value (log x for log params, the choice
// names for categoricals), one dot per valued trial coloured by trial
// number (light = early, dark = late).
Result<std::string> RenderStudySlices(const StudyPlotData& d);

// importances.png: one horizontal bar per param, the largest on top, with
// its share printed; without importances, a message instead of bars.
Result<std::string> RenderStudyImportances(const StudyPlotData& d);

// Writes history.png, parallel_coordinates.png, slice.png and
// importances.png into `dir` (created), each atomically.
// kInvalidArgument when a trial's params do not match `params` in size, a
// categorical index is outside its choices, a log param's value is not > 0,
// or `importances` is neither empty nor one per param (the Render*
// functions check the same).
Status WriteStudyPlots(Env& env, const std::string& dir, const StudyPlotData& d);

}  // namespace kestrel::eval
