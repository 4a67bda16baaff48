// The audit page's routes (docs/server.md "Dataset audits", issue 34), over
// app/dataset_audits.h:
//   GET /api/datasets/{name}/audits       the version's stored audits
//                                         (`kestrel dataset audit` stores
//                                         each), oldest first
//   GET /api/datasets/{name}/audits/{n}   one audit's items (n = its number,
//                                         "latest" the newest) filtered by
//                                         kind, sorted, paged, with the
//                                         labels and predictions of every
//                                         image the page shows
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the two routes to `router`; `ctx` must outlive it.
Status AddDatasetAuditRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
