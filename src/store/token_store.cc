// API-token operations of SqlStore (docs/server.md "Auth"; migration 11).
// A live token's name is unique (the partial unique index
// api_tokens_live_name; the adding transaction checks first so the error
// names the token); a revoked token keeps its row, so `token list` shows it
// and its name may be given to a new token.
#include <algorithm>
#include <cctype>

#include "core/hash.h"
#include "store/internal/sql_store.h"

namespace kestrel::store {
namespace {

constexpr const char* kTokenColumns = "id, name, secret_sha, read_only, created_at, last_used_at, revoked_at";

ApiTokenRecord ReadToken(const SqlRow& r) {
  ApiTokenRecord t;
  t.id = r.Text(0);
  t.name = r.Text(1);
  t.secret_sha = r.Text(2);
  t.read_only = r.Int(3) != 0;
  t.created_ms = r.Int(4);
  t.last_used_ms = r.Int(5);
  t.revoked_ms = r.Int(6);
  return t;
}

}  // namespace

bool IsValidApiTokenId(const std::string& id) {
  return id.size() == 12 && std::all_of(id.begin(), id.end(), [](unsigned char c) {
           return std::isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

Result<ApiTokenRecord> SqlStore::AddApiToken(const ApiTokenRecord& rec) {
  if (!IsValidModelName(rec.name)) {
    return Status::InvalidArgument(
        "invalid token name '" + rec.name + "' (letters, digits, '-', '_', '.'; no '@', ':' or '/')",
        {"", 0, "name"});
  }
  if (!IsValidApiTokenId(rec.id))
    return Status::InvalidArgument("invalid token id '" + rec.id + "' (12 hex chars)", {"", 0, "id"});
  if (!IsSha256Hex(rec.secret_sha))
    return Status::InvalidArgument("token secret_sha is not a sha256 hex digest", {"", 0, "secret_sha"});
  ApiTokenRecord out = rec;
  out.last_used_ms = 0;
  out.revoked_ms = 0;
  Status st = InTransaction([&]() -> Status {
    KESTREL_ASSIGN_OR_RETURN(
        auto live, conn_->Query(std::string("SELECT id FROM api_tokens WHERE name = $1 AND revoked_at = 0") +
                                    conn_->ForUpdate(),
                                {rec.name}));
    if (!live.empty()) {
      return Status::AlreadyExists("a live token named '" + rec.name + "' exists (id " + live[0].Text(0) +
                                       "); revoke it first or choose another name",
                                   {"", 0, "name"});
    }
    KESTREL_ASSIGN_OR_RETURN(auto same_id, conn_->Query("SELECT id FROM api_tokens WHERE id = $1", {rec.id}));
    if (!same_id.empty())
      return Status::AlreadyExists("a token with id " + rec.id + " exists", {"", 0, "id"});
    return conn_
        ->Exec(std::string("INSERT INTO api_tokens(") + kTokenColumns + ") VALUES ($1, $2, $3, $4, $5, 0, 0)",
               {out.id, out.name, out.secret_sha, int64_t{out.read_only ? 1 : 0}, out.created_ms})
        .GetStatus();
  });
  if (!st.IsOk()) return st;
  return out;
}

Result<std::vector<ApiTokenRecord>> SqlStore::ListApiTokens() {
  KESTREL_ASSIGN_OR_RETURN(
      auto rows,
      conn_->Query(std::string("SELECT ") + kTokenColumns + " FROM api_tokens ORDER BY created_at, id", {}));
  std::vector<ApiTokenRecord> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back(ReadToken(r));
  return out;
}

Result<ApiTokenRecord> SqlStore::GetApiToken(const std::string& id) {
  KESTREL_ASSIGN_OR_RETURN(
      auto rows,
      conn_->Query(std::string("SELECT ") + kTokenColumns + " FROM api_tokens WHERE id = $1", {id}));
  if (rows.empty()) return Status::NotFound("no token with id " + id, {"", 0, "token"});
  return ReadToken(rows[0]);
}

Result<ApiTokenRecord> SqlStore::RevokeApiToken(const std::string& id, int64_t now_ms, bool* revoked) {
  ApiTokenRecord out;
  bool changed = false;
  Status st = InTransaction([&]() -> Status {
    changed = false;
    KESTREL_ASSIGN_OR_RETURN(
        auto rows, conn_->Query(std::string("SELECT ") + kTokenColumns + " FROM api_tokens WHERE id = $1" +
                                    conn_->ForUpdate(),
                                {id}));
    if (rows.empty()) return Status::NotFound("no token with id " + id, {"", 0, "token"});
    out = ReadToken(rows[0]);
    if (out.revoked_ms != 0) return {};
    out.revoked_ms = now_ms > 0 ? now_ms : 1;
    changed = true;
    return conn_->Exec("UPDATE api_tokens SET revoked_at = $1 WHERE id = $2", {out.revoked_ms, id})
        .GetStatus();
  });
  if (!st.IsOk()) return st;
  if (revoked != nullptr) *revoked = changed;
  return out;
}

Status SqlStore::TouchApiToken(const std::string& id, int64_t now_ms) {
  return conn_
      ->Exec("UPDATE api_tokens SET last_used_at = $1 WHERE id = $2 AND last_used_at < $1", {now_ms, id})
      .GetStatus();
}

}  // namespace kestrel::store
