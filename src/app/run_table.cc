#include "app/run_table.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <utility>

#include "app/metric_events.h"
#include "core/utf8.h"

namespace kestrel::app {

using nlohmann::json;

namespace {

bool Finished(store::JobState s) {
  return s == store::JobState::kSucceeded || s == store::JobState::kFailedPermanent ||
         s == store::JobState::kCancelled;
}

json SummaryJson(const SeriesSummary& s) {
  return {{"axis", s.axis}, {"count", s.count}, {"last", s.last}, {"last_x", s.last_x},
          {"min", s.min},   {"min_x", s.min_x}, {"max", s.max},   {"max_x", s.max_x}};
}

// The jobs of `ids` as a page, each named by the registry's first name of
// its dataset version (one query for all).
Result<JobPage> JobsById(store::MetadataStore& meta, const std::vector<int64_t>& ids) {
  JobPage page;
  std::vector<std::string> versions;
  for (int64_t id : ids) {
    auto job = meta.GetJob(id);
    if (!job.IsOk()) {
      if (job.GetStatus().Code() == StatusCode::kNotFound)
        return Status::NotFound("no job " + std::to_string(id), {kRequestFile, 0, "ids"});
      return job.GetStatus();
    }
    if (!job->spec.dataset_version.empty()) versions.push_back(job->spec.dataset_version);
    page.jobs.push_back(std::move(job).Value());
  }
  std::sort(versions.begin(), versions.end());
  versions.erase(std::unique(versions.begin(), versions.end()), versions.end());
  std::map<std::string, JobDatasetName> names;
  if (!versions.empty()) {
    KESTREL_ASSIGN_OR_RETURN(auto recs, meta.ListVersionsById(versions));
    for (const auto& v : recs) names.emplace(v.version_id, JobDatasetName{v.dataset, v.seq});
  }
  for (const auto& job : page.jobs) {
    auto it = names.find(job.spec.dataset_version);
    page.datasets.push_back(it != names.end() ? it->second : JobDatasetName{});
  }
  page.total = static_cast<int64_t>(page.jobs.size());
  return page;
}

}  // namespace

RunSummary SummarizeSeries(const MetricSeriesBuilder& metrics) {
  RunSummary out;
  for (const auto& [name, s] : metrics.SeriesByName()) {
    if (s.points.empty()) continue;
    SeriesSummary sum;
    sum.axis = s.axis;
    sum.count = static_cast<int64_t>(s.points.size());
    sum.last = s.points.back().y;
    sum.last_x = s.points.back().x;
    sum.min = sum.max = s.points.front().y;
    sum.min_x = sum.max_x = s.points.front().x;
    for (const SeriesPoint& p : s.points) {
      if (p.y < sum.min) {
        sum.min = p.y;
        sum.min_x = p.x;
      }
      if (p.y > sum.max) {
        sum.max = p.y;
        sum.max_x = p.x;
      }
    }
    out.emplace(name, std::move(sum));
  }
  return out;
}

Result<RunSummary> RunSummaryCache::Get(store::MetadataStore& meta, const store::JobRecord& job) {
  const bool finished = Finished(job.state);
  if (finished) {
    auto it = jobs_.find(job.id);
    if (it != jobs_.end() && it->second.updated_ms == job.updated_ms) return it->second.summary;
  }
  // Only epoch series are summarised: a step event (a sampled iteration;
  // a long run logs 100,000s) is skipped by its text, without parsing it.
  MetricSeriesBuilder b;
  for (int64_t after = 0;;) {
    KESTREL_ASSIGN_OR_RETURN(auto events, meta.ReadEvents(after, job.id, 2000));
    if (events.empty()) break;
    for (const auto& ev : events) {
      after = ev.id;
      if (ev.kind == kMetricEventKind && ev.payload_json.find(R"("type":"step")") == std::string::npos)
        b.Add(ev);
    }
  }
  RunSummary summary = SummarizeSeries(b);
  for (auto it = summary.begin(); it != summary.end();) {
    it = it->second.axis == "epoch" ? std::next(it) : summary.erase(it);
  }
  if (finished) {
    if (jobs_.size() >= kMaxJobs) jobs_.clear();
    jobs_[job.id] = Entry{job.updated_ms, summary};
  } else {
    jobs_.erase(job.id);
  }
  return summary;
}

Result<std::vector<std::string>> SplitNameList(const std::string& text, const std::string& field,
                                               size_t max_items) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) {
      if (comma - start > 256)
        return Status::InvalidArgument("a name in " + field + " is longer than 256 bytes: '" +
                                           EscapeInvalidUtf8(text.substr(start, 40)) + "...'",
                                       {kRequestFile, 0, field});
      out.push_back(text.substr(start, comma - start));
      if (out.size() > max_items)
        return Status::InvalidArgument(field + " names more than " + std::to_string(max_items) + " items",
                                       {kRequestFile, 0, field});
    }
    start = comma + 1;
  }
  return out;
}

Result<json> RunTableJson(store::MetadataStore& meta, const RunTableRequest& req, RunSummaryCache& cache) {
  JobPage page;
  if (req.ids.empty()) {
    JobListRequest list = req.list;
    if (list.kind.empty()) list.kind = "train";
    KESTREL_ASSIGN_OR_RETURN(page, ListJobPage(meta, list));
  } else {
    KESTREL_ASSIGN_OR_RETURN(page, JobsById(meta, req.ids));
  }
  json doc = JobPageJson(page);
  std::set<std::string> all_keys, all_series;
  json runs = json::array();
  for (size_t i = 0; i < page.jobs.size(); ++i) {
    const store::JobRecord& job = page.jobs[i];
    json run = std::move(doc["jobs"][i]);
    for (const char* drop : {"lease_owner", "lease_until_ms", "not_before_ms", "dedup_key"}) run.erase(drop);
    run["duration_s"] = Finished(job.state) && job.attempt > 0 && job.finished_ms >= job.created_ms
                            ? json(static_cast<double>(job.finished_ms - job.created_ms) / 1000.0)
                            : json(nullptr);
    const json config = JobConfigJson(job);
    json values = json::object();
    if (config.is_object()) {
      for (const auto& [key, v] : config.items()) all_keys.insert(key);
      if (req.all_keys) {
        values = config;
      } else {
        for (const auto& key : req.keys) {
          auto it = config.find(key);
          values[key] = it != config.end() ? *it : json(nullptr);
        }
      }
    }
    run["config"] = std::move(values);
    KESTREL_ASSIGN_OR_RETURN(RunSummary summary, cache.Get(meta, job));
    json metrics = json::object();
    for (const auto& [name, s] : summary) all_series.insert(name);
    if (req.all_metrics) {
      for (const auto& [name, s] : summary) metrics[name] = SummaryJson(s);
    } else {
      for (const auto& name : req.metrics) {
        auto it = summary.find(name);
        if (it != summary.end()) metrics[name] = SummaryJson(it->second);
      }
    }
    run["metrics"] = std::move(metrics);
    runs.push_back(std::move(run));
  }
  doc.erase("jobs");
  doc.erase("next_offset");
  doc["runs"] = std::move(runs);
  doc["keys"] = json(std::vector<std::string>(all_keys.begin(), all_keys.end()));
  doc["series"] = json(std::vector<std::string>(all_series.begin(), all_series.end()));
  return doc;
}

}  // namespace kestrel::app
