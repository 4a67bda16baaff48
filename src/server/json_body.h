// The one reader of JSON request bodies: every route that takes a JSON body
// (the writes in api_write.cc, POST /api/breaker/reset in api_system.cc)
// reads it here, so no body can throw out of a handler (issue 26: an
// nlohmann out_of_range on `1e400` used to end the process) and every route
// refuses the same inputs with the same words (docs/server.md "Errors").
// No sockets, no LibTorch: fuzzed alone (tests/fuzz/json_body_fuzz.cc).
//
// Thread-safety: free functions over their arguments; never throw.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace kestrel::server {

// The deepest nesting a body may have: the top-level value is depth 1, a
// value inside it depth 2, ... Deeper bodies are refused before any
// document is built (the parse itself is iterative).
inline constexpr int kMaxJsonBodyDepth = 64;

// `body` as one JSON value: RFC 8259 strictly (no NaN/Infinity, comments or
// bytes after the value; strings valid UTF-8), at most kMaxJsonBodyDepth
// levels deep, no key twice in one object (which value would win is
// ambiguous), and every number representable as it is written: an integer
// (no '.', 'e') within int64/uint64, a fraction finite and not a non-zero
// literal that rounds to 0 (1e-400). A blank body is an error too.
// Errors: kInvalidArgument at {"request", 0, FIELD}, FIELD the dotted path
// of the offending value ("keys.epochs"; "body" for the whole body); the
// message names the path, quotes at most ~60 bytes of the input and carries
// the byte offset of a syntax error.
Result<nlohmann::json> ParseJsonBody(std::string_view body);

// A route's body: a JSON object (ParseJsonBody) with no keys but `allowed`
// (400 naming the first other key, field = that key). A blank body (empty
// or only whitespace) is {} when `required` is false, an error (field
// "body") when it is true.
Result<nlohmann::json> ReadJsonObjectBody(std::string_view body, const std::vector<std::string>& allowed,
                                          bool required);

}  // namespace kestrel::server
