// The one way Kestrel serializes a JSON document. nlohmann::json::dump()
// throws type_error 316 on a string that is not valid UTF-8 (a file name, a
// dataset name or a command-line argument with stray bytes); DumpJson never
// throws for that: it writes every invalid byte as the text \xHH (see
// EscapeInvalidUtf8 in core/utf8.h), in strings and object keys alike, so the
// output is always valid UTF-8 JSON and no byte is silently dropped. Valid
// documents serialize exactly as dump() does.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace kestrel {

// Same arguments as nlohmann::json::dump(indent): -1 = compact.
std::string DumpJson(const nlohmann::json& j, int indent = -1);

// A copy of `j` with every string and key passed through EscapeInvalidUtf8.
nlohmann::json EscapeInvalidUtf8InJson(const nlohmann::json& j);

}  // namespace kestrel
