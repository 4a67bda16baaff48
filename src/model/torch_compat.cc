// The one TU that knows LibTorch versions and CUDA (torch_compat.h). The
// version split is the autocast API: 1.13 (and 2.0-2.3) had CUDA-only
// functions (at::autocast::set_enabled, set_autocast_gpu_dtype), 2.4
// replaced them with device-type ones (set_autocast_enabled(at::kCUDA, ..))
// and deprecated the old, which -Werror turns into a build failure.
#include "model/torch_compat.h"

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <ATen/autocast_mode.h>
#include <c10/core/DeviceGuard.h>
#include <dlfcn.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <sstream>
#include <string_view>

#include "model/device.h"

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define KESTREL_AUTOCAST_DEVICE_API 1
#else
#define KESTREL_AUTOCAST_DEVICE_API 0
#endif

namespace kestrel::model {

Status CheckDeviceAvailable(const DeviceSpec& spec) {
  if (!spec.IsCuda()) return {};
  const ErrorLocation where{"", 0, "device"};
  if (!torch::cuda::is_available()) {
    return Status::InvalidArgument(
        "device=" + spec.text + ": CUDA is not available (LibTorch built without CUDA or no GPU)", where);
  }
  const auto count = static_cast<int64_t>(torch::cuda::device_count());
  if (spec.index >= count) {
    return Status::InvalidArgument("device=" + spec.text + ": no such CUDA device (" + std::to_string(count) +
                                       " visible: cuda:0" +
                                       (count > 1 ? " to cuda:" + std::to_string(count - 1) : "") + ")",
                                   where);
  }
  return {};
}

Result<DeviceSpec> ResolveDevice(std::string_view text) {
  KESTREL_ASSIGN_OR_RETURN(DeviceSpec spec, ParseDeviceSpec(text));
  KESTREL_RETURN_IF_ERROR(CheckDeviceAvailable(spec));
  return spec;
}

Result<torch::Device> ToTorchDevice(const DeviceSpec& spec) {
  KESTREL_RETURN_IF_ERROR(CheckDeviceAvailable(spec));
  if (!spec.IsCuda()) return torch::Device(torch::kCPU);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(spec.index));
}

torch::Tensor HostToDevice(const torch::Tensor& host, torch::Device device) {
  if (!device.is_cuda()) return host.to(device, /*non_blocking=*/false, /*copy=*/true);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

AutocastScope::AutocastScope(bool enabled, at::ScalarType dtype, c10::DeviceType device)
    : enabled_(enabled), device_(device) {
  if (!enabled_) return;
  TORCH_CHECK(device_ == c10::kCUDA || device_ == c10::kCPU, "AutocastScope: CUDA or CPU only");
#if KESTREL_AUTOCAST_DEVICE_API
  previous_enabled_ = at::autocast::is_autocast_enabled(device_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_dtype(device_, dtype);
  at::autocast::set_autocast_enabled(device_, true);
#else
  if (device_ == c10::kCPU) {
    previous_enabled_ = at::autocast::is_cpu_enabled();
    previous_dtype_ = at::autocast::get_autocast_cpu_dtype();
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(true);
  } else {
    previous_enabled_ = at::autocast::is_enabled();
    previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(true);
  }
#endif
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#if KESTREL_AUTOCAST_DEVICE_API
  at::autocast::set_autocast_enabled(device_, previous_enabled_);
  at::autocast::set_autocast_dtype(device_, previous_dtype_);
#else
  if (device_ == c10::kCPU) {
    at::autocast::set_cpu_enabled(previous_enabled_);
    at::autocast::set_autocast_cpu_dtype(previous_dtype_);
  } else {
    at::autocast::set_enabled(previous_enabled_);
    at::autocast::set_autocast_gpu_dtype(previous_dtype_);
  }
#endif
}

bool CudaAutocastEnabled() {
#if KESTREL_AUTOCAST_DEVICE_API
  return at::autocast::is_autocast_enabled(at::kCUDA);
#else
  return at::autocast::is_enabled();
#endif
}

bool CpuAutocastEnabled() {
#if KESTREL_AUTOCAST_DEVICE_API
  return at::autocast::is_autocast_enabled(at::kCPU);
#else
  return at::autocast::is_cpu_enabled();
#endif
}

bool IsOutOfMemory(const c10::Error& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr) return true;
  const std::string_view msg = e.what_without_backtrace();
  return msg.find("CUDA out of memory") != std::string_view::npos ||
         msg.find("CUDA error: out of memory") != std::string_view::npos;
}

void ThrowOutOfMemory(const std::string& what) {
  throw c10::OutOfMemoryError(c10::SourceLocation{__func__, __FILE__, static_cast<uint32_t>(__LINE__)}, what);
}

std::optional<DeviceMemory> QueryDeviceMemory(torch::Device device) {
  if (!device.is_cuda() || !torch::cuda::is_available()) return std::nullopt;
  // cudaError_t cudaMemGetInfo(size_t* free, size_t* total), from the CUDA
  // runtime LibTorch's CUDA libraries loaded; 0 is cudaSuccess.
  using MemGetInfo = int (*)(size_t*, size_t*);
  void* symbol = dlsym(RTLD_DEFAULT, "cudaMemGetInfo");
  if (symbol == nullptr) return std::nullopt;
  auto mem_get_info =
      reinterpret_cast<MemGetInfo>(symbol);  // NOLINT(cppcoreguidelines-pro-type-reinterpret-cast)
  const c10::DeviceGuard guard(device);      // the runtime answers for the current device
  size_t free_bytes = 0, total_bytes = 0;
  if (mem_get_info(&free_bytes, &total_bytes) != 0) return std::nullopt;
  return DeviceMemory{static_cast<int64_t>(free_bytes), static_cast<int64_t>(total_bytes)};
}

void SynchronizeDevice(torch::Device device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::string TorchBuildText() {
  std::string text = "LibTorch " TORCH_VERSION;
  if (!torch::cuda::is_available()) return text + " (CPU)";
  const auto n = torch::cuda::device_count();
  return text + " (CUDA, " + std::to_string(n) + (n == 1 ? " device)" : " devices)");
}

TorchFacts ReadTorchFacts() {
  TorchFacts f;
  f.version = TORCH_VERSION;
  // at::show_config() lists "CUDA Runtime 12.1" and "CuDNN 8.9.2" lines in
  // a CUDA build; a CPU build has neither.
  std::istringstream config(at::show_config());
  std::string line;
  auto after = [](const std::string& l, const std::string& key) -> std::string {
    const size_t at = l.find(key);
    if (at == std::string::npos) return "";
    std::string v = l.substr(at + key.size());
    while (!v.empty() && (v.front() == ' ' || v.front() == ':')) v.erase(v.begin());
    return v;
  };
  while (std::getline(config, line)) {
    if (f.cuda_build.empty()) f.cuda_build = after(line, "CUDA Runtime");
    if (f.cudnn_build.empty()) f.cudnn_build = after(line, "CuDNN");
  }
  f.cuda_available = torch::cuda::is_available();
  f.cuda_devices = f.cuda_available ? static_cast<int64_t>(torch::cuda::device_count()) : 0;
  f.threads = at::get_num_threads();
  return f;
}

}  // namespace kestrel::model
