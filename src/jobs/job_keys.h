// JobKeys: the keys of a job itself (not of the trainer) that `kestrel
// submit` takes beside the train keys, bound into an OptionSet like every
// other option group, so their types, ranges and defaults are written once
// (here) and printed by `kestrel help keys` / docs/jobs.md's table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/options.h"
#include "core/status.h"
#include "store/job_types.h"

namespace kestrel::jobs {

// The config key that holds a job's kind (a row of the job-kind table,
// app/job_kinds.h; src/jobs knows no kind). It is written for every kind
// but train: a training job's config is exactly its trainer keys (the child
// applies them as they are) and reads as train when the key is absent, as
// every job stored before kinds existed does.
inline constexpr const char* kJobKindKey = "kind";

struct JobKeys {
  std::string kind = "train";       // what the job runs: a job-kind table row (checked at submit)
  std::string priority = "normal";  // claim order: high | normal | low
  std::string device = "cpu";       // cpu, or cuda / cuda:N / N: the job runs on some GPU
  int64_t gpu_mem = 0;              // MB the job may use on its GPU (0 = not given)
  int max_retries = 3;              // retryable failures allowed
  std::vector<double> backoff = {300, 900, 1800};  // seconds before retry k; the last repeats
  double time_limit = 0;                           // seconds of wall clock per attempt, 0 = none
  double min_map50 = 0;                            // quality gate on the best epoch's mAP50

  void Bind(OptionSet& s);
  // The bound ranges plus the rules between keys: device is what
  // ParseDeviceSpec accepts (cpu, cuda, cuda:N, N in [0, 1023]); gpu_mem only with (and required by) a GPU
  // device. kInvalidArgument naming the key.
  Status Validate() const;
  // Fills the job-owned fields of `spec`: priority, retry policy, device kind
  // and memory, wall-clock limit, min_map50. REQUIRES: Validate() is OK.
  void ApplyTo(store::JobSpec* spec) const;
  // The trainer's device= for this job: "cpu", or "0" (the worker picks the
  // GPU and shows it to the child as CUDA device 0).
  std::string TrainerDevice() const;
};

// Train keys a job may not set: the job system decides where each attempt
// runs and what it resumes from.
bool IsJobOwnedTrainKey(const std::string& key);

}  // namespace kestrel::jobs
