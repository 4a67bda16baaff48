#include "jobs/job_keys.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/device_spec.h"

namespace kestrel::jobs {

namespace {
// Seconds stay below 1e9 so the conversion to milliseconds cannot overflow.
constexpr double kMaxSeconds = 1e9;

int64_t SecondsToMs(double s) { return static_cast<int64_t>(std::llround(s * 1000.0)); }
}  // namespace

void JobKeys::Bind(OptionSet& s) {
  // The names are the job-kind table's (app/job_kinds.h), checked at submit.
  s.String("kind", &kind,
           "what the job runs, a row of the job-kind table: train (the train keys), val (the val keys: "
           "model=, data=, split= ...) or export (the export keys: model=, format=, imgsz= ...)");
  s.Choice("priority", &priority, {"high", "normal", "low"}, "claim order among queued jobs");
  s.String("device", &device, "cpu, or a CUDA device index (the worker picks a free GPU)");
  s.Int("gpu_mem", &gpu_mem, "MB of GPU memory the job may use (required by GPU jobs; 0 = not given)", 0,
        1'000'000'000);
  s.Int("max_retries", &max_retries, "retryable failures allowed before the job fails for good", 0, 1000);
  s.FloatList("backoff", &backoff, "seconds to wait before retry 1, 2, ...; the last repeats",
              Range::Closed(0, kMaxSeconds));
  s.Float("time_limit", &time_limit, "wall-clock seconds per attempt (0 = none)",
          Range::Closed(0, kMaxSeconds));
  s.Float("min_map50", &min_map50, "quality gate: a result below this mAP50 fails the attempt",
          Range::Closed(0, 1));
}

Status JobKeys::Validate() const {
  KESTREL_RETURN_IF_ERROR(CheckBoundValues(*this));
  if (device != "cpu") {
    // The trainer's parser (cpu, cuda, cuda:N, N): a job is refused as `train` refuses it.
    if (auto d = ParseDeviceSpec(device); !d.IsOk()) return d.GetStatus();
    if (gpu_mem == 0) {
      return Status::InvalidArgument("a GPU job needs gpu_mem=MB (the memory it may use)",
                                     {"", 0, "gpu_mem"});
    }
  } else if (gpu_mem != 0) {
    return Status::InvalidArgument("gpu_mem is for GPU jobs (device=0)", {"", 0, "gpu_mem"});
  }
  return {};
}

void JobKeys::ApplyTo(store::JobSpec* spec) const {
  store::ParseJobPriority(priority, &spec->priority);
  spec->retry.max_retries = max_retries;
  spec->retry.backoff_ms.clear();
  for (double b : backoff) spec->retry.backoff_ms.push_back(SecondsToMs(b));
  spec->wall_clock_limit_ms = SecondsToMs(time_limit);
  spec->device_kind = device == "cpu" ? "cpu" : "gpu";
  spec->device_memory_mb = device == "cpu" ? 0 : gpu_mem;
  spec->min_map50 = min_map50;
}

std::string JobKeys::TrainerDevice() const { return device == "cpu" ? "cpu" : "0"; }

bool IsJobOwnedTrainKey(const std::string& k) {
  return k == "resume" || k == "run_dir" || k == "project" || k == "name" || k == "exist_ok";
}

}  // namespace kestrel::jobs
