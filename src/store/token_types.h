// Records of API tokens as stored by MetadataStore (docs/server.md "Auth";
// migration 11): who may call `kestrel serve`'s routes. The store keeps only
// the SHA-256 of a token's secret, never the secret; making the secret,
// checking a presented token in constant time and resolving NAME|ID are the
// application layer's (app/tokens.h).
#pragma once

#include <cstdint>
#include <string>

namespace kestrel::store {

struct ApiTokenRecord {
  std::string id;            // 12 lowercase hex chars, random; part of the token text
  std::string name;          // the rules of a model name (IsValidModelName); unique among live tokens
  std::string secret_sha;    // sha256 hex of the secret; the secret itself is never stored
  bool read_only = false;    // may call read routes only
  int64_t created_ms = 0;    // Unix ms; from the caller
  int64_t last_used_ms = 0;  // 0 = never used; kept to about a minute (TouchApiToken)
  int64_t revoked_ms = 0;    // 0 = live
};

// A token id as AddApiToken accepts it: 12 lowercase hex chars.
bool IsValidApiTokenId(const std::string& id);

}  // namespace kestrel::store
