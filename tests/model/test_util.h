// Shared helpers for the model tests (torch layer).
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include <string>

#include "core/env.h"

namespace kestrel::model::testing {

// Paths as single literals: GCC 12 reports a false -Wstringop-overread on
// std::string + literal when the test PCH changes what it inlines.
inline std::string RefDir() { return KESTREL_SHARED_DIR "/reference"; }
inline std::string RefWeights() { return KESTREL_SHARED_DIR "/reference/yolov8n_nc3_weights.safetensors"; }
inline std::string RefForward() {
  return KESTREL_SHARED_DIR "/reference/yolov8n_nc3_forward_loss.safetensors";
}
inline bool HaveReference() { return Env::Default().Stat(RefWeights()).exists; }

// Fixture base: two intra-op threads (the build machine is shared).
class TorchTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { at::set_num_threads(2); }
};

// Random weights and BN statistics so tests see every tensor matter.
inline void Randomize(torch::nn::Module& m, uint64_t seed) {
  torch::NoGradGuard no_grad;
  at::manual_seed(seed);
  for (auto& item : m.named_parameters()) {
    if (item.key().find("dfl") != std::string::npos) continue;
    item.value().copy_(at::randn_like(item.value()) * 0.1);
  }
  for (auto& item : m.named_buffers()) {
    at::Tensor& t = item.value();
    if (item.key().find("running_var") != std::string::npos) {
      t.copy_(at::rand_like(t) + 0.5);
    } else if (item.key().find("running_mean") != std::string::npos) {
      t.copy_(at::randn_like(t) * 0.1);
    } else {
      t.fill_(static_cast<int64_t>(seed % 1000));
    }
  }
}

// max |a - b|, max |a - b| / max(|b|, floor) per element, and
// max |a - b| / max |b| (relative to the tensor's scale).
struct ErrorStats {
  double max_abs = 0;
  double max_rel = 0;
  double rel_to_max = 0;
};
inline ErrorStats Compare(const at::Tensor& a, const at::Tensor& b, double floor = 1e-3) {
  at::Tensor d = (a - b).abs();
  const double max_abs = d.max().item<double>();
  return {max_abs, (d / b.abs().clamp_min(floor)).max().item<double>(),
          max_abs / b.abs().max().item<double>()};
}

}  // namespace kestrel::model::testing
