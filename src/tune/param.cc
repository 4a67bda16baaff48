#include <algorithm>
#include <charconv>
#include <cmath>

#include "tune/space.h"

namespace kestrel::tune {

namespace {

std::string ShortestText(double v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

}  // namespace

double Param::InternalLow() const {
  switch (kind) {
    case ParamKind::kFloat:
      return log ? std::log(low) : low;
    case ParamKind::kInt:
      return log ? std::log(low - 0.5) : low - 0.5 * static_cast<double>(step);
    case ParamKind::kCategorical:
      return 0;
  }
  return 0;
}

double Param::InternalHigh() const {
  switch (kind) {
    case ParamKind::kFloat:
      return log ? std::log(high) : high;
    case ParamKind::kInt:
      return log ? std::log(high + 0.5) : high + 0.5 * static_cast<double>(step);
    case ParamKind::kCategorical:
      return static_cast<double>(choices.size()) - 1;
  }
  return 0;
}

double Param::FromInternal(double internal) const {
  if (kind == ParamKind::kCategorical) return internal;
  return log ? std::exp(internal) : internal;
}

double Param::ToInternal(double value) const {
  if (kind == ParamKind::kCategorical) return value;
  return log ? std::log(value) : value;
}

double Param::Snap(double internal) const {
  switch (kind) {
    case ParamKind::kFloat:
      // exp(log(high)) may land an ulp beyond high: clamp the value.
      return ToInternal(std::clamp(FromInternal(internal), low, high));
    case ParamKind::kInt: {
      const double s = static_cast<double>(step);
      double v = low + std::round((FromInternal(internal) - low) / s) * s;
      v = std::clamp(v, low, high);
      return ToInternal(v);
    }
    case ParamKind::kCategorical:
      return std::clamp(std::round(internal), 0.0, static_cast<double>(choices.size()) - 1);
  }
  return internal;
}

std::string Param::ValueText(double internal) const {
  switch (kind) {
    case ParamKind::kFloat:
      return ShortestText(FromInternal(internal));
    case ParamKind::kInt:
      return std::to_string(static_cast<int64_t>(std::llround(FromInternal(internal))));
    case ParamKind::kCategorical:
      return choices.at(static_cast<size_t>(internal));
  }
  return "";
}

}  // namespace kestrel::tune
