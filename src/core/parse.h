// Range-checked number parsing for text from users and files. Unlike
// std::stoi/stoll/stod these never throw, accept only the whole text (no
// leading spaces, no trailing junk, no '+'), and report an error that names
// the field and the allowed range, e.g.
//   command line: field 'data': '99999999999999999999' is out of range [1, 9223372036854775807]
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "core/status.h"

namespace kestrel {

// A base-10 integer in [min, max]. kInvalidArgument at `where` otherwise:
// "'<text>' is out of range [min, max]" or "expected <what> in [min, max],
// got '<text>'" (`what`: "an integer", "a version number", ...).
Result<int64_t> ParseInt64(std::string_view text, const ErrorLocation& where,
                           int64_t min = std::numeric_limits<int64_t>::min(),
                           int64_t max = std::numeric_limits<int64_t>::max(),
                           std::string_view what = "an integer");

// A finite decimal number (no inf/nan) in [min, max].
Result<double> ParseFiniteDouble(std::string_view text, const ErrorLocation& where,
                                 double min = -std::numeric_limits<double>::max(),
                                 double max = std::numeric_limits<double>::max(),
                                 std::string_view what = "a finite number");

}  // namespace kestrel
