// The search space of a study: which `kestrel train` keys a trial samples,
// over what, and which it fixes. Read from YAML in the trainer's own key
// names (docs/tune.md "Search space"):
//
//   lr0: {low: 1.0e-4, high: 1.0e-1, log: true}   # float, log-uniform prior
//   mosaic: {low: 0, high: 1}                     # float, uniform prior
//   close_mosaic: {low: 0, high: 10}              # int (the key is an int key)
//   imgsz: {low: 320, high: 640, step: 32}        # int on a grid
//   optimizer: [SGD, AdamW]                       # categorical
//   cos_lr: true                                  # fixed for every trial
//
// Every bound, choice and fixed value is checked by the trainer's own
// binding (train::TrainConfig::Bind, core/options.h): a value outside a
// key's allowed range is kInvalidArgument naming the file, line, key and
// the range. The keys the study itself sets (kStudyKeys) are refused.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace kestrel::tune {

enum class ParamKind { kFloat, kInt, kCategorical };

struct Param {
  std::string key;  // a `kestrel train` key
  ParamKind kind = ParamKind::kFloat;
  double low = 0, high = 0;          // kFloat/kInt: the closed range [low, high]
  bool log = false;                  // kFloat/kInt: prior uniform in log(value); low > 0
  int64_t step = 1;                  // kInt: values low, low+step, ..., high
  std::vector<std::string> choices;  // kCategorical: the values as key=value text

  // The internal coordinate a sampler works in: log(value) for log params,
  // the value for the others, the choice index for categoricals.
  // Bounds of that coordinate: ints widen by step/2 on each side (so every
  // integer gets the same share of a uniform draw).
  double InternalLow() const;
  double InternalHigh() const;
  // A point of the internal coordinate to the value the trial uses:
  // rounded to the int grid and clamped to [low, high]; the index for
  // categoricals. The result is a valid internal value (ToInternal of it
  // gives the point a trial records).
  double Snap(double internal) const;
  double ToInternal(double value) const;
  double FromInternal(double internal) const;
  // The `key=value` text of an internal value (shortest round-trip
  // decimal for floats).
  std::string ValueText(double internal) const;
};

struct SearchSpace {
  std::vector<Param> params;                 // sampled, in file order
  std::map<std::string, std::string> fixed;  // key -> value text, set for every trial

  const Param* Find(const std::string& key) const;
};

// The keys a study sets for each trial itself; a space may not name them.
inline constexpr const char* kStudyKeys[] = {"data",    "model",   "epochs", "resume",
                                             "run_dir", "project", "name",   "exist_ok"};

// Parses and validates a space file's text. `origin` (the file name) and
// the YAML line go into every error.
Result<SearchSpace> ParseSpaceYaml(const std::string& text, const std::string& origin);
Result<SearchSpace> LoadSpaceFile(const std::string& path);

// The default detection space: the reference tuner's keys and ranges
// (docs/tune.md has the table and where it differs).
SearchSpace DefaultDetectionSpace();

// Canonical JSON: {"params": [{"key","kind","low","high","log","step"|"choices"}...],
// "fixed": {...}}; equal spaces give equal text.
nlohmann::json SpaceToJson(const SearchSpace& space);
// SHA-256 hex of SpaceToJson's compact dump: a study's identity with its name.
std::string SpaceHash(const SearchSpace& space);

// The `key=value` tokens of one trial: the fixed keys, then one per param.
// REQUIRES: internal.size() == space.params.size().
std::vector<std::string> TrialTokens(const SearchSpace& space, const std::vector<double>& internal);

}  // namespace kestrel::tune
