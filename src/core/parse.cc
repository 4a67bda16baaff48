#include "core/parse.h"

#include <charconv>
#include <cmath>
#include <string>

#include "core/utf8.h"

namespace kestrel {
namespace {

std::string Shown(std::string_view text) {
  constexpr size_t kMax = 64;
  std::string s = EscapeInvalidUtf8(text.substr(0, kMax));
  if (text.size() > kMax) s += "...";
  return "'" + s + "'";
}

std::string FormatDouble(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(v);
}

}  // namespace

Result<int64_t> ParseInt64(std::string_view text, const ErrorLocation& where, int64_t min, int64_t max,
                           std::string_view what) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  int64_t v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range && ptr == last) {
    return Status::InvalidArgument(Shown(text) + " is out of range " + range, where);
  }
  if (text.empty() || ec != std::errc() || ptr != last) {
    return Status::InvalidArgument("expected " + std::string(what) + " in " + range + ", got " + Shown(text),
                                   where);
  }
  if (v < min || v > max) {
    return Status::InvalidArgument(Shown(text) + " is out of range " + range, where);
  }
  return v;
}

Result<double> ParseFiniteDouble(std::string_view text, const ErrorLocation& where, double min, double max,
                                 std::string_view what) {
  const std::string range = "[" + FormatDouble(min) + ", " + FormatDouble(max) + "]";
  double v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(first, last, v);
  if (ec == std::errc::result_out_of_range && ptr == last) {
    return Status::InvalidArgument(Shown(text) + " is out of range " + range, where);
  }
  if (text.empty() || ec != std::errc() || ptr != last || !std::isfinite(v)) {
    return Status::InvalidArgument("expected " + std::string(what) + " in " + range + ", got " + Shown(text),
                                   where);
  }
  if (v < min || v > max) {
    return Status::InvalidArgument(Shown(text) + " is out of range " + range, where);
  }
  return v;
}

}  // namespace kestrel
