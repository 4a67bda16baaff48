// DevicePool: what one worker can run at the same time, and what is still
// free. Devices are given as a comma-separated list:
//   cpu          one CPU slot (one job at a time)
//   cpu:N        N CPU slots
//   gpu:IDX:MB   CUDA device IDX with MB megabytes for jobs; several jobs may
//                share it while their `gpu_mem` sums fit
// The worker offers ClaimJob only what is free, and reserves the job's
// memory on the device the store placed it on, so two jobs never share
// memory that does not fit.
//
// Not thread-safe: the worker guards it with its claim mutex.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "store/job_types.h"

namespace kestrel::jobs {

struct Device {
  std::string kind = "cpu";  // "cpu" or "gpu"
  int index = 0;             // cpu: slot number; gpu: CUDA device index
  int64_t memory_mb = 0;     // gpu: memory available to jobs; cpu: 0
};

// Parses "cpu,cpu:2,gpu:0:80000". kInvalidArgument naming the bad token.
Result<std::vector<Device>> ParseDevices(const std::string& spec);
// "[{"kind":"cpu","index":0},{"kind":"gpu","index":0,"memory_mb":80000}]".
std::string DevicesJson(const std::vector<Device>& devices);

class DevicePool {
 public:
  explicit DevicePool(std::vector<Device> devices);

  // One offer per idle CPU slot and one per GPU with its free memory.
  std::vector<store::DeviceOffer> FreeOffers() const;
  // Reserves `memory_mb` on the device `where` names (as ClaimJob returned
  // it). Returns a token for Release, or -1 when it does not fit (or no
  // such device): the caller must not run the job.
  int Acquire(const store::DeviceOffer& where, int64_t memory_mb);
  void Release(int token);
  // Memory in use on GPU `index` (tests).
  int64_t UsedMb(int gpu_index) const;
  const std::vector<Device>& Devices() const { return devices_; }

 private:
  struct Use {
    int device = -1;  // position in devices_, -1 = free token
    int64_t memory_mb = 0;
  };
  std::vector<Device> devices_;
  std::vector<int64_t> used_mb_;  // per device
  std::vector<bool> busy_;        // per device (CPU slots)
  std::vector<Use> uses_;         // by token
};

}  // namespace kestrel::jobs
