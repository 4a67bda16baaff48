// Typed options: each component keeps a plain struct with defaults in the
// struct (AugmentOptions, OptimizerOptions, ImportOptions...) and binds its
// fields into an OptionSet once:
//
//   struct ImportOptions {
//     double val_ratio = 0.2;  // fraction of images put in val when no split
//     void Bind(OptionSet& s) { s.Float("val_ratio", &val_ratio, "...", 0, 1); }
//   };
//
// The OptionSet then parses YAML files and Ultralytics-style `key=value`
// overrides into the bound fields, rejecting unknown keys by name with the
// closest valid key as a hint, and range/format errors with file, line and
// field. It never "fixes" a value silently.
//
// Not thread-safe. Bound pointers must outlive the OptionSet.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kestrel {

class OptionSet {
 public:
  OptionSet();
  ~OptionSet();
  OptionSet(OptionSet&&) noexcept;
  OptionSet& operator=(OptionSet&&) noexcept;

  OptionSet& Int(std::string key, int64_t* dst, std::string help,
                 int64_t min = std::numeric_limits<int64_t>::min(),
                 int64_t max = std::numeric_limits<int64_t>::max());
  OptionSet& Int(std::string key, int* dst, std::string help,
                 int min = std::numeric_limits<int>::min(),
                 int max = std::numeric_limits<int>::max());
  OptionSet& Float(std::string key, double* dst, std::string help,
                   double min = -std::numeric_limits<double>::infinity(),
                   double max = std::numeric_limits<double>::infinity());
  OptionSet& Bool(std::string key, bool* dst, std::string help);
  OptionSet& String(std::string key, std::string* dst, std::string help);
  // A string restricted to `choices`.
  OptionSet& Choice(std::string key, std::string* dst, std::vector<std::string> choices,
                    std::string help);

  bool Has(std::string_view key) const;
  // True when `key` is bound to a bool (a CLI flag without a value).
  bool IsBool(std::string_view key) const;
  // The one-line help of `key` ("" when unknown).
  std::string Help(std::string_view key) const;
  std::vector<std::string> Keys() const;  // in binding order

  // Parses `value` into the field bound to `key`. Booleans accept
  // true/false/1/0/yes/no. `where` is attached to errors.
  Status Set(std::string_view key, std::string_view value, const ErrorLocation& where = {});
  // A flat YAML mapping of key: value (Ultralytics args.yaml style). Errors
  // name the file and line. Null values keep the default.
  Status ApplyYamlFile(const std::string& path);
  Status ApplyYamlText(const std::string& text, const std::string& origin);
  // `key=value` tokens, e.g. from the command line. Errors name the token.
  Status ApplyArgs(const std::vector<std::string>& args);

  // The effective configuration: every key with its current value, keys
  // sorted (canonical; hash it for dedup keys).
  nlohmann::json ToJson() const;
  // Applies a JSON object produced by ToJson() (e.g. a stored config).
  Status ApplyJson(const nlohmann::json& obj, const std::string& origin);
  // "key  (type, default)  help" lines for --help output.
  std::string HelpText() const;

 private:
  struct Entry;
  std::vector<Entry> entries_;
  const Entry* Find(std::string_view key) const;
};

// Levenshtein distance (bytes).
size_t EditDistance(std::string_view a, std::string_view b);
// The candidate closest to `key` when it is plausibly a typo, else "".
std::string ClosestMatch(std::string_view key, const std::vector<std::string>& candidates);
// Splits "key=value"; false when there is no '=' or the key is empty.
bool SplitKeyValue(std::string_view token, std::string* key, std::string* value);

}  // namespace kestrel
