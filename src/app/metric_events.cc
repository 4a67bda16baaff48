#include "app/metric_events.h"

#include <chrono>
#include <utility>

namespace kestrel::app {

using nlohmann::json;

json EpochMetricsPayload(const EpochMetrics& m) {
  // The results.csv column names (train/progress.h), so a curve reads as
  // the file a YOLO user knows.
  return {{"type", "epoch"},
          {"x", m.epoch},
          {"epoch", m.epoch},
          {"values",
           {{"train/box_loss", m.box},
            {"train/cls_loss", m.cls},
            {"train/dfl_loss", m.dfl},
            {"metrics/precision(B)", m.precision},
            {"metrics/recall(B)", m.recall},
            {"metrics/mAP50(B)", m.map50},
            {"metrics/mAP50-95(B)", m.map5095},
            {"val/box_loss", m.val_box},
            {"val/cls_loss", m.val_cls},
            {"val/dfl_loss", m.val_dfl},
            {"lr/pg0", m.lr[0]},
            {"lr/pg1", m.lr[1]},
            {"lr/pg2", m.lr[2]},
            {"time", m.time}}}};
}

json StepMetricsPayload(const StepMetrics& m) {
  return {{"type", "step"},
          {"x", m.iteration},
          {"epoch", m.epoch},
          {"values", {{"iter/box_loss", m.box}, {"iter/cls_loss", m.cls}, {"iter/dfl_loss", m.dfl}}}};
}

json ProgressPayload(const ProgressMetrics& m) {
  return {{"epoch", m.epoch},       {"epochs", m.epochs},       {"batch", m.batch},
          {"batches", m.batches},   {"iteration", m.iteration}, {"iterations", m.iterations},
          {"it_per_s", m.it_per_s}, {"eta_s", m.eta_s}};
}

Result<std::set<int>> ReportedEpochs(store::MetadataStore& meta, int64_t job_id) {
  std::set<int> out;
  int64_t after = 0;
  for (;;) {
    KESTREL_ASSIGN_OR_RETURN(auto page, meta.ReadEvents(after, job_id, 1000));
    if (page.empty()) break;
    for (const auto& ev : page) {
      after = ev.id;
      if (ev.kind != kMetricEventKind) continue;
      const json p = json::parse(ev.payload_json, nullptr, false);
      if (p.is_object() && p.value("type", "") == "epoch" && p.contains("epoch") &&
          p["epoch"].is_number_integer())
        out.insert(p["epoch"].get<int>());
    }
  }
  return out;
}

MetricEventWriter::MetricEventWriter(OpenStore open, int64_t job_id, int64_t attempt,
                                     std::function<int64_t()> now_ms)
    : open_(std::move(open)), job_id_(job_id), attempt_(attempt), now_ms_(std::move(now_ms)) {
  thread_ = std::thread([this] { Run(); });
}

MetricEventWriter::~MetricEventWriter() { Finish(0); }

void MetricEventWriter::Post(const std::string& kind, const json& payload, bool droppable) {
  Item item;
  item.ev.job_id = job_id_;
  item.ev.attempt = attempt_;
  item.ev.kind = kind;
  item.ev.payload_json = payload.dump();
  item.ev.created_ms = now_ms_();
  item.droppable = droppable;
  {
    MutexLock lock(mu_);
    if (stop_) return;
    if (droppable && queue_.size() >= kMaxQueued) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(item));
  }
  cv_.SignalAll();
}

int64_t MetricEventWriter::Finish(int64_t timeout_ms) {
  {
    MutexLock lock(mu_);
    if (!stop_) {
      stop_ = true;
      deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    }
  }
  cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
  MutexLock lock(mu_);
  return written_;
}

int64_t MetricEventWriter::Dropped() const {
  MutexLock lock(mu_);
  return dropped_;
}

bool MetricEventWriter::PastDeadline() const {
  return stop_ && std::chrono::steady_clock::now() >= deadline_;
}

std::optional<store::EventRecord> MetricEventWriter::NextEvent() {
  MutexLock lock(mu_);
  while (!stop_ && queue_.empty()) cv_.Wait(mu_);
  if (queue_.empty() || PastDeadline()) return std::nullopt;
  // A copy: the append runs without the lock, and queue_ is read only under it.
  return queue_.front().ev;
}

bool MetricEventWriter::AfterAppend(bool appended) {
  MutexLock lock(mu_);
  if (appended) {
    queue_.pop_front();
    ++written_;
    return true;
  }
  if (PastDeadline()) return false;
  const auto retry = std::chrono::steady_clock::now() + std::chrono::milliseconds(250);
  while (!PastDeadline()) {
    if (!cv_.WaitUntil(mu_, retry)) break;  // time to retry
  }
  return true;
}

// The store is opened and written without the lock: Post never waits for it.
void MetricEventWriter::Run() {
  std::unique_ptr<store::MetadataStore> meta;
  while (std::optional<store::EventRecord> ev = NextEvent()) {
    Status s;
    if (!meta) {
      auto opened = open_();
      if (opened.IsOk()) {
        meta = std::move(opened).Value();
      } else {
        s = opened.GetStatus();
      }
    }
    if (meta) {
      s = meta->AppendEvent(*ev).GetStatus();
      if (!s.IsOk()) meta.reset();  // reconnect on the next try
    }
    if (!AfterAppend(s.IsOk())) return;
  }
}

}  // namespace kestrel::app
