// The job page's epoch-slider routes (docs/server.md "Jobs"), over
// app/job_media.h (`kestrel jobs samples`):
//   GET /api/jobs/{id}/samples          the epochs that have a samples file
//   GET /api/jobs/{id}/samples/{epoch}  one epoch's sample images with their
//                                       labels and predictions as JSON boxes
//                                       (the images themselves come from the
//                                       dataset image route, by SHA-256)
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the two routes to `router`; `ctx` must outlive it.
Status AddJobMediaRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
