#include "train/optimizer.h"

// The module headers rely on their functional headers being included first.
#include <torch/nn/functional/batchnorm.h>
#include <torch/nn/functional/instancenorm.h>
#include <torch/nn/functional/normalization.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/instancenorm.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <tuple>

namespace kestrel::train {
namespace {

bool IsNormLayer(const torch::nn::Module& m) {
  return dynamic_cast<const torch::nn::BatchNorm1dImpl*>(&m) != nullptr ||
         dynamic_cast<const torch::nn::BatchNorm2dImpl*>(&m) != nullptr ||
         dynamic_cast<const torch::nn::BatchNorm3dImpl*>(&m) != nullptr ||
         dynamic_cast<const torch::nn::InstanceNorm1dImpl*>(&m) != nullptr ||
         dynamic_cast<const torch::nn::InstanceNorm2dImpl*>(&m) != nullptr ||
         dynamic_cast<const torch::nn::InstanceNorm3dImpl*>(&m) != nullptr ||
         dynamic_cast<const torch::nn::LayerNormImpl*>(&m) != nullptr ||
         dynamic_cast<const torch::nn::GroupNormImpl*>(&m) != nullptr;
}

void AddOwnParameters(const std::string& prefix, const torch::nn::Module& m, ParameterGroups& g) {
  const bool norm = IsNormLayer(m);
  for (const auto& item : m.named_parameters(/*recurse=*/false)) {
    const std::string name = prefix.empty() ? item.key() : prefix + "." + item.key();
    if (name.find("bias") != std::string::npos) {
      g.biases.push_back(item.value());
      g.bias_names.push_back(name);
    } else if (norm || name.find("logit_scale") != std::string::npos) {
      g.norm_weights.push_back(item.value());
      g.norm_weight_names.push_back(name);
    } else {
      g.decayed.push_back(item.value());
      g.decayed_names.push_back(name);
    }
  }
}

// Parameters then buffers, by full name.
std::vector<std::pair<std::string, torch::Tensor>> NamedState(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& p : m.named_parameters(true)) out.emplace_back(p.key(), p.value());
  for (const auto& b : m.named_buffers(true)) out.emplace_back(b.key(), b.value());
  return out;
}

Status SameLayout(const std::vector<std::pair<std::string, torch::Tensor>>& a,
                  const std::vector<std::pair<std::string, torch::Tensor>>& b) {
  if (a.size() != b.size()) {
    return Status::FailedPrecondition("EMA: model has " + std::to_string(b.size()) + " tensors, EMA " +
                                      std::to_string(a.size()));
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || !a[i].second.sizes().equals(b[i].second.sizes())) {
      return Status::FailedPrecondition("EMA: tensor '" + b[i].first + "' does not match the EMA's '" +
                                        a[i].first + "'");
    }
  }
  return Status();
}

}  // namespace

ParameterGroups SplitParameterGroups(const torch::nn::Module& model) {
  ParameterGroups g;
  AddOwnParameters("", model, g);
  // include_self=false: the root need not be owned by a shared_ptr.
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    AddOwnParameters(item.key(), *item.value(), g);
  }
  return g;
}

