// batch=-1 (train_config.h kAutoBatch): the choice of a batch size from
// measured device memory, as the reference trainer's AutoBatch makes it,
// without LibTorch so it is unit-tested on any machine. The trainer
// (trainer.cc) measures: one forward+backward of a copy of the model at each
// of AutoBatchSizes() on the CUDA device, the device memory in use after
// each (total - free, the runtime's numbers, so the caching allocator's
// reserve and the CUDA context count), stopping at the first out-of-memory.
// ChooseAutoBatch fits a line through those points and picks the largest
// batch whose predicted use stays within `fraction` (0.6) of the device.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kestrel::train {

inline constexpr double kAutoBatchFraction = 0.6;
inline constexpr int kAutoBatchMax = 1024;

// 1, 2, 4, 8, 16 and, on devices of 16 GiB or more, 32 and 64.
std::vector<int> AutoBatchSizes(int64_t total_bytes);

struct AutoBatchProbe {
  int batch = 0;
  int64_t used_bytes = 0;  // device memory in use after the forward+backward
  bool out_of_memory = false;
};

struct AutoBatchChoice {
  int batch = 0;
  bool fallback = false;          // true: the measurements gave no usable answer; batch = fallback
  double predicted_fraction = 0;  // of total memory at `batch` (fit), 0 on fallback
  std::string why;                // one line for the log: the fit, or why it fell back
};

// Fit used = intercept + slope * batch (least squares) over the probes that
// did not run out of memory and whose use grew over the previous such probe
// (a measurement that did not grow says nothing about the slope); batch =
// floor((fraction * total - intercept) / slope). When a probe ran out of
// memory and the fit reaches its batch, the largest batch below it that
// worked is taken instead. Fallback (to `fallback`) with fewer than two
// usable points, a slope <= 0, or a result outside [1, kAutoBatchMax].
AutoBatchChoice ChooseAutoBatch(const std::vector<AutoBatchProbe>& probes, int64_t total_bytes,
                                double fraction, int fallback);

// The micro-batch after a CUDA out-of-memory in a step: half, at least 1.
inline int HalveBatch(int batch) { return batch > 2 ? batch / 2 : 1; }

}  // namespace kestrel::train
