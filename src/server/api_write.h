// The write routes of `kestrel serve` (docs/server.md "Writes"): submit,
// cancel and retry a job, tag and untag a model. JSON bodies; the same
// application-layer calls, checks and error texts as the CLI commands, and
// the same JSON views as their --json output. Every route is Access::kWrite:
// the router's authorizer (auth.h) lets only read-write tokens through.
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds POST /api/jobs, POST /api/jobs/{id}/cancel, POST /api/jobs/{id}/retry,
// POST /api/models/{ref}/tags, DELETE /api/models/{ref}/tags/{tag} and
// POST /api/datasets/import (from the data roots only, data_roots.h).
Status AddWriteRoutes(Router& r, ApiContext& ctx);

}  // namespace kestrel::server
