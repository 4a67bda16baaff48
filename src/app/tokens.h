// API tokens of `kestrel serve` (docs/server.md "Auth"), called by the CLI's
// `kestrel token create|list|revoke` and by the server's authorizer.
//
// A token is the text "kst_<id>_<secret>": the id (12 hex chars) finds its
// record, the secret (32 random bytes from OpenSSL's CSPRNG, 64 hex chars)
// proves it. The store keeps only SHA-256 of the secret's bytes; a
// presented token's hash is compared with the stored one in constant time.
// The token text exists once, in CreateToken's result: nothing can show it
// again.
//
// Errors about the request (a bad name) are kInvalidArgument located at
// {kRequestFile, 0, field} like the job use cases (app/jobs.h).
// Thread-safety: the functions borrow one MetadataStore (one per thread).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/metadata_store.h"
#include "store/token_types.h"

namespace kestrel::app {

// The prefix of every token text.
inline constexpr const char* kTokenPrefix = "kst_";

struct CreatedToken {
  store::ApiTokenRecord record;
  std::string token;  // "kst_<id>_<secret>": shown once, never stored
};
// A new live token. kInvalidArgument (field `name`) for a malformed name,
// kAlreadyExists when a live token has it.
Result<CreatedToken> CreateToken(store::MetadataStore& meta, const std::string& name, bool read_only,
                                 int64_t now_ms);

// Every token, revoked ones too, oldest first.
Result<std::vector<store::ApiTokenRecord>> ListTokens(store::MetadataStore& meta);

struct RevokeResult {
  store::ApiTokenRecord record;
  bool revoked = false;  // false: it was revoked before (nothing changed)
};
// `name_or_id`: the live token of that name, else the token with that id,
// else the newest revoked token of that name (revoked = false). kNotFound
// (field `token`) when none matches.
Result<RevokeResult> RevokeToken(store::MetadataStore& meta, const std::string& name_or_id, int64_t now_ms);

// The token's record when `token` is a live token's text. kInvalidArgument
// when the text is not a token's shape; kNotFound ("unknown token") when no
// token has the id or the secret does not match (one message for both);
// kFailedPrecondition when it matched a revoked token; store errors as the
// store returned them. Records the use (last_used) when the stored one is a
// minute old or more, so a busy client costs one write a minute.
Result<store::ApiTokenRecord> AuthenticateToken(store::MetadataStore& meta, const std::string& token,
                                                int64_t now_ms);

// Equality of two strings in time that depends on their lengths only.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

// The one JSON view of a token: id, name, read_only, created_ms,
// last_used_ms and revoked_ms (null when never / live). Never the secret
// or its hash.
nlohmann::json TokenJson(const store::ApiTokenRecord& t);
// `token create`: {"ok": true, "token": "kst_…", and TokenJson's keys}.
nlohmann::json CreatedTokenJson(const CreatedToken& c);

}  // namespace kestrel::app
