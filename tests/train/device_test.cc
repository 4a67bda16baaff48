// device=, amp and batch=-1 pieces that run on any machine: the torch-free
// device parser (core/device_spec.h), its torch side and the version shims
// (model/device.h, model/torch_compat.h) on this build, and AutoBatch's fit
// (train/autobatch.h). The trainer's out-of-memory halving is tested end to
// end in trainer_options_test.cc.
#include "model/device.h"

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/device_spec.h"
#include "model/torch_compat.h"
#include "train/autobatch.h"
#include "train/train_config.h"

namespace kestrel::train {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(DeviceSpecTest, AcceptsCpuCudaCudaNAndAnIndex) {
  struct Case {
    const char* text;
    bool cuda;
    int index;
    const char* canonical;
  };
  for (const Case& c :
       {Case{"cpu", false, 0, "cpu"}, Case{"cuda", true, 0, "cuda:0"}, Case{"cuda:0", true, 0, "cuda:0"},
        Case{"cuda:3", true, 3, "cuda:3"}, Case{"0", true, 0, "cuda:0"}, Case{"7", true, 7, "cuda:7"},
        Case{"1023", true, 1023, "cuda:1023"}}) {
    auto d = ParseDeviceSpec(c.text);
    ASSERT_TRUE(d.IsOk()) << c.text << ": " << d.GetStatus().ToString();
    EXPECT_EQ(d->IsCuda(), c.cuda) << c.text;
    EXPECT_EQ(d->index, c.index) << c.text;
    EXPECT_EQ(d->Canonical(), c.canonical) << c.text;
    EXPECT_EQ(d->text, c.text);
  }
}

TEST(DeviceSpecTest, RefusesEverythingElseNamingTheKey) {
  for (const char* text : {"", "gpu", "CPU", "Cuda", "cuda:", "cuda:-1", "-1", "1024", "cuda:1024", "0,1",
                           " 0", "0 ", "cuda:1x", "mps", "cuda0", "+1", "99999999999999999999", "cpu:0"}) {
    auto d = ParseDeviceSpec(text);
    ASSERT_FALSE(d.IsOk()) << "'" << text << "' was accepted";
    EXPECT_EQ(d.GetStatus().Code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(d.GetStatus().Where().field, "device") << text;
    EXPECT_EQ(d.GetStatus().Message().rfind(std::string("device=") + text + ": ", 0), 0u)
        << d.GetStatus().Message();
    EXPECT_NE(d.GetStatus().Message().find("cuda:N"), std::string::npos) << d.GetStatus().Message();
  }
  auto list = ParseDeviceSpec("0,1");
  EXPECT_NE(list.GetStatus().Message().find("one device per run"), std::string::npos);
  // The key is the caller's.
  EXPECT_EQ(ParseDeviceSpec("x", "gpu").GetStatus().Where().field, "gpu");
}

TEST(DeviceSpecTest, TrainConfigTakesTheSameFormsAndBatchMinusOne) {
  TrainConfig c;
  c.data = "d";
  for (const char* ok : {"cpu", "cuda", "cuda:1", "0"}) {
    c.device = ok;
    EXPECT_TRUE(c.Validate().IsOk()) << ok << ": " << c.Validate().ToString();
  }
  c.device = "gpu0";
  EXPECT_EQ(c.Validate().Where().field, "device");
  c.device = "cpu";
  c.loader.batch = kAutoBatch;
  EXPECT_TRUE(c.Validate().IsOk()) << c.Validate().ToString();
  c.loader.batch = 0;
  EXPECT_EQ(c.Validate().Where().field, "batch");
  EXPECT_NE(c.Validate().Message().find("-1"), std::string::npos) << c.Validate().Message();
  c.loader.batch = -2;
  EXPECT_EQ(c.Validate().Where().field, "batch");
  OptionSet s;
  c.Bind(s);
  EXPECT_TRUE(s.Set("batch", "-1").IsOk());
  EXPECT_FALSE(s.Set("batch", "-2").IsOk());
  EXPECT_TRUE(s.Set("amp", "false").IsOk());
  EXPECT_FALSE(c.amp);
}

TEST(DeviceTest, CpuIsAlwaysThereAndCudaIsRefusedClearlyWithoutIt) {
  auto cpu = ParseDeviceSpec("cpu");
  ASSERT_TRUE(cpu.IsOk());
  EXPECT_TRUE(model::CheckDeviceAvailable(*cpu).IsOk());
  auto td = model::ToTorchDevice(*cpu);
  ASSERT_TRUE(td.IsOk());
  EXPECT_TRUE(td->is_cpu());
  if (torch::cuda::is_available()) {
    // A CUDA machine: an index past the visible devices is refused.
    auto far = ParseDeviceSpec("1023");
    ASSERT_TRUE(far.IsOk());
    EXPECT_NE(model::CheckDeviceAvailable(*far).Message().find("no such CUDA device"), std::string::npos);
    auto zero = model::ResolveDevice("cuda:0");
    ASSERT_TRUE(zero.IsOk()) << zero.GetStatus().ToString();
    return;
  }
  for (const char* text : {"0", "cuda", "cuda:0", "3"}) {
    auto r = model::ResolveDevice(text);
    ASSERT_FALSE(r.IsOk()) << text;
    EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.GetStatus().Where().field, "device");
    EXPECT_EQ(r.GetStatus().Message(), std::string("device=") + text +
                                           ": CUDA is not available (LibTorch built without CUDA or no GPU)");
    auto spec = ParseDeviceSpec(text);
    EXPECT_EQ(model::ToTorchDevice(*spec).GetStatus().Message(), r.GetStatus().Message());
  }
  EXPECT_EQ(model::ResolveDevice("gpu").GetStatus().Where().field, "device");
  EXPECT_FALSE(model::QueryDeviceMemory(torch::Device(torch::kCPU)).has_value());
}

TEST(TorchCompatTest, HostToDeviceOnTheCpuIsACopyOfTheSameValues) {
  std::vector<float> host = {1.5f, -2.f, 3.25f, 0.f, 7.f, 11.f};
  auto blob = torch::from_blob(host.data(), {2, 3}, torch::kFloat);
  auto copy = model::HostToDevice(blob, torch::kCPU);
  EXPECT_TRUE(torch::equal(copy, blob));
  EXPECT_NE(copy.data_ptr<float>(), host.data()) << "the copy must not alias the loader's buffer";
  host[0] = 99.f;  // the buffer goes back to the loader
  EXPECT_EQ(copy[0][0].item<float>(), 1.5f);
}

TEST(TorchCompatTest, AutocastScopeTogglesCudaAutocastAndRestoresIt) {
  EXPECT_FALSE(model::CudaAutocastEnabled());
  {
    model::AutocastScope off(false);
    EXPECT_FALSE(model::CudaAutocastEnabled());
  }
  {
    model::AutocastScope on(true);
    EXPECT_TRUE(model::CudaAutocastEnabled());
    {
      model::AutocastScope nested(true, at::kHalf);
      EXPECT_TRUE(model::CudaAutocastEnabled());
    }
    EXPECT_TRUE(model::CudaAutocastEnabled()) << "the inner scope must restore the outer one's state";
    // CUDA autocast leaves CPU tensors alone: the CPU path stays float32.
    auto a = torch::ones({4, 4});
    EXPECT_EQ(torch::matmul(a, a).scalar_type(), torch::kFloat);
  }
  EXPECT_FALSE(model::CudaAutocastEnabled());
}

// The CPU scope (roofline_bench's bf16 lever): CPU matmuls run in bf16
// inside it, CUDA autocast stays off, and the state is restored after it.
TEST(TorchCompatTest, AutocastScopeOnTheCpuRunsMatmulsInBf16AndRestores) {
  EXPECT_FALSE(model::CpuAutocastEnabled());
  auto a = torch::ones({4, 4});
  {
    model::AutocastScope cpu(true, at::kBFloat16, c10::kCPU);
    EXPECT_TRUE(model::CpuAutocastEnabled());
    EXPECT_FALSE(model::CudaAutocastEnabled());
    EXPECT_EQ(torch::matmul(a, a).scalar_type(), torch::kBFloat16);
    {
      model::AutocastScope off(false, at::kBFloat16, c10::kCPU);
      EXPECT_TRUE(model::CpuAutocastEnabled()) << "a disabled scope changes nothing";
    }
  }
  EXPECT_FALSE(model::CpuAutocastEnabled());
  EXPECT_EQ(torch::matmul(a, a).scalar_type(), torch::kFloat);
}

TEST(TorchCompatTest, OutOfMemoryIsRecognisedWhateverLibTorchThrows) {
  try {
    model::ThrowOutOfMemory("CUDA out of memory. Tried to allocate 2.00 GiB (test)");
  } catch (const c10::Error& e) {
    EXPECT_TRUE(model::IsOutOfMemory(e));
    EXPECT_NE(dynamic_cast<const c10::OutOfMemoryError*>(&e), nullptr);
    EXPECT_NE(std::string(e.what_without_backtrace()).find("Tried to allocate"), std::string::npos);
  }
  // A plain c10::Error saying so (older builds, cuDNN/cuBLAS workspaces).
  try {
    TORCH_CHECK(false, "CUDA error: out of memory");
  } catch (const c10::Error& e) {
    EXPECT_TRUE(model::IsOutOfMemory(e));
  }
  try {
    TORCH_CHECK(false, "shape mismatch");
  } catch (const c10::Error& e) {
    EXPECT_FALSE(model::IsOutOfMemory(e));
  }
}

TEST(AutoBatchTest, ProbeSizesGrowWithTheDevice) {
  EXPECT_EQ(AutoBatchSizes(8 * kGiB), (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(AutoBatchSizes(141 * kGiB), (std::vector<int>{1, 2, 4, 8, 16, 32, 64}));
}

std::vector<AutoBatchProbe> Linear(const std::vector<int>& sizes, double base_gib, double per_image_gib) {
  std::vector<AutoBatchProbe> out;
  for (int b : sizes) out.push_back({b, static_cast<int64_t>((base_gib + per_image_gib * b) * kGiB), false});
  return out;
}

TEST(AutoBatchTest, FitsALineAndTakesTheLargestBatchUnderTheFraction) {
  // 2 GiB + 0.5 GiB per image on 80 GiB: 60% = 48 GiB -> (48 - 2) / 0.5 = 92.
  auto c = ChooseAutoBatch(Linear({1, 2, 4, 8, 16}, 2, 0.5), 80 * kGiB, kAutoBatchFraction, 16);
  EXPECT_FALSE(c.fallback) << c.why;
  EXPECT_EQ(c.batch, 92) << c.why;
  EXPECT_NEAR(c.predicted_fraction, (2 + 0.5 * 92) / 80.0, 1e-9);
  EXPECT_LE(c.predicted_fraction, kAutoBatchFraction);
  EXPECT_NE(c.why.find("batch 92"), std::string::npos) << c.why;
  // Noise around the line does not move it far; the fraction is the caller's.
  auto noisy = Linear({1, 2, 4, 8, 16}, 2, 0.5);
  noisy[2].used_bytes += kGiB / 8;
  EXPECT_NEAR(ChooseAutoBatch(noisy, 80 * kGiB, kAutoBatchFraction, 16).batch, 92, 2);
  EXPECT_EQ(ChooseAutoBatch(Linear({1, 2, 4, 8, 16}, 2, 0.5), 80 * kGiB, 0.3, 16).batch, 44);
}

TEST(AutoBatchTest, AnOutOfMemoryProbeCapsTheChoiceBelowIt) {
  // The line says 26, but batch 16 ran out of memory: the last size that worked.
  auto probes = Linear({1, 2, 4, 8}, 1, 0.5);
  probes.push_back({16, 0, true});
  auto c = ChooseAutoBatch(probes, 24 * kGiB, kAutoBatchFraction, 16);
  EXPECT_FALSE(c.fallback) << c.why;
  EXPECT_EQ(c.batch, 8) << c.why;
  EXPECT_NE(c.why.find("ran out of memory"), std::string::npos) << c.why;
  // Below the failure the fit stands.
  auto low = Linear({1, 2, 4, 8}, 1, 1.0);
  low.push_back({16, 0, true});
  EXPECT_EQ(ChooseAutoBatch(low, 24 * kGiB, kAutoBatchFraction, 16).batch, 13);
}

TEST(AutoBatchTest, MeasurementsThatDoNotGrowAreLeftOut) {
  auto probes = Linear({1, 2, 4, 8, 16}, 2, 0.5);
  probes[3].used_bytes = probes[2].used_bytes;  // the allocator had it cached: says nothing
  auto c = ChooseAutoBatch(probes, 80 * kGiB, kAutoBatchFraction, 16);
  EXPECT_FALSE(c.fallback);
  EXPECT_EQ(c.batch, 92);
  EXPECT_NE(c.why.find("over 4 sizes"), std::string::npos) << c.why;
}

TEST(AutoBatchTest, FallsBackWhenTheMeasurementsSayNothingUsable) {
  struct Case {
    std::vector<AutoBatchProbe> probes;
    int64_t total;
    const char* why;
  };
  const std::vector<Case> cases = {
      {{}, 80 * kGiB, "fewer than 2"},
      {Linear({1}, 2, 0.5), 80 * kGiB, "fewer than 2"},
      {Linear({1, 2, 4}, 5, 0), 80 * kGiB, "fewer than 2"},  // flat: nothing grew
      {{{1, 0, true}}, 80 * kGiB, "fewer than 2"},
      {Linear({1, 2, 4}, 60, 1), 80 * kGiB, "even batch 1"},     // the model alone is over 60%
      {Linear({1, 2, 4}, 0.1, 0.001), 80 * kGiB, "above 1024"},  // tiny images on a huge device
      {Linear({1, 2, 4}, 1, 1), 0, "device memory unknown"},
  };
  for (const auto& c : cases) {
    auto r = ChooseAutoBatch(c.probes, c.total, kAutoBatchFraction, 16);
    EXPECT_TRUE(r.fallback) << c.why;
    EXPECT_EQ(r.batch, 16) << c.why;
    EXPECT_NE(r.why.find(c.why), std::string::npos) << r.why;
    EXPECT_NE(r.why.find("using batch=16"), std::string::npos) << r.why;
  }
}

TEST(AutoBatchTest, HalvingStopsAtOne) {
  EXPECT_EQ(HalveBatch(64), 32);
  EXPECT_EQ(HalveBatch(5), 2);
  EXPECT_EQ(HalveBatch(3), 1);
  EXPECT_EQ(HalveBatch(2), 1);
  EXPECT_EQ(HalveBatch(1), 1);
}

}  // namespace
}  // namespace kestrel::train
