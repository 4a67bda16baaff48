// Records of config templates as stored by MetadataStore (docs/templates.md):
// one row per saved version of a named set of `kestrel submit` keys. The
// store numbers versions (v1, v2, ... per name) and keeps "saving what the
// newest version already holds adds nothing"; validating the keys and
// expanding a template into a job's arguments is the application layer's
// (app/templates.h).
#pragma once

#include <cstdint>
#include <string>

namespace kestrel::store {

struct TemplateRecord {
  std::string name;              // "fast-cpu"; versions count per name
  int64_t seq = 0;               // 1-based version within `name` ("v2"); assigned by AddTemplate
  int64_t created_ms = 0;        // Unix ms; from the caller
  std::string keys_json = "{}";  // JSON object key -> value text, as saved (canonical: sorted, compact)
  std::string content_sha;       // sha256 of keys_json; equal content = equal hash
};

struct TemplateFilter {
  std::string name;  // "" = every name
  int64_t seq = 0;   // 0 = every version (with name: one version)
};

// A template name: the rules of a model name (IsValidModelName): 1-128
// chars of letters, digits, '-', '_', '.', not starting with '.' or '-';
// so never '@' (NAME@vN), ':' (job:ID) or '/'.
bool IsValidTemplateName(const std::string& name);

}  // namespace kestrel::store
