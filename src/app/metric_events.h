// Live training metrics as store events (docs/server.md "Event kinds"): the
// payloads a training attempt appends while it runs, and the writer that
// appends them off the training thread. Torch-free: the job runner
// (app/train_job.cc) fills these plain records from the trainer's hooks.
//
// Kinds and payloads:
//   "metric", {"type": "epoch", "x": E, "epoch": E, "values": {name: y}}
//     one validated epoch: the results.csv columns (train/box_loss, ...,
//     metrics/mAP50(B), metrics/mAP50-95(B), lr/pg0..2, time: cumulative
//     seconds, as in the file)
//   "metric", {"type": "step", "x": I, "epoch": E, "values": {iter/box_loss,
//     iter/cls_loss, iter/dfl_loss}}: one sampled iteration (I = 1-based
//     global iteration)
//   "metric", {"type": "time", "x": S, "values": {sys/cpu_percent,
//     sys/rss_mb[, sys/gpu_util, sys/gpu_mem_mb]}}: the worker's usage
//     sample of the attempt's process tree (jobs/worker.h usage_sample_ms;
//     S = whole seconds since the child started)
//   "progress", {"epoch", "epochs", "batch", "batches", "iteration",
//     "iterations", "it_per_s", "eta_s"}
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "core/status.h"
#include "core/thread_annotations.h"
#include "store/metadata_store.h"

namespace kestrel::app {

inline constexpr const char* kMetricEventKind = "metric";
inline constexpr const char* kProgressEventKind = "progress";

// One validated epoch (a results.csv row).
struct EpochMetrics {
  int epoch = 0;                     // 1-based
  double box = 0, cls = 0, dfl = 0;  // mean train losses
  double precision = 0, recall = 0, map50 = 0, map5095 = 0;
  double val_box = 0, val_cls = 0, val_dfl = 0;
  std::array<double, 3> lr{};  // last LR per parameter group
  double time = 0;             // wall seconds of the run up to this epoch's end (results.csv `time`)
};

// One sampled training iteration.
struct StepMetrics {
  int epoch = 0;          // 1-based
  int64_t iteration = 0;  // 1-based global iteration (the series' x)
  double box = 0, cls = 0, dfl = 0;
};

// Where the run is.
struct ProgressMetrics {
  int epoch = 0, epochs = 0;  // 1-based epoch
  int64_t batch = 0, batches = 0;
  int64_t iteration = 0, iterations = 0;  // 1-based global iteration of total
  double it_per_s = 0;                    // this epoch so far
  double eta_s = 0;                       // rest of the run
};

nlohmann::json EpochMetricsPayload(const EpochMetrics& m);
nlohmann::json StepMetricsPayload(const StepMetrics& m);
nlohmann::json ProgressPayload(const ProgressMetrics& m);

// The epochs job `job_id` already has an epoch metric event for (any
// attempt), so a resumed attempt reports only the restored epochs that are
// missing (a child killed between its checkpoint and the event).
Result<std::set<int>> ReportedEpochs(store::MetadataStore& meta, int64_t job_id);

// Appends events for one attempt on its own thread and store connection,
// so a slow or unavailable store never stalls training. Post never blocks
// on the store; step and progress events are dropped when more than
// `kMaxQueued` wait (epoch events never are). A failed append is retried
// every 250 ms until Finish.
//
// Thread-safety: Post may be called from any thread; Finish and the
// destructor from the owner's.
class MetricEventWriter {
 public:
  static constexpr size_t kMaxQueued = 256;
  using OpenStore = std::function<Result<std::unique_ptr<store::MetadataStore>>()>;

  // `now_ms`: Unix milliseconds for created_ms.
  MetricEventWriter(OpenStore open, int64_t job_id, int64_t attempt, std::function<int64_t()> now_ms);
  ~MetricEventWriter();
  MetricEventWriter(const MetricEventWriter&) = delete;
  MetricEventWriter& operator=(const MetricEventWriter&) = delete;

  // `droppable`: may be dropped under backlog (steps, progress).
  void Post(const std::string& kind, const nlohmann::json& payload, bool droppable) EXCLUDES(mu_);
  // Appends what is queued, waiting at most `timeout_ms`, then stops the
  // thread. Returns the events written in all. Idempotent.
  int64_t Finish(int64_t timeout_ms) EXCLUDES(mu_);
  int64_t Dropped() const EXCLUDES(mu_);

 private:
  struct Item {
    store::EventRecord ev;
    bool droppable = false;
  };
  void Run() EXCLUDES(mu_);  // the thread: appends the queue's front until told to stop
  // Waits for an event or the stop; the front event, or nullopt when the
  // thread is to end (nothing queued at the stop, or past the deadline).
  std::optional<store::EventRecord> NextEvent() EXCLUDES(mu_);
  // After an append of the front: removes it if `appended`, else waits up to
  // 250 ms before the retry. False when the thread is to end.
  bool AfterAppend(bool appended) EXCLUDES(mu_);
  bool PastDeadline() const REQUIRES(mu_);

  OpenStore open_;
  int64_t job_id_, attempt_;
  std::function<int64_t()> now_ms_;
  mutable Mutex mu_;
  CondVar cv_;                              // signalled by Post and Finish
  std::deque<Item> queue_ GUARDED_BY(mu_);  // only Run removes, only Post appends
  bool stop_ GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point deadline_ GUARDED_BY(mu_){};  // set by Finish
  int64_t written_ GUARDED_BY(mu_) = 0;
  int64_t dropped_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace kestrel::app
