// Authentication of `kestrel serve` (docs/server.md "Auth"): one Authorizer
// for the router, so no handler checks tokens itself. A request carries
// `Authorization: Bearer <token>` (a header, never a cookie: a browser does
// not add it to a cross-site request, so there is nothing to forge);
// kWrite routes need a live read-write token, kRead routes a live token of
// either kind unless reads are public. A presented token is always checked,
// even where none is needed.
#pragma once

#include <string>

#include "server/router.h"
#include "store/metadata_store.h"

namespace kestrel::server {

// 401 `unauthenticated` (with WWW-Authenticate: Bearer) for a missing,
// malformed, unknown, wrong or revoked token; 403 `permission_denied` for a
// read-only token on a kWrite route; the store's error (503 ...) when it
// cannot answer. `meta` is borrowed (the server's I/O thread uses it).
Authorizer TokenAuthorizer(store::MetadataStore& meta, bool public_read);

// The token of an Authorization header "Bearer <token>" (scheme
// case-insensitive, RFC 7235, spaces around the token dropped); false for
// another scheme or no token.
[[nodiscard]] bool BearerToken(const std::string& header, std::string* token);
// The token a request to `route` presents: BearerToken, or, on the Label
// Studio routes (/ls/...: api_ls.h), also "Token <token>", the scheme
// Label Studio sends.
[[nodiscard]] bool RequestToken(const std::string& header, const Route& route, std::string* token);

}  // namespace kestrel::server
