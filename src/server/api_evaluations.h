// Evaluations and comparisons over HTTP (docs/server.md "Evaluations and
// comparisons"), the web UI's compare page and box viewer: GET
// /api/evaluations (`kestrel evaluations list`), /api/evaluations/{id}
// (`kestrel evaluations show`), /api/evaluations/{id}/images (per image the
// labels, the stored detections and the compare "right" rule),
// /api/evaluations/{id}/confusion (the boxes behind one matrix cell) and GET
// /api/comparisons?a=&b= (`kestrel evaluations compare`), over
// app/evaluations.h. All reads.
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the routes above to `router`; `ctx` must outlive it.
Status AddEvaluationRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
