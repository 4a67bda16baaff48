// Hyperparameter studies over HTTP (docs/server.md "Studies", issue 32):
// GET /api/studies (`kestrel tune list`), /api/studies/{name} (`tune show
// NAME --json`'s document), /api/studies/{name}/trials (the trials alone,
// for polling), POST /api/studies (`kestrel tune key=value …`) and POST
// /api/studies/{name}/stop (`tune stop`), over app/tune_study.h. Auth as
// every route: the writes need a read-write token.
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the routes above to `router`; `ctx` must outlive it.
Status AddStudyRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
