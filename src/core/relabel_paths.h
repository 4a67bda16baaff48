// RelabelPaths: rewrite a folder's path inside a JSON document, e.g. the
// file paths of a validation report read from a folder that is gone once
// the request ends (an upload's unpacked zip). Kept out of core/json.h,
// which nearly every file includes.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace kestrel {

// Replaces every occurrence of `from` in the strings of `j` (values and
// object keys, recursively) with `to`. No-op when `from` is empty.
void RelabelPaths(nlohmann::json& j, const std::string& from, const std::string& to);

}  // namespace kestrel
