// The runs table (GET /api/runs, docs/server.md "Runs table"; the web UI's
// Runs page): one row per job of a page of the job list, with its name,
// tags, note, state and dataset, the config values asked for and a summary
// of each metric series it logged (count, last, min and max with their x),
// in one request instead of a job and a metrics request per run. A finished
// job's summaries are kept between requests (RunSummaryCache), so a table of
// hundreds of runs reads each run's events once. Torch-free.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/jobs.h"
#include "app/metric_series.h"
#include "core/status.h"
#include "store/job_types.h"
#include "store/metadata_store.h"

namespace kestrel::app {

// A series in a few numbers: its axis ("epoch" or "step"), how many points,
// the last point and the lowest and highest (the first x of each on ties).
struct SeriesSummary {
  std::string axis;
  int64_t count = 0;
  int64_t last_x = 0, min_x = 0, max_x = 0;
  double last = 0, min = 0, max = 0;
};
using RunSummary = std::map<std::string, SeriesSummary>;  // by series name

// Every series of `metrics` summarised (empty series left out). The runs
// table keeps only the epoch series (RunSummaryCache::Get).
RunSummary SummarizeSeries(const MetricSeriesBuilder& metrics);

// A job's epoch series summarised (its step series, sampled iterations,
// are left out: skipped unparsed, a long run has 100,000s), and
// summaries of finished jobs (succeeded, failed_permanent, cancelled: their
// events no longer change) by job id, valid while the job's updated_ms is
// the one they were read at (a retried job is read again). A live job is
// read on every request. Bounded: past kMaxJobs entries it starts over.
// Not thread-safe (the server's I/O thread owns it).
class RunSummaryCache {
 public:
  Result<RunSummary> Get(store::MetadataStore& meta, const store::JobRecord& job);
  size_t Size() const { return jobs_.size(); }
  static constexpr size_t kMaxJobs = 100'000;

 private:
  struct Entry {
    int64_t updated_ms = 0;
    RunSummary summary;
  };
  std::map<int64_t, Entry> jobs_;
};

struct RunTableRequest {
  JobListRequest list;  // the page of jobs (its kind: "train" unless set)
  // Config keys to return per run; all_keys: every key of each run's config.
  std::vector<std::string> keys;
  bool all_keys = true;
  // Series to summarise per run; all_metrics: every series the run has.
  std::vector<std::string> metrics;
  bool all_metrics = true;
  // Non-empty: exactly these jobs, in this order (a report's runs; any
  // kind), instead of a page of the list; `list` is then ignored.
  std::vector<int64_t> ids;
};

// Splits a comma-separated list ("lr0,mosaic"): empty items dropped;
// kInvalidArgument at the request's `field` past `max_items` items or an
// item longer than 256 bytes.
Result<std::vector<std::string>> SplitNameList(const std::string& text, const std::string& field,
                                               size_t max_items = 200);

// {"ok", "runs": [{"id", "kind", "state", "name", "tags", "note", "priority",
// "created_ms", "finished_ms", "attempt", "dataset", "version", "duration_s"
// (finish - submit of a job that ran and finished, else null), "result"
// (the stored result: map50, map50_95, best_epoch, epochs...; null before
// one), "config": {key: value} (a key the run's config lacks: null),
// "metrics": {series: {"axis", "count", "last", "last_x", "min", "min_x",
// "max", "max_x"}} (a series the run lacks: absent)}], "total",
// "next_cursor", "keys" (every config key of the page's runs, sorted),
// "series" (every series name of the page's runs, sorted)}. The job list's
// errors (a bad filter) as ListJobPage gives them.
Result<nlohmann::json> RunTableJson(store::MetadataStore& meta, const RunTableRequest& req,
                                    RunSummaryCache& cache);

}  // namespace kestrel::app
