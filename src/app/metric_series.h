// A job's training curves (GET /api/jobs/{id}/metrics, docs/server.md): the
// series built from its "metric" events (app/metric_events.h), and the
// downsampling that fits one into a chart's pixel columns without hiding a
// spike. Torch-free.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::app {

struct SeriesPoint {
  int64_t x = 0;  // epoch (1-based), global iteration (1-based) or seconds (time)
  double y = 0;
};

struct Downsampled {
  std::vector<SeriesPoint> points;  // in x order
  int64_t in_window = 0;            // raw points in [from, to]
  bool downsampled = false;         // false: `points` are every raw point of the window
};

// The points of `sorted` (strictly increasing x) with from <= x <= to
// (absent: the first / last x), fitted to `width` (>= 1) pixel columns:
// every point when the window holds at most 2 * width, else the window is
// cut into `width` equal x buckets and each keeps its lowest and its
// highest point (one when they are the same), in x order. So at most 2
// points per column, and a single-step spike is always the extreme of its
// bucket: visible at every zoom. O(window) time.
Downsampled Downsample(const std::vector<SeriesPoint>& sorted, int64_t width,
                       std::optional<int64_t> from = {}, std::optional<int64_t> to = {});

struct MetricSeries {
  std::string name;  // "metrics/mAP50(B)", "iter/box_loss", ...
  std::string axis;  // what x counts: "epoch", "step" or "time" (seconds since the attempt's child started)
  std::vector<SeriesPoint> points;  // strictly increasing x
  int64_t attempt = 0;              // the attempt of the newest point
};

// Folds a job's events, in id order, into its series. Resumed and rolled
// back runs repeat x values: a point replaces every point of its series at
// x >= its own (the newer timeline wins from where it starts), and a point
// from an older attempt than the series' newest is ignored (a stale child).
// So every (series, x) appears once, from the latest attempt. A "time"
// series (the worker's usage samples, x = seconds since the attempt's child
// started) holds the newest attempt's points only. The newest
// "progress" payload of the newest attempt is kept too, and so are the
// newest kRecentEvents events of every kind (a job page's event table) and
// the id of the newest event folded: a client that draws the series and
// then follows the job's event stream from that id gets every later point
// once, without replaying the history the series already hold.
// NOLINTNEXTLINE(bugprone-exception-escape): implicit moves of a map and a json (noexcept in practice)
class MetricSeriesBuilder {
 public:
  void Add(const store::EventRecord& ev);
  std::vector<MetricSeries> Series() const;                                            // by name
  const std::map<std::string, MetricSeries>& SeriesByName() const { return series_; }  // no copy
  int64_t PointCount() const;  // points over every series
  const nlohmann::json& Progress() const { return progress_; }
  int64_t LastEventId() const { return last_event_id_; }  // 0: no event yet
  int64_t EventCount() const { return event_count_; }     // events folded, of every kind
  static constexpr size_t kRecentEvents = 200;
  const std::deque<store::EventRecord>& RecentEvents() const { return recent_; }  // oldest first

 private:
  std::map<std::string, MetricSeries> series_;
  std::deque<store::EventRecord> recent_;
  int64_t last_event_id_ = 0;
  int64_t event_count_ = 0;
  nlohmann::json progress_;  // null until a progress event
  int64_t progress_attempt_ = 0;
};

// Reads every event of job `job_id` (paging) into a builder. kNotFound for
// an unknown job.
Result<MetricSeriesBuilder> ReadJobMetrics(store::MetadataStore& meta, int64_t job_id);

// Folds job `job_id`'s events with id > `*after_id` into `b` (paging) and
// advances `*after_id` past them. Event ids grow in commit order, so a
// builder kept with its `after_id` follows a running job by reading only
// its new events and ends up as ReadJobMetrics would build it. On an error
// `b` holds the events up to `*after_id`.
Status ReadJobMetricsSince(store::MetadataStore& meta, int64_t job_id, MetricSeriesBuilder& b,
                           int64_t* after_id);

struct MetricsQuery {
  int64_t width = 1000;             // pixel columns, >= 1
  std::optional<int64_t> from, to;  // x window; absent: the series' own ends
  std::vector<std::string> names;   // only these series (empty: all)
};

// {"ok", "job_id", "width", "from", "to", "names": [{"name", "x"}] (every
// series the job has), "series": [{"name", "x", "points" (raw points in the
// window), "downsampled", "data": [[x, y], ...]}], "progress": {...}|null,
// "last_event_id" (the newest event the series include: follow the job's
// event stream from it), "event_count" (the job's events so far)}.
// A requested name the job has no points for yet comes back empty.
nlohmann::json JobMetricsJson(int64_t job_id, const MetricSeriesBuilder& metrics, const MetricsQuery& q);

}  // namespace kestrel::app
