// The places where Kestrel's torch code depends on the LibTorch version or
// on CUDA, behind one header and one TU (torch_compat.cc, the only file
// that checks TORCH_VERSION_*): the device (model/device.h's checks), the
// host-to-device copy of a batch, CUDA autocast, what a CUDA out-of-memory
// looks like, and the device's free memory. Everything here is a no-op or
// an exact copy of the old behaviour on the CPU.
#pragma once

#include <c10/util/Exception.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "core/device_spec.h"
#include "core/status.h"

namespace kestrel::model {

// The torch::Device of a spec, after CheckDeviceAvailable (same errors).
Result<torch::Device> ToTorchDevice(const DeviceSpec& spec);

// A host tensor (e.g. torch::from_blob over a loader batch) on `device`, as
// a new tensor that does not alias `host`. CPU: host.to(device, copy=true),
// a plain copy, bit for bit what the trainer always did. CUDA: the batch is
// copied into page-locked (pinned) memory from LibTorch's caching host
// allocator and sent with non_blocking=true; the allocator keeps the pinned
// block until the copy has run, so `host` may be reused at once.
torch::Tensor HostToDevice(const torch::Tensor& host, torch::Device device);

// Autocast while alive (the forward of a training step) for `device`'s
// type, CUDA by default: ops run in `dtype` where autocast's lists say so
// (convolutions, matmuls), the rest in float32; weights stay float32. bf16
// needs no loss scaling (its range is float32's), which is why the trainer
// uses it. device=kCPU is LibTorch's CPU autocast (bf16 only; the
// roofline benchmark measures it, docs/speed.md). enabled=false: nothing.
// Restores the previous state on destruction and clears autocast's weight
// cast cache when the outermost scope ends.
class AutocastScope {
 public:
  explicit AutocastScope(bool enabled, at::ScalarType dtype = at::kBFloat16,
                         c10::DeviceType device = c10::kCUDA);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_ = false;
  c10::DeviceType device_ = c10::kCUDA;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kHalf;
};
// Whether CUDA (CPU) autocast is on right now on this thread (tests).
bool CudaAutocastEnabled();
bool CpuAutocastEnabled();

// A CUDA (or host) allocation failure as LibTorch reports it: a
// c10::OutOfMemoryError (LibTorch 1.13 and 2.x), or a c10::Error whose
// message says "CUDA out of memory" / "CUDA error: out of memory" (what
// cuDNN/cuBLAS workspace failures and older builds throw).
bool IsOutOfMemory(const c10::Error& e);
// Throws the c10::OutOfMemoryError LibTorch throws for a CUDA OOM, with
// `what` as its message: the test hook's fault (trainer.h) on any machine.
[[noreturn]] void ThrowOutOfMemory(const std::string& what);

// The CUDA device's free and total memory (the runtime's cudaMemGetInfo,
// looked up in the process at run time so no CUDA header or library is
// needed at build time); nullopt on the CPU, without CUDA, or when the
// runtime cannot be reached.
struct DeviceMemory {
  int64_t free_bytes = 0;
  int64_t total_bytes = 0;
};
std::optional<DeviceMemory> QueryDeviceMemory(torch::Device device);
// Waits for the device's queued work (CUDA); nothing on the CPU.
void SynchronizeDevice(torch::Device device);

// "LibTorch 1.13.1 (CPU)" / "LibTorch 2.11.0 (CUDA, 1 device)": for logs.
std::string TorchBuildText();

// LibTorch's build facts for the environment fingerprint (app/fingerprint.h):
// version, the CUDA runtime and cuDNN it was built with ("" for a CPU
// build), whether CUDA initialises here and how many devices it sees, and
// the intra-op thread count.
struct TorchFacts {
  std::string version, cuda_build, cudnn_build;
  bool cuda_available = false;
  int64_t cuda_devices = 0;
  int64_t threads = 0;
};
TorchFacts ReadTorchFacts();

}  // namespace kestrel::model
