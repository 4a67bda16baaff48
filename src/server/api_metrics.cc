#include "server/api_metrics.h"

#include <limits>
#include <string>

#include "app/jobs.h"
#include "app/metric_series.h"
#include "core/parse.h"

namespace kestrel::server {
namespace {

// The query of the route: width, from, to, series (comma-separated names).
Result<app::MetricsQuery> ParseMetricsQuery(const Request& req) {
  app::MetricsQuery q;
  auto it = req.query.find("width");
  if (it != req.query.end()) {
    KESTREL_ASSIGN_OR_RETURN(q.width, ParseInt64(it->second, {app::kRequestFile, 0, "width"}, 1, 100'000,
                                                 "a width in pixel columns"));
  }
  for (const char* bound : {"from", "to"}) {
    it = req.query.find(bound);
    if (it == req.query.end()) continue;
    KESTREL_ASSIGN_OR_RETURN(int64_t v, ParseInt64(it->second, {app::kRequestFile, 0, bound}, 0,
                                                   std::numeric_limits<int64_t>::max(), "an epoch or step"));
    (std::string(bound) == "from" ? q.from : q.to) = v;
  }
  if (q.from && q.to && *q.to < *q.from)
    return Status::InvalidArgument(
        "to (" + std::to_string(*q.to) + ") is before from (" + std::to_string(*q.from) + ")",
        {app::kRequestFile, 0, "to"});
  it = req.query.find("series");
  if (it != req.query.end()) {
    size_t start = 0;
    const std::string& list = it->second;
    while (start <= list.size()) {
      const size_t comma = std::min(list.find(',', start), list.size());
      if (comma > start) q.names.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  return q;
}

}  // namespace

Status AddMetricRoutes(Router& router, ApiContext& ctx) {
  return router.Add(
      "GET", "/api/jobs/{id}/metrics",
      {"A job's training curves from its metric events, each series downsampled to `width` columns "
       "(min and max per column, so spikes stay visible; raw points when they fit) (docs/server.md)",
       {{"width", "pixel columns, 1..100000 (default 1000): at most 2 points per column come back"},
        {"from", "first x (epoch or step) of the window (default: the series' first)"},
        {"to", "last x of the window (default: the series' last)"},
        {"series", "comma-separated series names (default: every series); `names` lists them"}}},
      [&ctx](const Request& req, const PathParams& p) {
        auto id = ParseInt64(p.at("id"), {app::kRequestFile, 0, "id"}, 1, std::numeric_limits<int64_t>::max(),
                             "a job id (a positive number)");
        if (!id.IsOk()) return ErrorResponse(id.GetStatus());
        auto q = ParseMetricsQuery(req);
        if (!q.IsOk()) return ErrorResponse(q.GetStatus());
        auto metrics = app::ReadJobMetrics(ctx.meta, *id);
        if (!metrics.IsOk()) return ErrorResponse(metrics.GetStatus());
        return JsonResponse(app::JobMetricsJson(*id, *metrics, *q));
      });
}

}  // namespace kestrel::server
