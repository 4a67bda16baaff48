// GET /api/jobs/{id}/metrics (docs/server.md "Metric series"): a job's
// training curves from its metric events (app/metric_series.h), each series
// downsampled server-side to the chart's pixel columns without hiding a
// spike.
#pragma once

#include "core/status.h"
#include "server/api.h"
#include "server/router.h"

namespace kestrel::server {

// Adds the metric series route to `router`; `ctx` must outlive it.
Status AddMetricRoutes(Router& router, ApiContext& ctx);

}  // namespace kestrel::server
