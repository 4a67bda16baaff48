#include "app/tokens.h"

#include "app/jobs.h"
#include "core/hash.h"
#include "core/names.h"

namespace kestrel::app {
namespace {

using nlohmann::json;

constexpr size_t kIdHexChars = 12;
constexpr size_t kSecretHexChars = 64;  // 32 bytes
// last_used is recorded at most this often per token.
constexpr int64_t kTouchIntervalMs = 60'000;

int HexNibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// The bytes of lowercase hex text; false when it is not.
bool DecodeHex(const std::string& hex, std::string* bytes) {
  if (hex.size() % 2 != 0) return false;
  std::string out;
  out.reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = HexNibble(hex[i]);
    const int lo = HexNibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
  }
  *bytes = std::move(out);
  return true;
}

json MsOrNull(int64_t ms) { return ms > 0 ? json(ms) : json(nullptr); }

}  // namespace

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i)
    diff = static_cast<unsigned char>(diff |
                                      (static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i])));
  return diff == 0;
}

Result<CreatedToken> CreateToken(store::MetadataStore& meta, const std::string& name, bool read_only,
                                 int64_t now_ms) {
  KESTREL_RETURN_IF_ERROR(CheckName(NameKind::kToken, name, {kRequestFile, 0, "name"}));
  const std::string id = RandomHex(static_cast<int>(kIdHexChars / 2));
  const std::string secret_hex = RandomHex(static_cast<int>(kSecretHexChars / 2));
  std::string secret;
  if (id.size() != kIdHexChars || !DecodeHex(secret_hex, &secret) || secret.size() != kSecretHexChars / 2)
    return Status::Internal("the random generator failed; no token was made");
  store::ApiTokenRecord rec;
  rec.id = id;
  rec.name = name;
  rec.secret_sha = Sha256Hex(secret);
  rec.read_only = read_only;
  rec.created_ms = now_ms;
  auto added = meta.AddApiToken(rec);
  if (!added.IsOk()) {
    const Status& s = added.GetStatus();
    if (s.Code() == StatusCode::kAlreadyExists && s.Where().field == "name")
      return Status(s.Code(), s.Message(), {kRequestFile, 0, "name"});
    return s;
  }
  return CreatedToken{*added, kTokenPrefix + id + "_" + secret_hex};
}

Result<std::vector<store::ApiTokenRecord>> ListTokens(store::MetadataStore& meta) {
  return meta.ListApiTokens();
}

Result<RevokeResult> RevokeToken(store::MetadataStore& meta, const std::string& name_or_id, int64_t now_ms) {
  KESTREL_ASSIGN_OR_RETURN(auto all, meta.ListApiTokens());
  const store::ApiTokenRecord* live_by_name = nullptr;
  const store::ApiTokenRecord* by_id = nullptr;
  const store::ApiTokenRecord* revoked_by_name = nullptr;  // the newest (the list is oldest first)
  for (const auto& t : all) {
    if (t.name == name_or_id) (t.revoked_ms == 0 ? live_by_name : revoked_by_name) = &t;
    if (t.id == name_or_id) by_id = &t;
  }
  const store::ApiTokenRecord* pick =
      live_by_name != nullptr ? live_by_name : (by_id != nullptr ? by_id : revoked_by_name);
  if (pick == nullptr)
    return Status::NotFound("no token named or with id '" + name_or_id + "' (kestrel token list)",
                            {kRequestFile, 0, "token"});
  RevokeResult r;
  KESTREL_ASSIGN_OR_RETURN(r.record, meta.RevokeApiToken(pick->id, now_ms, &r.revoked));
  return r;
}

Result<store::ApiTokenRecord> AuthenticateToken(store::MetadataStore& meta, const std::string& token,
                                                int64_t now_ms) {
  const std::string prefix = kTokenPrefix;
  std::string secret;
  const bool shaped = token.size() == prefix.size() + kIdHexChars + 1 + kSecretHexChars &&
                      token.compare(0, prefix.size(), prefix) == 0 &&
                      token[prefix.size() + kIdHexChars] == '_' &&
                      store::IsValidApiTokenId(token.substr(prefix.size(), kIdHexChars)) &&
                      DecodeHex(token.substr(prefix.size() + kIdHexChars + 1), &secret);
  if (!shaped)
    return Status::InvalidArgument("not a Kestrel API token (kst_<id>_<secret>, from `kestrel token create`)",
                                   {kRequestFile, 0, "Authorization"});
  auto rec = meta.GetApiToken(token.substr(prefix.size(), kIdHexChars));
  const Status unknown = Status::NotFound("unknown token", {kRequestFile, 0, "Authorization"});
  if (!rec.IsOk()) return rec.GetStatus().Code() == StatusCode::kNotFound ? unknown : rec.GetStatus();
  if (!ConstantTimeEquals(Sha256Hex(secret), rec->secret_sha)) return unknown;
  if (rec->revoked_ms != 0)
    return Status::FailedPrecondition("token '" + rec->name + "' (id " + rec->id + ") was revoked",
                                      {kRequestFile, 0, "Authorization"});
  if (now_ms - rec->last_used_ms >= kTouchIntervalMs) {
    KESTREL_RETURN_IF_ERROR(meta.TouchApiToken(rec->id, now_ms));
    rec->last_used_ms = now_ms;
  }
  return rec;
}

json TokenJson(const store::ApiTokenRecord& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"read_only", t.read_only},
          {"created_ms", t.created_ms},
          {"last_used_ms", MsOrNull(t.last_used_ms)},
          {"revoked_ms", MsOrNull(t.revoked_ms)}};
}

json CreatedTokenJson(const CreatedToken& c) {
  json doc = TokenJson(c.record);
  doc["ok"] = true;
  doc["token"] = c.token;
  return doc;
}

}  // namespace kestrel::app
