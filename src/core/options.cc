#include "core/options.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>
#include <variant>

#include "core/env.h"

namespace kestrel {

struct OptionSet::Entry {
  std::string key;
  std::string help;
  std::variant<int64_t*, int*, double*, bool*, std::string*, std::vector<double>*> dst;
  Range range;                 // float keys
  int64_t imin = 0, imax = 0;  // int keys, inclusive
  std::vector<std::string> choices;
  std::string default_text;
};

namespace {

// Shortest text that reads back to the same double ("0.9", not "0.90000000000000002").
std::string FormatDouble(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

bool ParseBool(std::string_view v, bool* out) {
  std::string s(v);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "true" || s == "1" || s == "yes" || s == "on") {
    *out = true;
    return true;
  }
  if (s == "false" || s == "0" || s == "no" || s == "off") {
    *out = false;
    return true;
  }
  return false;
}

std::string Trim(std::string_view v) {
  size_t b = 0, e = v.size();
  while (b < e && std::isspace(static_cast<unsigned char>(v[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(v[e - 1]))) --e;
  return std::string(v.substr(b, e - b));
}

// The closed integer range [lo, hi] as text; the limits of T are unbounded.
template <class T>
std::string IntRangeText(int64_t lo, int64_t hi) {
  const bool no_lo = lo <= static_cast<int64_t>(std::numeric_limits<T>::min());
  const bool no_hi = hi >= static_cast<int64_t>(std::numeric_limits<T>::max());
  if (no_lo && no_hi) return "";
  if (no_hi) return ">= " + std::to_string(lo);
  if (no_lo) return "<= " + std::to_string(hi);
  return "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

std::string JoinDoubles(const std::vector<double>& v) {
  std::string out;
  for (double d : v) out += (out.empty() ? "" : ",") + FormatDouble(d);
  return out;
}

Status RangeError(const std::string& shown, const std::string& range, const ErrorLocation& where) {
  return Status::InvalidArgument("value " + shown + " is outside the allowed range " + range, where);
}

// Decimal integer text into T: no wrap-around, no trailing text, in [lo, hi].
template <class T>
Result<T> ParseInteger(const std::string& value, int64_t lo, int64_t hi, const ErrorLocation& where) {
  T v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec == std::errc::result_out_of_range && ptr == value.data() + value.size()) {
    std::string range = IntRangeText<T>(lo, hi);
    if (range.empty()) {
      range = "[" + std::to_string(std::numeric_limits<T>::min()) + ", " +
              std::to_string(std::numeric_limits<T>::max()) + "]";
    }
    return RangeError(value, range, where);
  }
  if (ec != std::errc() || ptr != value.data() + value.size()) {
    return Status::InvalidArgument("expected an integer, got '" + value + "'", where);
  }
  if (static_cast<int64_t>(v) < lo || static_cast<int64_t>(v) > hi) {
    return RangeError(value, IntRangeText<T>(lo, hi), where);
  }
  return v;
}

}  // namespace

bool Range::Contains(double v) const {
  if (!std::isfinite(v)) return false;
  if (lo_open ? !(v > lo) : !(v >= lo)) return false;
  if (hi_open ? !(v < hi) : !(v <= hi)) return false;
  return true;
}

std::string Range::ToString() const {
  const bool no_lo = std::isinf(lo) && lo < 0;
  const bool no_hi = std::isinf(hi) && hi > 0;
  if (no_lo && no_hi) return "";
  if (no_hi) return (lo_open ? "> " : ">= ") + FormatDouble(lo);
  if (no_lo) return (hi_open ? "< " : "<= ") + FormatDouble(hi);
  return (lo_open ? "(" : "[") + FormatDouble(lo) + ", " + FormatDouble(hi) + (hi_open ? ")" : "]");
}

OptionSet::OptionSet() = default;
OptionSet::~OptionSet() = default;
OptionSet::OptionSet(OptionSet&&) noexcept = default;
OptionSet& OptionSet::operator=(OptionSet&&) noexcept = default;

OptionSet& OptionSet::Int(std::string key, int64_t* dst, std::string help, int64_t min, int64_t max) {
  Entry e{std::move(key), std::move(help), dst, {}, min, max, {}, std::to_string(*dst)};
  entries_.push_back(std::move(e));
  return *this;
}
OptionSet& OptionSet::Int(std::string key, int* dst, std::string help, int min, int max) {
  Entry e{std::move(key), std::move(help), dst, {}, min, max, {}, std::to_string(*dst)};
  entries_.push_back(std::move(e));
  return *this;
}
OptionSet& OptionSet::Float(std::string key, double* dst, std::string help, Range range) {
  Entry e{std::move(key), std::move(help), dst, range, 0, 0, {}, FormatDouble(*dst)};
  entries_.push_back(std::move(e));
  return *this;
}
OptionSet& OptionSet::FloatList(std::string key, std::vector<double>* dst, std::string help, Range range) {
  Entry e{std::move(key), std::move(help), dst, range, 0, 0, {}, JoinDoubles(*dst)};
  entries_.push_back(std::move(e));
  return *this;
}
OptionSet& OptionSet::Bool(std::string key, bool* dst, std::string help) {
  Entry e{std::move(key), std::move(help), dst, {}, 0, 0, {}, *dst ? "true" : "false"};
  entries_.push_back(std::move(e));
  return *this;
}
OptionSet& OptionSet::String(std::string key, std::string* dst, std::string help) {
  Entry e{std::move(key), std::move(help), dst, {}, 0, 0, {}, *dst};
  entries_.push_back(std::move(e));
  return *this;
}
OptionSet& OptionSet::Choice(std::string key, std::string* dst, std::vector<std::string> choices,
                             std::string help) {
  Entry e{std::move(key), std::move(help), dst, {}, 0, 0, std::move(choices), *dst};
  entries_.push_back(std::move(e));
  return *this;
}

const OptionSet::Entry* OptionSet::Find(std::string_view key) const {
  for (const auto& e : entries_) {
    if (e.key == key) return &e;
  }
  return nullptr;
}

bool OptionSet::Has(std::string_view key) const { return Find(key) != nullptr; }

bool OptionSet::IsBool(std::string_view key) const {
  const Entry* e = Find(key);
  return e != nullptr && std::holds_alternative<bool*>(e->dst);
}

std::string OptionSet::Help(std::string_view key) const {
  const Entry* e = Find(key);
  if (e == nullptr) return "";
  return e->help + " (default " + e->default_text + ")";
}

std::vector<std::string> OptionSet::Keys() const {
  std::vector<std::string> keys;
  for (const auto& e : entries_) keys.push_back(e.key);
  return keys;
}

Status OptionSet::Set(std::string_view key_in, std::string_view value_in, const ErrorLocation& where_in) {
  std::string key = Trim(key_in);
  std::string value = Trim(value_in);
  ErrorLocation where = where_in;
  where.field = key;
  const Entry* e = Find(key);
  if (e == nullptr) {
    std::string msg = "unknown option '" + key + "'";
    std::string hint = ClosestMatch(key, Keys());
    if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
    return Status::InvalidArgument(msg, where);
  }
  if (auto* p = std::get_if<int64_t*>(&e->dst)) {
    KESTREL_ASSIGN_OR_RETURN(int64_t v, ParseInteger<int64_t>(value, e->imin, e->imax, where));
    **p = v;
  } else if (auto* p = std::get_if<int*>(&e->dst)) {
    KESTREL_ASSIGN_OR_RETURN(int v, ParseInteger<int>(value, e->imin, e->imax, where));
    **p = v;
  } else if (auto* p = std::get_if<double*>(&e->dst)) {
    double v = 0;
    auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec == std::errc::result_out_of_range) {
      return Status::InvalidArgument(
          "'" + value + "' does not fit a double (allowed: " + e->range.ToString() + ")", where);
    }
    if (ec != std::errc() || ptr != value.data() + value.size() || !std::isfinite(v)) {
      return Status::InvalidArgument("expected a finite number, got '" + value + "'", where);
    }
    if (!e->range.Contains(v)) return RangeError(value, e->range.ToString(), where);
    **p = v;
  } else if (auto* p = std::get_if<std::vector<double>*>(&e->dst)) {
    std::vector<double> list;
    size_t begin = 0;
    while (true) {
      const size_t comma = value.find(',', begin);
      const std::string item = Trim(std::string_view(value).substr(
          begin, comma == std::string::npos ? std::string::npos : comma - begin));
      double v = 0;
      auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
      if (ec != std::errc() || ptr != item.data() + item.size() || !std::isfinite(v)) {
        return Status::InvalidArgument(
            "expected a comma-separated list of finite numbers like 300,900,1800, got '" + value + "'",
            where);
      }
      if (!e->range.Contains(v)) return RangeError(item, e->range.ToString(), where);
      list.push_back(v);
      if (comma == std::string::npos) break;
      begin = comma + 1;
    }
    **p = std::move(list);
  } else if (auto* p = std::get_if<bool*>(&e->dst)) {
    bool v = false;
    if (!ParseBool(value, &v)) {
      return Status::InvalidArgument("expected true or false, got '" + value + "'", where);
    }
    **p = v;
  } else if (auto* p = std::get_if<std::string*>(&e->dst)) {
    if (!e->choices.empty() && std::find(e->choices.begin(), e->choices.end(), value) == e->choices.end()) {
      std::string list;
      for (const auto& c : e->choices) list += (list.empty() ? "" : ", ") + c;
      std::string msg = "'" + value + "' is not one of: " + list;
      std::string hint = ClosestMatch(value, e->choices);
      if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
      return Status::InvalidArgument(msg, where);
    }
    **p = value;
  }
  return {};
}

Status OptionSet::ApplyYamlText(const std::string& text, const std::string& origin) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& ex) {
    return Status::InvalidArgument("malformed YAML: " + ex.msg, {origin, ex.mark.line + 1, ""});
  }
  if (root.IsNull()) return {};
  if (!root.IsMap()) {
    return Status::InvalidArgument("expected a mapping of key: value", {origin, root.Mark().line + 1, ""});
  }
  for (auto it = root.begin(); it != root.end(); ++it) {
    std::string key = it->first.as<std::string>();
    ErrorLocation where{origin, it->first.Mark().line + 1, key};
    const YAML::Node& v = it->second;
    if (v.IsNull()) {
      if (!Has(key)) KESTREL_RETURN_IF_ERROR(Set(key, "", where));  // reports unknown key
      continue;
    }
    if (v.IsSequence()) {
      // A list of scalars (the reference's `freeze: [0, 1, 2]`, `classes:
      // [0, 2]`) is the comma-separated text the key parses.
      std::string text;
      for (const auto& item : v) {
        if (!item.IsScalar()) {
          return Status::InvalidArgument("expected a list of single values, got a nested list or mapping",
                                         where);
        }
        text += (text.empty() ? "" : ",") + item.Scalar();
      }
      // A text key keeps the brackets: freeze: [3] is layer 3, freeze: 3 the first three.
      const Entry* e = Find(key);
      if (e != nullptr && std::holds_alternative<std::string*>(e->dst)) text = "[" + text + "]";
      KESTREL_RETURN_IF_ERROR(Set(key, text, where));
      continue;
    }
    if (!v.IsScalar()) {
      return Status::InvalidArgument("expected a single value, got a list or mapping", where);
    }
    KESTREL_RETURN_IF_ERROR(Set(key, v.Scalar(), where));
  }
  return {};
}

