// GET /api/runs (docs/server.md "Runs table"): a page of training runs with
// the config values and metric summaries the web UI's Runs page shows, in
// one request (app/run_table.h).
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the runs route to `router`; `ctx` must outlive it.
Status AddRunRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
