// The write routes of `kestrel serve` (docs/server.md "Writes"): submit,
// cancel and retry a job, tag and untag a model. JSON bodies; the same
// application-layer calls, checks and error texts as the CLI commands, and
// the same JSON views as their --json output. Every route is Access::kWrite:
// the router's authorizer (auth.h) lets only read-write tokens through.
#pragma once

#include <string>

#include "app/datasets.h"
#include "core/env.h"
#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds POST /api/jobs, POST /api/jobs/{id}/cancel, POST /api/jobs/{id}/retry,
// POST /api/models/{ref}/tags, DELETE /api/models/{ref}/tags/{tag} and
// POST /api/datasets/import (from the data roots only, data_roots.h).
Status AddWriteRoutes(Router& r, ApiContext& ctx);

// `dataset import PATH --name NAME` of a `path` the caller has checked,
// read through `env`: 201 (new version) or 200 (identical content stored
// already) with the command's --json document, else its error document
// plus "report" (the validation report) when the source was read. Shared by
// POST /api/datasets/import and POST /api/datasets/upload.
Response ImportDatasetResponse(ApiContext& ctx, Env& env, const std::string& path, const std::string& name,
                               const data::ImportOptions& opts);

}  // namespace kestrel::server
