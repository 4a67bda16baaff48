// The torch side of `device=` without torch in the header (the CLI checks a
// device before it starts anything): is the parsed device (core/
// device_spec.h) usable by this LibTorch on this machine? The torch::Device
// itself and the other LibTorch version differences are model/torch_compat.h.
#pragma once

#include <string_view>

#include "core/device_spec.h"
#include "core/status.h"

namespace kestrel::model {

// OK for the CPU. For CUDA: kInvalidArgument at field "device" when this
// LibTorch has no CUDA or the machine no GPU ("device=0: CUDA is not
// available (LibTorch built without CUDA or no GPU)"), or when the index is
// not one of the visible devices ("device=cuda:3: no such CUDA device (1
// visible: cuda:0)").
Status CheckDeviceAvailable(const DeviceSpec& spec);

// ParseDeviceSpec, then CheckDeviceAvailable: what `kestrel train`, `val
// model=` and `predict` run on their device= before they start.
Result<DeviceSpec> ResolveDevice(std::string_view text);

}  // namespace kestrel::model
