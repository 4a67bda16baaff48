// Appends a job's "metric" step events through MetadataStore::AppendEvent,
// the way a training attempt does (app/metric_events.h payloads), for the
// serve benchmarks (tools/serve-load.mjs, tools/chart-paint.mjs):
//
//   kestrel_bench_event_writer HOME JOB bulk SERIES POINTS
//       POINTS step events x = 1..POINTS, each with SERIES values
//       ("iter/s00", ...): a long run's history. Prints the last event id.
//   kestrel_bench_event_writer HOME JOB live SERIES RATE SECONDS [FIRST_X]
//       one step event every 1/RATE s for SECONDS (0: until stdin closes),
//       x from FIRST_X (default 1); created_ms is the write's wall time.
//       Prints "wrote N events, last id I" at the end.
//   kestrel_bench_event_writer HOME JOB stdin SERIES
//       one step event per line read from stdin ("X"), answering
//       "ID CREATED_MS" on stdout: the latency probe of chart-paint.mjs.
//   kestrel_bench_event_writer HOME JOB jobs COUNT
//       COUNT more jobs, copies of job JOB's spec through
//       MetadataStore::SubmitJob (priority cycling high, normal, low; config
//       "seed" 1000 + i so that none is deduplicated), every fourth one then
//       cancelled: a long queue for tools/job-list.mjs. Prints the last id.
//
// The store is $KESTREL_DB or HOME/kestrel.db (store::MetadataUrl).
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/json.h"
#include "store/artifact_store.h"
#include "store/metadata_store.h"

namespace {

using kestrel::store::EventRecord;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string Name(int k) { return std::string("iter/s") + (k < 10 ? "0" : "") + std::to_string(k); }

// A loss-like curve per series with a little noise and, every 100,003 steps,
// a single-step spike.
std::string Payload(int64_t x, int series) {
  nlohmann::json values = nlohmann::json::object();
  for (int k = 0; k < series; ++k) {
    double y = (1.0 + 0.1 * k) * (0.5 + 2.0 / std::sqrt(static_cast<double>(x))) +
               0.01 * std::sin(static_cast<double>(x * (k + 3)));
    if (x % 100'003 == 50'000) y *= 8;
    values[Name(k)] = y;
  }
  return kestrel::DumpJson({{"type", "step"}, {"x", x}, {"epoch", 1 + x / 1000}, {"values", values}});
}

// The "jobs" mode: `count` copies of job `like`'s spec, every fourth cancelled.
int SubmitCopies(kestrel::store::MetadataStore& meta, int64_t like, int64_t count) {
  auto fail = [](const kestrel::Status& s) {
    std::cerr << "event_writer: " << s.ToString() << "\n";
    return 1;
  };
  auto base = meta.GetJob(like);
  if (!base.IsOk()) return fail(base.GetStatus());
  nlohmann::json config = nlohmann::json::parse(base->spec.config_json, nullptr, false);
  if (!config.is_object()) return fail(kestrel::Status::InvalidArgument("job config is not a JSON object"));
  int64_t last = 0;
  for (int64_t i = 0; i < count; ++i) {
    kestrel::store::JobSpec spec = base->spec;
    spec.priority = static_cast<kestrel::store::JobPriority>(i % 3);
    config["seed"] = 1000 + i;
    spec.config_json = kestrel::DumpJson(config);
    bool created = false;
    auto rec = meta.SubmitJob(spec, WallMs(), &created);
    if (!rec.IsOk()) return fail(rec.GetStatus());
    last = rec->id;
    if (i % 4 == 3) {
      auto cancelled = meta.CancelJob(rec->id, WallMs());
      if (!cancelled.IsOk()) return fail(cancelled.GetStatus());
    }
  }
  std::cout << last << "\n";
  return 0;
}

int Usage() {
  std::cerr << "usage: kestrel_bench_event_writer HOME JOB bulk SERIES POINTS\n"
               "       kestrel_bench_event_writer HOME JOB jobs COUNT\n"
               "       kestrel_bench_event_writer HOME JOB live SERIES RATE SECONDS [FIRST_X]\n"
               "       kestrel_bench_event_writer HOME JOB stdin SERIES\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) return Usage();
  const std::string home = argv[1];
  const int64_t job = std::atoll(argv[2]);
  const std::string mode = argv[3];
  const int series = std::atoi(argv[4]);
  const bool jobs_mode = mode == "jobs" && argc == 5;
  if (job <= 0 || series <= 0 || (series > 100 && !jobs_mode)) return Usage();
  auto meta = kestrel::store::MetadataStore::Open(kestrel::store::MetadataUrl(home));
  if (!meta.IsOk()) {
    std::cerr << "event_writer: " << meta.GetStatus().ToString() << "\n";
    return 1;
  }
  if (jobs_mode) return SubmitCopies(**meta, job, series);
  int64_t created_ms = 0;  // of the last append
  auto append = [&](int64_t x) -> int64_t {
    EventRecord ev;
    ev.job_id = job;
    ev.attempt = 1;
    ev.kind = "metric";
    ev.payload_json = Payload(x, series);
    ev.created_ms = created_ms = WallMs();
    auto id = (*meta)->AppendEvent(ev);
    if (!id.IsOk()) {
      std::cerr << "event_writer: " << id.GetStatus().ToString() << "\n";
      std::exit(1);
    }
    return *id;
  };
  if (mode == "bulk" && argc == 6) {
    const int64_t points = std::atoll(argv[5]);
    int64_t last = 0;
    for (int64_t x = 1; x <= points; ++x) last = append(x);
    std::cout << last << "\n";
    return 0;
  }
  if (mode == "live" && (argc == 7 || argc == 8)) {
    const double rate = std::atof(argv[5]);
    const double seconds = std::atof(argv[6]);
    int64_t x = argc == 8 ? std::atoll(argv[7]) : 1;
    if (!(rate > 0)) return Usage();
    const auto period = std::chrono::duration<double>(1.0 / rate);
    const auto start = std::chrono::steady_clock::now();
    int64_t n = 0, last = 0;
    for (auto next = start;
         seconds <= 0 || std::chrono::steady_clock::now() - start < std::chrono::duration<double>(seconds);
         ++n, ++x) {
      std::this_thread::sleep_until(next);
      last = append(x);
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(period);
    }
    std::cout << "wrote " << n << " events, last id " << last << "\n";
    return 0;
  }
  if (mode == "stdin" && argc == 5) {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line.empty()) continue;
      const int64_t x = std::atoll(line.c_str());
      const int64_t id = append(x);
      std::cout << id << " " << created_ms << std::endl;
    }
    return 0;
  }
  return Usage();
}
