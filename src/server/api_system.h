// The job system's health over HTTP (docs/server.md "System"), the web UI's
// System page: GET /api/workers (`kestrel workers`), GET /api/breaker
// (`kestrel breaker show`), POST /api/breaker/reset (`kestrel breaker
// reset`, a write) over app/system.h, and GET /api/token (which token the
// request carries and whether it may write, so the UI can say why a button
// is off). Availability and failures by reason are GET /api/stats (api.h).
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the routes above to `router`; `ctx` must outlive it.
Status AddSystemRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
