#include "server/api_metrics.h"

#include <algorithm>
#include <limits>
#include <list>
#include <memory>
#include <string>

#include "app/jobs.h"
#include "app/metric_series.h"
#include "core/parse.h"
#include "server/api.h"
#include "server/query_params.h"

namespace kestrel::server {
namespace {

// ?events=N: the newest N events of the job (every kind), as its event
// stream sends them, oldest first; 0 (the default): none.
Result<int64_t> RecentEventsWanted(const Request& req) {
  return QueryInt(req, "events", 0, 0, static_cast<int64_t>(app::MetricSeriesBuilder::kRecentEvents),
                  "a count of events");
}

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

// The series of the jobs asked for lately, each brought up to date with its
// job's new events on every request (app::ReadJobMetricsSince), so a long
// run's history is read and folded once, not on every chart load or zoom.
// Bounded: at most kJobs jobs and, past the one just asked for, kPoints
// points in all; the least recently asked go first. I/O thread only (api.h).
class MetricsCache {
 public:
  Result<const app::MetricSeriesBuilder*> Get(store::MetadataStore& meta, int64_t job_id) {
    auto it = std::find_if(jobs_.begin(), jobs_.end(), [&](const Entry& e) { return e.job_id == job_id; });
    if (it != jobs_.end()) {
      jobs_.splice(jobs_.begin(), jobs_, it);
    } else {
      jobs_.push_front(Entry{job_id, 0, {}});
    }
    Entry& e = jobs_.front();
    Status st = meta.GetJob(job_id).GetStatus();  // kNotFound: 404 (a removed job leaves the cache)
    if (st.IsOk()) st = app::ReadJobMetricsSince(meta, job_id, e.builder, &e.after_id);
    if (!st.IsOk()) {
      jobs_.pop_front();
      return st;
    }
    int64_t points = 0;
    int kept = 0;
    for (auto k = jobs_.begin(); k != jobs_.end();) {
      points += k->builder.PointCount();
      if (kept > 0 && (points > kPoints || kept >= kJobs)) {
        k = jobs_.erase(k);
      } else {
        ++k;
        ++kept;
      }
    }
    return &e.builder;
  }

 private:
  static constexpr int kJobs = 8;
  static constexpr int64_t kPoints = 8'000'000;  // ~128 MB of points
  struct Entry {
    int64_t job_id;
    int64_t after_id;  // the last event folded into `builder`
    app::MetricSeriesBuilder builder;
  };
  std::list<Entry> jobs_;  // most recently asked first
};

}  // namespace

Status AddMetricRoutes(Router& router, ApiContext& ctx) {
  return router.Add(
      "GET", "/api/jobs/{id}/metrics",
      {"A job's training curves from its metric events, each series downsampled to `width` columns "
       "(min and max per column, so spikes stay visible; raw points when they fit) (docs/server.md)",
       {{"width", "pixel columns, 1..100000 (default 1000): at most 2 points per column come back"},
        {"from", "first x (epoch or step) of the window (default: the series' first)"},
        {"to", "last x of the window (default: the series' last)"},
        {"series", "comma-separated series names (default: every series); `names` lists them"},
        {"events",
         "0..200 (default 0): also `events`, the job's newest events as its event stream sends them; "
         "follow the stream from `last_event_id`"}}},
      [&ctx, cache = std::make_shared<MetricsCache>()](const Request& req, const PathParams& p) {
        auto id = JobIdText(p.at("id"));
        if (!id.IsOk()) return ErrorResponse(id.GetStatus());
        auto q = ParseMetricsQuery(req);
        if (!q.IsOk()) return ErrorResponse(q.GetStatus());
        auto recent = RecentEventsWanted(req);
        if (!recent.IsOk()) return ErrorResponse(recent.GetStatus());
        auto metrics = cache->Get(ctx.meta, *id);
        if (!metrics.IsOk()) return ErrorResponse(metrics.GetStatus());
        nlohmann::json doc = app::JobMetricsJson(*id, **metrics, *q);
        if (*recent > 0) {
          const auto& tail = (*metrics)->RecentEvents();
          nlohmann::json events = nlohmann::json::array();
          for (auto it = tail.end() - std::min<int64_t>(*recent, static_cast<int64_t>(tail.size()));
               it != tail.end(); ++it)
            events.push_back(EventJson(*it));
          doc["events"] = std::move(events);
        }
        // Compact, unlike the other routes' indented documents: a long run's
        // curves are most of a job page's first paint (20 series x 1,232
        // points: 0.7 MB instead of 1.7 MB to write, send and parse).
        return JsonResponse(doc, 200, -1);
      });
}

}  // namespace kestrel::server
