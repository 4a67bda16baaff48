#include "model/device_selftest.h"

#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <sstream>

#include "model/torch_compat.h"

namespace kestrel::model {
namespace {

// The first line, at most 300 bytes: LibTorch's messages can be pages long.
std::string FirstLine(const std::string& s) {
  const size_t nl = s.find('\n');
  const std::string line = nl == std::string::npos ? s : s.substr(0, nl);
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

}  // namespace

DeviceSelfTest RunDeviceSelfTest(const std::string& device) {
  DeviceSelfTest r;
  r.device = device;
  const auto start = std::chrono::steady_clock::now();
  try {
    const torch::Device dev(device);
    if (dev.is_cuda()) {
      // LibTorch's own error for these is a page of dispatch keys.
      if (!torch::cuda::is_available()) {
        r.error =
            "CUDA is not available to LibTorch here (a CPU build of LibTorch, no NVIDIA driver, or no GPU)";
        return r;
      }
      const auto count = static_cast<int64_t>(torch::cuda::device_count());
      if (dev.index() >= count) {
        r.error = "no CUDA device " + std::to_string(dev.index()) + " (LibTorch sees " +
                  std::to_string(count) + ")";
        return r;
      }
    }
    torch::manual_seed(0);
    const auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(dev);
    // Two 3x3 convolutions (3 -> 8 channels at stride 2, 8 -> 4) as leaf
    // tensors, so the pass needs no module classes.
    std::vector<torch::Tensor> params = {(torch::randn({8, 3, 3, 3}) * 0.2).to(opts).requires_grad_(),
                                         torch::zeros({8}, opts).requires_grad_(),
                                         (torch::randn({4, 8, 3, 3}) * 0.2).to(opts).requires_grad_(),
                                         torch::zeros({4}, opts).requires_grad_()};
    const torch::Tensor x = torch::randn({2, 3, 32, 32}).to(opts);
    const torch::Tensor h = torch::silu(torch::conv2d(x, params[0], params[1], 2, 1));
    const torch::Tensor loss = torch::silu(torch::conv2d(h, params[2], params[3], 1, 1)).pow(2).mean();
    loss.backward();
    SynchronizeDevice(dev);
    bool finite = std::isfinite(loss.item<double>());
    for (const auto& p : params)
      finite = finite && p.grad().defined() && p.grad().isfinite().all().item<bool>();
    if (!finite) {
      r.error = "the loss or a gradient is not finite (NaN or infinity) on " + device;
    } else {
      r.ok = true;
    }
  } catch (const std::exception& e) {
    r.error = FirstLine(e.what());
  }
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

std::vector<std::string> SelfTestDevices(const std::string& spec) {
  std::vector<std::string> out;
  auto add = [&out](const std::string& d) {
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  };
  if (spec.empty() || spec == "auto") {
    add("cpu");
    if (torch::cuda::is_available()) {
      const auto n = static_cast<int>(torch::cuda::device_count());
      for (int i = 0; i < n; ++i) add("cuda:" + std::to_string(i));
    }
    return out;
  }
  std::stringstream in(spec);
  std::string word;
  while (std::getline(in, word, ',')) {
    if (word.empty()) continue;
    if (word == "cpu" || word.rfind("cpu:", 0) == 0) {
      add("cpu");
    } else if (word.rfind("gpu:", 0) == 0) {
      const std::string rest = word.substr(4);
      add("cuda:" + rest.substr(0, rest.find(':')));
    } else {
      add(word);
    }
  }
  return out;
}

}  // namespace kestrel::model
