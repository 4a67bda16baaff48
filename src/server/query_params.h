// A request's query parameters as the read routes take them: text as sent
// ("" when absent) and integers parsed with the CLI's texts, errors located
// at {app::kRequestFile, 0, NAME} so the error document names the parameter.
// Ranges beyond int32 are the use case's to check (its message names the
// bounds); a parameter given twice keeps its last value (router.h).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "core/status.h"
#include "server/router.h"

namespace kestrel::server {

// The parameter's decoded text, "" when absent.
std::string QueryText(const Request& req, const std::string& name);

// The parameter as an integer in [min, max] (`what` names the kind in the
// error: "expected <what> in [min, max], got '<text>'"); `fallback` when absent.
Result<int64_t> QueryInt(const Request& req, const std::string& name, int64_t fallback,
                         int64_t min = std::numeric_limits<int32_t>::min(),
                         int64_t max = std::numeric_limits<int32_t>::max(),
                         const std::string& what = "an integer");

// Each named parameter, in the order given, into its destination as QueryInt
// with the int32 range (a destination keeps its value when the parameter is
// absent); the first malformed one is the error. For a page:
// QueryInts(req, {{"offset", &r.offset}, {"limit", &r.limit}}).
Status QueryInts(const Request& req, std::initializer_list<std::pair<const char*, int64_t*>> params);

// A job id (path segment or parameter `field`): a positive integer, the
// error at {app::kRequestFile, 0, field}.
Result<int64_t> JobIdText(const std::string& text, const std::string& field = "id");

}  // namespace kestrel::server
