// Text hygiene for everything the dataset readers hand on: findings, class
// names, manifest paths and Status messages end up in nlohmann::json, whose
// dump() aborts the program (type_error 316) on invalid UTF-8 (issue 10).
// These helpers keep such bytes visible but harmless.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "core/utf8.h"

namespace kestrel::data {

// IsValidUtf8, EscapeInvalidUtf8 and EscapeForDisplay come from core/utf8.h
// (one UTF-8 decoder for the whole program); what follows is what only the
// dataset readers need.

// "UTF-16 LE", "UTF-16 BE", "UTF-32 LE" or "UTF-32 BE" when `text` starts with
// that byte-order mark (or, without a mark, looks like UTF-16/32 because it
// has NUL bytes among its first four), else nullptr. A UTF-8 BOM is not
// reported (the readers skip it).
const char* WideEncodingOf(std::string_view text);

// OK, or InvalidArgument naming `file` when `text` is UTF-16/32 encoded:
// "<what> is UTF-16 LE encoded (byte-order mark FF FE); save it as UTF-8".
Status RequireNarrowEncoding(std::string_view text, const std::string& file, const char* what);

// Why `rel_path` cannot be a manifest key, or nullopt when it can:
// {"path.not_utf8", "file name is not valid UTF-8: 'a\xFF.jpg'"} or
// {"path.control_char", "file name contains a NUL byte (\x00): ..."}.
// Manifest keys are written one per line, tab-separated, so control
// characters would make two different manifests print the same text.
struct PathProblem {
  std::string check;
  std::string message;
};
std::optional<PathProblem> CheckManifestPath(std::string_view rel_path);

// The same status with message, file and field made valid UTF-8.
Status SanitizeStatus(const Status& s);
template <typename T>
Result<T> SanitizeResult(Result<T> r) {
  if (r.IsOk()) return r;
  return SanitizeStatus(r.GetStatus());
}

}  // namespace kestrel::data