Result<std::unique_ptr<torch::optim::Optimizer>> BuildOptimizer(const ParameterGroups& groups,
                                                                const ResolvedOptimizer& r) {
  try {
    const std::vector<std::pair<const std::vector<torch::Tensor>*, double>> spec = {
        {&groups.biases, 0.0}, {&groups.decayed, r.weight_decay}, {&groups.norm_weights, 0.0}};
    std::vector<torch::optim::OptimizerParamGroup> param_groups;
    switch (r.kind) {
      case OptimizerKind::kSgd: {
        auto defaults = torch::optim::SGDOptions(r.lr).momentum(r.momentum).nesterov(r.nesterov);
        for (const auto& [params, wd] : spec) {
          auto o = std::make_unique<torch::optim::SGDOptions>(defaults);
          o->weight_decay(wd);
          param_groups.emplace_back(*params, std::move(o));
        }
        return std::unique_ptr<torch::optim::Optimizer>(
            std::make_unique<torch::optim::SGD>(std::move(param_groups), defaults));
      }
      case OptimizerKind::kAdam: {
        auto defaults = torch::optim::AdamOptions(r.lr).betas(std::make_tuple(r.momentum, r.beta2));
        for (const auto& [params, wd] : spec) {
          auto o = std::make_unique<torch::optim::AdamOptions>(defaults);
          o->weight_decay(wd);
          param_groups.emplace_back(*params, std::move(o));
        }
        return std::unique_ptr<torch::optim::Optimizer>(
            std::make_unique<torch::optim::Adam>(std::move(param_groups), defaults));
      }
      case OptimizerKind::kAdamW: {
        auto defaults =
            torch::optim::AdamWOptions(r.lr).betas(std::make_tuple(r.momentum, r.beta2)).weight_decay(0.0);
        for (const auto& [params, wd] : spec) {
          auto o = std::make_unique<torch::optim::AdamWOptions>(defaults);
          o->weight_decay(wd);
          param_groups.emplace_back(*params, std::move(o));
        }
        return std::unique_ptr<torch::optim::Optimizer>(
            std::make_unique<torch::optim::AdamW>(std::move(param_groups), defaults));
      }
    }
    return Status::Internal("BuildOptimizer: unknown optimizer kind");
  } catch (const c10::Error& e) {
    return Status::InvalidArgument(std::string("BuildOptimizer: ") + e.what_without_backtrace());
  }
}

Status ApplyIterationPlan(torch::optim::Optimizer& optimizer, const IterationPlan& plan) {
  auto& groups = optimizer.param_groups();
  if (groups.size() != 3) {
    return Status::FailedPrecondition("optimizer has " + std::to_string(groups.size()) +
                                      " param groups; BuildOptimizer makes 3");
  }
  for (size_t g = 0; g < 3; ++g) {
    auto& options = groups[g].options();
    if (auto* sgd = dynamic_cast<torch::optim::SGDOptions*>(&options)) {
      sgd->lr(plan.lr[g]).momentum(plan.momentum).weight_decay(plan.weight_decay[g]);
    } else if (auto* adamw = dynamic_cast<torch::optim::AdamWOptions*>(&options)) {
      adamw->lr(plan.lr[g]).weight_decay(plan.weight_decay[g]);
    } else if (auto* adam = dynamic_cast<torch::optim::AdamOptions*>(&options)) {
      adam->lr(plan.lr[g]).weight_decay(plan.weight_decay[g]);
    } else {
      return Status::FailedPrecondition("optimizer group options are not SGD/Adam/AdamW");
    }
  }
  return Status();
}

double ClipGradNorm(const torch::nn::Module& model, double max_norm) {
  return torch::nn::utils::clip_grad_norm_(model.parameters(true), max_norm);
}

ModelEma::ModelEma(const torch::nn::Module& model, double decay, double tau, int64_t updates)
    : decay_(decay), tau_(tau), updates_(updates) {
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : NamedState(model)) entries_.emplace_back(name, t.detach().clone());
}

double ModelEma::DecayAt(int64_t updates) const {
  return decay_ * (1 - std::exp(-static_cast<double>(updates) / tau_));
}

Status ModelEma::Update(const torch::nn::Module& model) {
  const auto current = NamedState(model);
  KESTREL_RETURN_IF_ERROR(SameLayout(entries_, current));
  ++updates_;
  const double d = DecayAt(updates_);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < entries_.size(); ++i) {
    auto& ema = entries_[i].second;
    if (!ema.is_floating_point()) continue;
    ema.mul_(d);
    ema.add_(current[i].second.detach().to(ema.device(), ema.scalar_type()) * (1 - d));
  }
  return Status();
}

Status ModelEma::CopyTo(torch::nn::Module& target) const {
  const auto dst = NamedState(target);
  KESTREL_RETURN_IF_ERROR(SameLayout(entries_, dst));
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < entries_.size(); ++i) {
    auto t = dst[i].second;  // shares storage with the module's tensor
    t.copy_(entries_[i].second);
  }
  return Status();
}

}  // namespace kestrel::train
