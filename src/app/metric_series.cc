#include "app/metric_series.h"

#include <algorithm>
#include <cmath>

#include "app/metric_events.h"

namespace kestrel::app {

using nlohmann::json;

Downsampled Downsample(const std::vector<SeriesPoint>& sorted, int64_t width, std::optional<int64_t> from,
                       std::optional<int64_t> to) {
  Downsampled out;
  if (sorted.empty()) return out;
  width = std::max<int64_t>(1, width);
  const int64_t lo_x = from.value_or(sorted.front().x);
  const int64_t hi_x = to.value_or(sorted.back().x);
  if (hi_x < lo_x) return out;
  auto by_x = [](const SeriesPoint& p, int64_t x) { return p.x < x; };
  const auto begin = std::lower_bound(sorted.begin(), sorted.end(), lo_x, by_x);
  const auto end = std::upper_bound(sorted.begin(), sorted.end(), hi_x,
                                    [](int64_t x, const SeriesPoint& p) { return x < p.x; });
  const int64_t n = end - begin;
  out.in_window = n;
  if (n <= 2 * width) {
    out.points.assign(begin, end);
    return out;
  }
  out.downsampled = true;
  // Bucket by x, not by index: a column is a span of the axis, so gaps in
  // the data stay gaps. long double keeps (x - lo) * width exact for any
  // int64 range a chart can ask for.
  const long double span = static_cast<long double>(hi_x) - static_cast<long double>(lo_x) + 1.0L;
  out.points.reserve(static_cast<size_t>(2 * width));
  int64_t bucket = -1;
  auto min_it = begin, max_it = begin;
  auto flush = [&] {
    if (bucket < 0) return;
    if (min_it == max_it) {
      out.points.push_back(*min_it);
    } else if (min_it < max_it) {
      out.points.push_back(*min_it);
      out.points.push_back(*max_it);
    } else {
      out.points.push_back(*max_it);
      out.points.push_back(*min_it);
    }
  };
  for (auto it = begin; it != end; ++it) {
    const auto b = static_cast<int64_t>((static_cast<long double>(it->x) - lo_x) * width / span);
    if (b != bucket) {
      flush();
      bucket = b;
      min_it = max_it = it;
      continue;
    }
    if (it->y < min_it->y) min_it = it;
    if (it->y > max_it->y) max_it = it;
  }
  flush();
  return out;
}

void MetricSeriesBuilder::Add(const store::EventRecord& ev) {
  last_event_id_ = std::max(last_event_id_, ev.id);
  ++event_count_;
  if (recent_.size() >= kRecentEvents) recent_.pop_front();
  recent_.push_back(ev);
  if (ev.kind == kProgressEventKind) {
    if (ev.attempt < progress_attempt_) return;
    json p = json::parse(ev.payload_json, nullptr, false);
    if (!p.is_object()) return;
    progress_attempt_ = ev.attempt;
    p["attempt"] = ev.attempt;
    p["created_ms"] = ev.created_ms;
    progress_ = std::move(p);
    return;
  }
  if (ev.kind != kMetricEventKind) return;
  const json p = json::parse(ev.payload_json, nullptr, false);
  if (!p.is_object() || !p.contains("x") || !p["x"].is_number_integer() || !p.contains("values") ||
      !p["values"].is_object())
    return;
  const std::string type = p.value("type", "");
  if (type != "epoch" && type != "step" && type != "time") return;
  const int64_t x = p["x"].get<int64_t>();
  for (const auto& [name, value] : p["values"].items()) {
    if (!value.is_number()) continue;
    const double y = value.get<double>();
    if (!std::isfinite(y)) continue;
    MetricSeries& s = series_[name];
    if (s.name.empty()) {
      s.name = name;
      s.axis = type;
    }
    if (ev.attempt < s.attempt) continue;
    // A time series' x restarts with each attempt (seconds since its child
    // started): a newer attempt's first point starts the series afresh.
    if (type == "time" && ev.attempt > s.attempt) s.points.clear();
    s.attempt = ev.attempt;
    while (!s.points.empty() && s.points.back().x >= x) s.points.pop_back();
    s.points.push_back({x, y});
  }
}

std::vector<MetricSeries> MetricSeriesBuilder::Series() const {
  std::vector<MetricSeries> out;
  out.reserve(series_.size());
  for (const auto& [name, s] : series_) out.push_back(s);
  return out;
}

int64_t MetricSeriesBuilder::PointCount() const {
  int64_t n = 0;
  for (const auto& [name, s] : series_) n += static_cast<int64_t>(s.points.size());
  return n;
}

Status ReadJobMetricsSince(store::MetadataStore& meta, int64_t job_id, MetricSeriesBuilder& b,
                           int64_t* after_id) {
  for (;;) {
    KESTREL_ASSIGN_OR_RETURN(auto page, meta.ReadEvents(*after_id, job_id, 2000));
    if (page.empty()) return {};
    for (const auto& ev : page) {
      *after_id = ev.id;
      b.Add(ev);
    }
  }
}

Result<MetricSeriesBuilder> ReadJobMetrics(store::MetadataStore& meta, int64_t job_id) {
  KESTREL_RETURN_IF_ERROR(meta.GetJob(job_id).GetStatus());
  MetricSeriesBuilder b;
  int64_t after = 0;
  KESTREL_RETURN_IF_ERROR(ReadJobMetricsSince(meta, job_id, b, &after));
  return b;
}

json JobMetricsJson(int64_t job_id, const MetricSeriesBuilder& metrics, const MetricsQuery& q) {
  const std::map<std::string, MetricSeries>& all = metrics.SeriesByName();
  json names = json::array();
  for (const auto& [name, s] : all) names.push_back({{"name", s.name}, {"x", s.axis}});
  std::vector<const MetricSeries*> chosen;
  std::vector<MetricSeries> missing;
  missing.reserve(q.names.size());
  if (q.names.empty()) {
    for (const auto& [name, s] : all) chosen.push_back(&s);
  } else {
    for (const auto& name : q.names) {
      auto it = all.find(name);
      if (it != all.end()) {
        chosen.push_back(&it->second);
      } else {
        missing.push_back({name, "", {}, 0});
        chosen.push_back(&missing.back());
      }
    }
  }
  json series = json::array();
  for (const MetricSeries* s : chosen) {
    const Downsampled d = Downsample(s->points, q.width, q.from, q.to);
    json data = json::array();
    for (const auto& pt : d.points) data.push_back(json::array({pt.x, pt.y}));
    series.push_back({{"name", s->name},
                      {"x", s->axis.empty() ? json(nullptr) : json(s->axis)},
                      {"points", d.in_window},
                      {"downsampled", d.downsampled},
                      {"data", std::move(data)}});
  }
  return {{"ok", true},
          {"job_id", job_id},
          {"width", q.width},
          {"from", q.from ? json(*q.from) : json(nullptr)},
          {"to", q.to ? json(*q.to) : json(nullptr)},
          {"names", std::move(names)},
          {"series", std::move(series)},
          {"progress", metrics.Progress()},
          {"last_event_id", metrics.LastEventId()},
          {"event_count", metrics.EventCount()}};
}

}  // namespace kestrel::app