Status OptionSet::ApplyYamlFile(const std::string& path) {
  KESTREL_ASSIGN_OR_RETURN(std::string text, Env::Default().ReadFile(path, 16 << 20));
  return ApplyYamlText(text, path);
}

Status OptionSet::ApplyArgs(const std::vector<std::string>& args) {
  for (const auto& a : args) {
    std::string k, v;
    if (!SplitKeyValue(a, &k, &v)) {
      return Status::InvalidArgument("expected key=value, got '" + a + "'", {"command line", 0, ""});
    }
    KESTREL_RETURN_IF_ERROR(Set(k, v, {"command line", 0, ""}));
  }
  return {};
}

nlohmann::json OptionSet::ToJson() const {
  nlohmann::json j = nlohmann::json::object();  // std::map-backed: keys sorted
  for (const auto& e : entries_) {
    if (auto* p = std::get_if<int64_t*>(&e.dst))
      j[e.key] = **p;
    else if (auto* p = std::get_if<int*>(&e.dst))
      j[e.key] = **p;
    else if (auto* p = std::get_if<double*>(&e.dst))
      j[e.key] = **p;
    else if (auto* p = std::get_if<bool*>(&e.dst))
      j[e.key] = **p;
    else if (auto* p = std::get_if<std::vector<double>*>(&e.dst))
      j[e.key] = **p;
    else
      j[e.key] = *std::get<std::string*>(e.dst);
  }
  return j;
}

