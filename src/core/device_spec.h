// DeviceSpec: the `device=` key of `kestrel train`, `val` and `predict`
// (and of jobs), parsed in one place and without LibTorch, so the CLI, the
// job keys and `kestrel submit` accept and refuse exactly the same texts.
// The torch side (is CUDA there? which torch::Device?) is model/device.h.
//
// Accepted: "cpu"; "cuda" (= CUDA device 0); "cuda:N" and "N", N a CUDA
// device index in [0, kMaxDeviceIndex]. Nothing else: no upper case, no
// spaces, no lists ("0,1": one process trains on one device).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace kestrel {

inline constexpr int kMaxDeviceIndex = 1023;

struct DeviceSpec {
  enum class Kind { kCpu, kCuda };
  Kind kind = Kind::kCpu;
  int index = 0;     // CUDA device index (0 for the CPU)
  std::string text;  // as the user wrote it: error messages quote it ("device=0: ...")

  bool IsCuda() const { return kind == Kind::kCuda; }
  // "cpu" or "cuda:N": what logs and torch::Device print.
  std::string Canonical() const;
};

// kInvalidArgument at field `key` (file/line empty, as TrainConfig::Validate
// reports) for anything but the forms above, e.g.
// "device=gpu: expected cpu, cuda, cuda:N or a CUDA device index N in [0, 1023]".
Result<DeviceSpec> ParseDeviceSpec(std::string_view text, std::string_view key = "device");

}  // namespace kestrel
