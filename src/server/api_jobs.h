// The job list and a job's config diff over HTTP (docs/server.md "Job
// list", "Config diff"), the web UI's Jobs and job pages: GET /api/jobs
// (`kestrel jobs list`: filters, sort, cursor or offset paging, all in the
// store's query) and GET /api/jobs/{id}/diff?other=ID (`kestrel template
// diff job:ID job:OTHER`), over app/jobs.h and app/templates.h.
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the routes above to `router`; `ctx` must outlive it.
Status AddJobRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
