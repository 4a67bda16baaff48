// Typed options: each component keeps a plain struct with defaults in the
// struct (AugmentOptions, OptimizerOptions, ImportOptions...) and binds its
// fields into an OptionSet once:
//
//   struct ImportOptions {
//     double val_ratio = 0.2;  // fraction of images put in val when no split
//     void Bind(OptionSet& s) { s.Float("val_ratio", &val_ratio, "...", Range::Closed(0, 1)); }
//     Status Validate() const { return CheckBoundValues(*this); }
//   };
//
// The binding is the one place a key's name, type, range (with open or
// closed ends) and default are written: the OptionSet parses YAML files and
// Ultralytics-style `key=value` overrides into the bound fields, rejecting
// unknown keys by name with the closest valid key as a hint, and range/format
// errors with file, line and field; CheckValues() applies the same ranges to
// values set in code, so a component's Validate() holds only cross-field
// rules (never a second copy of a range); Describe()/KeyTable() produce the
// --help and docs key tables. It never "fixes" a value silently.
//
// Not thread-safe. Bound pointers must outlive the OptionSet.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace kestrel {

// A numeric range whose ends may each be open or closed. Infinite ends mean
// "unbounded" (NaN and infinities are never accepted as values).
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool lo_open = false;
  bool hi_open = false;

  static Range Closed(double lo, double hi) { return {lo, hi, false, false}; }     // [lo, hi]
  static Range ClosedOpen(double lo, double hi) { return {lo, hi, false, true}; }  // [lo, hi)
  static Range OpenClosed(double lo, double hi) { return {lo, hi, true, false}; }  // (lo, hi]
  static Range Open(double lo, double hi) { return {lo, hi, true, true}; }         // (lo, hi)
  static Range AtLeast(double lo) { return Closed(lo, std::numeric_limits<double>::infinity()); }
  static Range Above(double lo) { return Open(lo, std::numeric_limits<double>::infinity()); }
  static Range Any() { return {}; }

  // False for NaN and +-inf.
  bool Contains(double v) const;
  // "[0, 0.5)", ">= 1", "> 0", "any".
  std::string ToString() const;
};

// One key as documented: what --help and the docs tables print.
struct OptionInfo {
  std::string key;
  std::string type;   // int | float | floats (a comma-separated list) | bool | string | choice
  std::string range;  // "[0, 0.5)", ">= 1", "auto|SGD|Adam|AdamW", "" when any
  std::string default_text;
  std::string help;
};

class OptionSet {
 public:
  OptionSet();
  ~OptionSet();
  OptionSet(OptionSet&&) noexcept;
  OptionSet& operator=(OptionSet&&) noexcept;

  // Integers: the closed range [min, max]; text that overflows the field's
  // type is an error, never wrapped or clamped.
  OptionSet& Int(std::string key, int64_t* dst, std::string help,
                 int64_t min = std::numeric_limits<int64_t>::min(),
                 int64_t max = std::numeric_limits<int64_t>::max());
  OptionSet& Int(std::string key, int* dst, std::string help, int min = std::numeric_limits<int>::min(),
                 int max = std::numeric_limits<int>::max());
  // Finite numbers within `range` (NaN, inf and overflowing text rejected).
  OptionSet& Float(std::string key, double* dst, std::string help, Range range = Range::Any());
  // Shorthand for Range::Closed(min, max).
  OptionSet& Float(std::string key, double* dst, std::string help, double min, double max) {
    return Float(std::move(key), dst, std::move(help), Range::Closed(min, max));
  }
  // A non-empty comma-separated list of finite numbers, each within `range`
  // ("300,900,1800"); a JSON array in ToJson/ApplyJson.
  OptionSet& FloatList(std::string key, std::vector<double>* dst, std::string help,
                       Range range = Range::Any());
  OptionSet& Bool(std::string key, bool* dst, std::string help);
  OptionSet& String(std::string key, std::string* dst, std::string help);
  // A string restricted to `choices`.
  OptionSet& Choice(std::string key, std::string* dst, std::vector<std::string> choices, std::string help);

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

  // Checks the current value of every bound field against its binding
  // (range incl. open/closed ends and finiteness, choices): for values set in
  // code rather than parsed. kInvalidArgument naming the first bad key.
  Status CheckValues() const;

  // The effective configuration: every key with its current value, keys
  // sorted (canonical; hash it for dedup keys).
  nlohmann::json ToJson() const;
  // Applies a JSON object produced by ToJson() (e.g. a stored config).
  Status ApplyJson(const nlohmann::json& obj, const std::string& origin);
  // Every key in binding order with type, range, default and help; the
  // default is the field's value when it was bound.
  std::vector<OptionInfo> Describe() const;
  // "key=default  type range" + help lines for --help output.
  std::string HelpText() const;

 private:
  struct Entry;
  std::vector<Entry> entries_;
  const Entry* Find(std::string_view key) const;
};

// Runs `options.Validate()`'s range part: binds a copy of `options` and
// checks the copy's values against the binding (OptionSet::CheckValues).
template <class T>
Status CheckBoundValues(const T& options) {
  T copy = options;
  OptionSet set;
  copy.Bind(set);
  return set.CheckValues();
}

// A Markdown table (| key | type | range | default | description |) of
// `keys`, each listed once: the format of the key tables in docs/*.md.
std::string MarkdownKeyTable(const std::vector<OptionInfo>& keys);

// Levenshtein distance (bytes).
size_t EditDistance(std::string_view a, std::string_view b);
// The candidate closest to `key` when it is plausibly a typo, else "".
std::string ClosestMatch(std::string_view key, const std::vector<std::string>& candidates);
// Splits "key=value"; false when there is no '=' or the key is empty.
bool SplitKeyValue(std::string_view token, std::string* key, std::string* value);

}  // namespace kestrel
