// Parameter groups, optimizer construction, schedule application, gradient
// clipping and the EMA on tiny modules.
#include "train/optimizer.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>

namespace kestrel::train {
namespace {

struct ConvBnImpl : torch::nn::Module {
  ConvBnImpl() {
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false)));
    bn = register_module("bn", torch::nn::BatchNorm2d(4));
    head = register_module("head", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 2, 1)));
  }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Conv2d head{nullptr};
};
TORCH_MODULE(ConvBn);

TEST(ParameterGroupsTest, BiasesNormWeightsAndDecayedWeights) {
  ConvBn m;
  const ParameterGroups g = SplitParameterGroups(*m);
  EXPECT_EQ(g.bias_names, (std::vector<std::string>{"bn.bias", "head.bias"}));
  EXPECT_EQ(g.decayed_names, (std::vector<std::string>{"conv.weight", "head.weight"}));
  EXPECT_EQ(g.norm_weight_names, (std::vector<std::string>{"bn.weight"}));
  ASSERT_EQ(g.norm_weights.size(), 1u);
  EXPECT_TRUE(g.norm_weights[0].is_same(m->bn->weight));
}

RunShape Shape() {
  RunShape s;
  s.epochs = 5;
  s.batches_per_epoch = 30;
  s.num_train_images = 480;
  s.batch_size = 16;
  s.num_classes = 3;
  return s;
}

TEST(BuildOptimizerTest, SgdGroupsCarryDecayOnlyOnGroupOne) {
  ConvBn m;
  OptimizerOptions o;
  o.optimizer = "SGD";
  auto r = ResolveOptimizer(o, Shape());
  ASSERT_TRUE(r.IsOk());
  auto opt = BuildOptimizer(SplitParameterGroups(*m), *r);
  ASSERT_TRUE(opt.IsOk()) << opt.GetStatus().ToString();
  auto& groups = (*opt)->param_groups();
  ASSERT_EQ(groups.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    auto& so = static_cast<torch::optim::SGDOptions&>(groups[i].options());
    EXPECT_EQ(so.lr(), 0.01);
    EXPECT_EQ(so.momentum(), 0.937);
    EXPECT_TRUE(so.nesterov());
    EXPECT_EQ(so.weight_decay(), i == 1 ? 5e-4 : 0.0);
  }
  EXPECT_EQ(groups[0].params().size(), 2u);

  auto schedule = Schedule::Create(o, Shape());
  ASSERT_TRUE(schedule.IsOk());
  schedule->Next();
  const IterationPlan plan = schedule->Next();
  ASSERT_TRUE(ApplyIterationPlan(**opt, plan).IsOk());
  auto& g0 = static_cast<torch::optim::SGDOptions&>(groups[0].options());
  auto& g1 = static_cast<torch::optim::SGDOptions&>(groups[1].options());
  EXPECT_EQ(g0.lr(), plan.lr[0]);
  EXPECT_EQ(g1.lr(), plan.lr[1]);
  EXPECT_EQ(g1.momentum(), plan.momentum);
  EXPECT_GT(g0.lr(), g1.lr());  // bias warmup starts high

  // One real step moves the weights.
  const auto before = m->conv->weight.detach().clone();
  m->head(m->bn(m->conv(torch::randn({2, 3, 8, 8})))).square().mean().backward();
  EXPECT_GT(ClipGradNorm(*m, 10.0), 0.0);
  (*opt)->step();
  (*opt)->zero_grad();
  EXPECT_FALSE(m->conv->weight.detach().equal(before));
}

TEST(BuildOptimizerTest, AutoBuildsAdamWWithBetas) {
  ConvBn m;
  auto r = ResolveOptimizer(OptimizerOptions(), Shape());
  ASSERT_TRUE(r.IsOk());
  auto opt = BuildOptimizer(SplitParameterGroups(*m), *r);
  ASSERT_TRUE(opt.IsOk()) << opt.GetStatus().ToString();
  auto& g1 = dynamic_cast<torch::optim::AdamWOptions&>((*opt)->param_groups()[1].options());
  EXPECT_EQ(std::get<0>(g1.betas()), 0.9);
  EXPECT_EQ(std::get<1>(g1.betas()), 0.999);
  EXPECT_DOUBLE_EQ(g1.lr(), 0.001429);
  EXPECT_EQ(g1.weight_decay(), 5e-4);
  EXPECT_EQ(dynamic_cast<torch::optim::AdamWOptions&>((*opt)->param_groups()[0].options()).weight_decay(),
            0.0);
}

TEST(ClipGradNormTest, ScalesToMaxNorm) {
  struct One : torch::nn::Module {
    One() { w = register_parameter("w", torch::zeros({2})); }
    torch::Tensor w;
  } m;
  m.w.mutable_grad() = torch::tensor({3.0f, 4.0f});
  EXPECT_NEAR(ClipGradNorm(m, 1.0), 5.0, 1e-6);
  EXPECT_NEAR(m.w.grad()[0].item<double>(), 0.6, 1e-5);
  EXPECT_NEAR(m.w.grad()[1].item<double>(), 0.8, 1e-5);
}

struct Tiny : torch::nn::Module {
  Tiny() {
    w = register_parameter("w", torch::ones({1}));
    count = register_buffer("count", torch::zeros({1}, torch::kLong));
  }
  torch::Tensor w, count;
};

TEST(ModelEmaTest, RampedDecayMath) {
  Tiny m;
  ModelEma ema(m);
  {
    torch::NoGradGuard g;
    m.w.fill_(0.0);
    m.count.fill_(5);
  }
  ASSERT_TRUE(ema.Update(m).IsOk());
  const double d1 = 0.9999 * (1 - std::exp(-1.0 / 2000));
  EXPECT_NEAR(ema.Entries()[0].second.item<double>(), d1, 1e-7);
  {
    torch::NoGradGuard g;
    m.w.fill_(2.0);
  }
  ASSERT_TRUE(ema.Update(m).IsOk());
  const double d2 = 0.9999 * (1 - std::exp(-2.0 / 2000));
  EXPECT_NEAR(ema.Entries()[0].second.item<double>(), d1 * d2 + 2 * (1 - d2), 1e-6);
  EXPECT_EQ(ema.Updates(), 2);
  EXPECT_EQ(ema.Entries()[1].second.item<int64_t>(), 0);  // integer buffer untouched
  EXPECT_NEAR(ema.DecayAt(1000000), 0.9999, 1e-12);

  Tiny target;
  ASSERT_TRUE(ema.CopyTo(target).IsOk());
  EXPECT_NEAR(target.w.item<double>(), d1 * d2 + 2 * (1 - d2), 1e-6);

  ConvBn other;
  EXPECT_FALSE(ema.Update(*other).IsOk());
}

}  // namespace
}  // namespace kestrel::train
