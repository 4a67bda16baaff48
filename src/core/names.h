// The names people give what Kestrel stores: datasets, registered models,
// templates, API tokens and model tags. One table of rules (characters and
// a length bound) and one error wording, checked where each is created
// (the app use cases: app::Datasets for datasets; the store again as the
// last line), so the CLI and the HTTP API refuse the same names with the same
// words (docs/server.md "Names"). Issue 26: a 100,000-character dataset name
// was stored, listed and drawn.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/status.h"

namespace kestrel {

enum class NameKind {
  kDataset,   // non-empty UTF-8 without '@', '/', spaces or control characters
  kModel,     // letters, digits, '-', '_', '.'; not starting with '.' or '-'
  kTemplate,  // the rules of a model name
  kToken,     // the rules of a model name
  kTag,       // lowercase letters, digits, '-', '_', '.'; a letter first
};

inline constexpr size_t kMaxNameChars = 128;  // datasets, models, templates, tokens
inline constexpr size_t kMaxTagChars = 64;    // model tags

// The most characters a name of `kind` may have (Unicode code points: only
// dataset names may hold more than ASCII).
size_t MaxNameChars(NameKind kind);

// Whether `name` follows the rules of `kind` (characters and length).
bool IsValidName(NameKind kind, std::string_view name);

// OK, or kInvalidArgument at `where` naming the kind ("dataset name"), the
// name (escaped, cut to 60 bytes) and the rule it breaks: "is 100000
// characters long; at most 128", or the characters it may hold.
Status CheckName(NameKind kind, std::string_view name, const ErrorLocation& where);

}  // namespace kestrel
