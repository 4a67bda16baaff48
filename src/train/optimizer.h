// Torch side of the optimizer: the reference's three parameter groups, the
// optimizer built from a ResolvedOptimizer (schedule.h), writing an
// IterationPlan into it, gradient-norm clipping and the model EMA.
//
// One optimizer step in the reference order (when plan.optimizer_step):
//   ClipGradNorm(model, 10) -> optimizer.step() -> optimizer.zero_grad()
//   -> ema.Update(model).
// Gradients are NOT zeroed at epoch boundaries: accumulation spans them.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "train/schedule.h"

namespace kestrel::train {

// The reference's groups, each in named_modules() pre-order.
struct ParameterGroups {
  std::vector<torch::Tensor> biases;        // group 0: every parameter named "*bias*"; no decay
  std::vector<torch::Tensor> decayed;       // group 1: other weights; decay
  std::vector<torch::Tensor> norm_weights;  // group 2: weights owned by a torch::nn norm layer
                                            // (BatchNorm*, InstanceNorm*, LayerNorm, GroupNorm)
                                            // or named "*logit_scale*"; no decay
  std::vector<std::string> bias_names, decayed_names, norm_weight_names;  // same order
};
// Frozen parameters (requires_grad false) are included, as in the reference.
ParameterGroups SplitParameterGroups(const torch::nn::Module& model);

// SGD(lr, momentum, nesterov) / Adam / AdamW(lr, betas (momentum, beta2),
// eps 1e-8) with param_groups()[0..2] = biases (decay 0), decayed
// (resolved.weight_decay), norm weights (decay 0). All groups exist even when
// empty so indices always match IterationPlan.
Result<std::unique_ptr<torch::optim::Optimizer>> BuildOptimizer(const ParameterGroups& groups,
                                                                const ResolvedOptimizer& resolved);

// Writes plan.lr[g], plan.weight_decay[g] and (SGD only) plan.momentum into
// the three groups. FailedPrecondition when the optimizer was not built by
// BuildOptimizer (group count / options type).
Status ApplyIterationPlan(torch::optim::Optimizer& optimizer, const IterationPlan& plan);

// Clips the global L2 norm of all gradients of `model` to `max_norm`; returns
// the norm before clipping. Parameters without a gradient are skipped.
double ClipGradNorm(const torch::nn::Module& model, double max_norm = 10.0);

// Exponential moving average of a model's floating-point parameters and
// buffers: after the n-th Update, d = decay * (1 - exp(-n / tau)) and
// ema = ema * d + model * (1 - d). Integer buffers (num_batches_tracked) keep
// their snapshot value, as in the reference. Not thread-safe.
class ModelEma {
 public:
  // Deep-copies (detached) every parameter and buffer of `model`. `updates`
  // continues a resumed EMA (the snapshot then being the saved EMA weights).
  explicit ModelEma(const torch::nn::Module& model, double decay = 0.9999, double tau = 2000.0,
                    int64_t updates = 0);

  // REQUIRES: `model` has the same parameter/buffer names and shapes as the
  // snapshot (FailedPrecondition otherwise; nothing is changed then).
  Status Update(const torch::nn::Module& model);
  // Copies the averaged values into `target` (same names), e.g. to validate
  // or checkpoint the EMA weights.
  Status CopyTo(torch::nn::Module& target) const;

  int64_t Updates() const { return updates_; }
  double DecayAt(int64_t updates) const;  // d for the given update count
  // (name, tensor) in named_parameters() then named_buffers() order.
  const std::vector<std::pair<std::string, torch::Tensor>>& Entries() const { return entries_; }

 private:
  double decay_;
  double tau_;
  int64_t updates_;
  std::vector<std::pair<std::string, torch::Tensor>> entries_;
};

}  // namespace kestrel::train