Status OptionSet::ApplyJson(const nlohmann::json& obj, const std::string& origin) {
  if (!obj.is_object()) return Status::InvalidArgument("expected a JSON object", {origin});
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    std::string text;
    if (it.value().is_string())
      text = it.value().get<std::string>();
    else if (it.value().is_boolean())
      text = it.value().get<bool>() ? "true" : "false";
    else if (it.value().is_number_integer())
      text = std::to_string(it.value().get<int64_t>());
    else if (it.value().is_number())
      text = FormatDouble(it.value().get<double>());
    else if (it.value().is_array()) {
      for (const auto& item : it.value()) {
        if (!item.is_number())
          return Status::InvalidArgument("expected a list of numbers", {origin, 0, it.key()});
        text += (text.empty() ? "" : ",") + FormatDouble(item.get<double>());
      }
      // A text key (freeze, classes) keeps the list form: [3] is not 3.
      const Entry* e = Find(it.key());
      if (e != nullptr && std::holds_alternative<std::string*>(e->dst)) text = "[" + text + "]";
    } else
      return Status::InvalidArgument("unsupported value type", {origin, 0, it.key()});
    KESTREL_RETURN_IF_ERROR(Set(it.key(), text, {origin, 0, ""}));
  }
  return {};
}

Status OptionSet::CheckValues() const {
  for (const auto& e : entries_) {
    const ErrorLocation where{"", 0, e.key};
    if (auto* p = std::get_if<int64_t*>(&e.dst)) {
      if (**p < e.imin || **p > e.imax)
        return RangeError(std::to_string(**p), IntRangeText<int64_t>(e.imin, e.imax), where);
    } else if (auto* p = std::get_if<int*>(&e.dst)) {
      if (**p < e.imin || **p > e.imax)
        return RangeError(std::to_string(**p), IntRangeText<int>(e.imin, e.imax), where);
    } else if (auto* p = std::get_if<double*>(&e.dst)) {
      if (!e.range.Contains(**p)) return RangeError(FormatDouble(**p), e.range.ToString(), where);
    } else if (auto* p = std::get_if<std::vector<double>*>(&e.dst)) {
      if ((*p)->empty()) return Status::InvalidArgument("needs at least one value", where);
      for (double v : **p) {
        if (!e.range.Contains(v)) return RangeError(FormatDouble(v), e.range.ToString(), where);
      }
    } else if (auto* p = std::get_if<std::string*>(&e.dst)) {
      if (!e.choices.empty() && std::find(e.choices.begin(), e.choices.end(), **p) == e.choices.end()) {
        std::string list;
        for (const auto& c : e.choices) list += (list.empty() ? "" : ", ") + c;
        return Status::InvalidArgument("'" + **p + "' is not one of: " + list, where);
      }
    }
  }
  return {};
}

