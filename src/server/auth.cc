#include "server/auth.h"

#include <cctype>
#include <chrono>

#include "app/tokens.h"
#include "core/env.h"

namespace kestrel::server {
namespace {

Response Unauthenticated(const std::string& message) {
  Response r = ErrorResponse(401, "unauthenticated", message, "Authorization");
  r.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"kestrel\"");
  return r;
}

// The token of an Authorization header "SCHEME <token>" (`scheme` lowercase,
// matched case-insensitively); false for another scheme or no token.
bool SchemeToken(const std::string& header, const std::string& scheme, std::string* token) {
  if (header.size() <= scheme.size() || header[scheme.size()] != ' ') return false;
  for (size_t i = 0; i < scheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(header[i])) != scheme[i]) return false;
  }
  const size_t b = header.find_first_not_of(' ', scheme.size());
  const size_t e = header.find_last_not_of(' ');
  if (b == std::string::npos) return false;
  *token = header.substr(b, e - b + 1);
  return true;
}

}  // namespace

bool BearerToken(const std::string& header, std::string* token) {
  return SchemeToken(header, "bearer", token);
}

bool RequestToken(const std::string& header, const Route& route, std::string* token) {
  if (BearerToken(header, token)) return true;
  return route.pattern.rfind("/ls/", 0) == 0 && SchemeToken(header, "token", token);
}

Authorizer TokenAuthorizer(store::MetadataStore& meta, bool public_read) {
  return [&meta, public_read](const Request& req, const Route& route) -> std::optional<Response> {
    const bool write = route.doc.access == Access::kWrite;
    const std::string header = req.Header("authorization");
    if (header.empty()) {
      if (!write && public_read) return std::nullopt;
      return Unauthenticated(req.method + " " + route.pattern +
                             " needs an API token: Authorization: Bearer <token> (kestrel token create)");
    }
    std::string token;
    if (!RequestToken(header, route, &token))
      return Unauthenticated(route.pattern.rfind("/ls/", 0) == 0
                                 ? "the Authorization header must be 'Bearer <token>' or 'Token <token>'"
                                 : "the Authorization header must be 'Bearer <token>'");
    auto rec = app::AuthenticateToken(meta, token, Env::Default().UnixMillis());
    if (!rec.IsOk()) {
      const StatusCode code = rec.GetStatus().Code();
      if (code == StatusCode::kInvalidArgument || code == StatusCode::kNotFound ||
          code == StatusCode::kFailedPrecondition)
        return Unauthenticated(rec.GetStatus().Message());
      return ErrorResponse(rec.GetStatus());  // the store cannot answer: 503 ...
    }
    if (write && rec->read_only) {
      return ErrorResponse(403, "permission_denied",
                           "token '" + rec->name + "' is read-only; " + req.method + " " + route.pattern +
                               " needs a read-write token",
                           "Authorization");
    }
    return std::nullopt;
  };
}

}  // namespace kestrel::server