std::vector<OptionInfo> OptionSet::Describe() const {
  std::vector<OptionInfo> out;
  for (const auto& e : entries_) {
    OptionInfo info{e.key, "", "", e.default_text, e.help};
    if (std::holds_alternative<int64_t*>(e.dst)) {
      info.type = "int";
      info.range = IntRangeText<int64_t>(e.imin, e.imax);
    } else if (std::holds_alternative<int*>(e.dst)) {
      info.type = "int";
      info.range = IntRangeText<int>(e.imin, e.imax);
    } else if (std::holds_alternative<double*>(e.dst)) {
      info.type = "float";
      info.range = e.range.ToString();
    } else if (std::holds_alternative<std::vector<double>*>(e.dst)) {
      info.type = "floats";
      info.range = e.range.ToString();
    } else if (std::holds_alternative<bool*>(e.dst)) {
      info.type = "bool";
    } else if (!e.choices.empty()) {
      info.type = "choice";
      for (size_t i = 0; i < e.choices.size(); ++i) info.range += (i ? "|" : "") + e.choices[i];
    } else {
      info.type = "string";
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::string OptionSet::HelpText() const {
  std::string out;
  for (const auto& k : Describe()) {
    out +=
        "  " + k.key + "=" + k.default_text + "  (" + k.type + (k.range.empty() ? "" : " " + k.range) + ")\n";
    out += "      " + k.help + "\n";
  }
  return out;
}

std::string MarkdownKeyTable(const std::vector<OptionInfo>& keys) {
  auto cell = [](const std::string& text) {
    std::string out;
    for (char c : text) {
      if (c == '|')
        out += "\\|";
      else
        out += c;
    }
    return out;
  };
  auto code = [&](const std::string& text) { return text.empty() ? std::string() : "`" + cell(text) + "`"; };
  std::string out = "| key | type | range | default | description |\n|---|---|---|---|---|\n";
  for (const auto& k : keys) {
    out += "| `" + cell(k.key) + "` | " + k.type + " | " + code(k.range) + " | " + code(k.default_text) +
           " | " + cell(k.help) + " |\n";
  }
  return out;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

// EditDistance with a swap of two adjacent bytes as one edit (optimal
// string alignment): "lsit" is one edit from "list", as a typist sees it.
size_t TypoDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] =
          std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::string ClosestMatch(std::string_view key, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = TypoDistance(key, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  // Two edits turn any four-letter word into another ("time" -> "name"):
  // keys of up to 4 bytes get one edit (a swap counts as one), longer ones
  // max(2, length / 3).
  const size_t allowed = key.size() <= 4 ? 1 : std::max<size_t>(2, key.size() / 3);
  return best_d <= allowed ? best : "";
}

bool SplitKeyValue(std::string_view token, std::string* key, std::string* value) {
  size_t eq = token.find('=');
  if (eq == std::string_view::npos || eq == 0) return false;
  *key = Trim(token.substr(0, eq));
  *value = std::string(token.substr(eq + 1));
  return !key->empty();
}

}  // namespace kestrel
