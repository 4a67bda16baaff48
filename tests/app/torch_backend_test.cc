// What kestrel-torch's LibTorch backend lends the torch-free application
// layer (backend_torch/torch_backend.h over app/backends.h): the detector,
// the reference an export is verified against, the train entry, and the
// built-in job kinds' runners (app/job_runners.h), which reach LibTorch
// only through those slots. No model is loaded: milliseconds.
#include "backend_torch/torch_backend.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "app/backends.h"
#include "app/job_kinds.h"
#include "app/job_runners.h"

namespace kestrel {
namespace {

TEST(TorchBackend, LendsTheReferenceTheTrainerAndTheBuiltinRunners) {
  app::Backends b;
  b.program = "kestrel-torch";
  backend_torch::RegisterTorchBackend(b);
  EXPECT_TRUE(b.torch_detector);
  EXPECT_TRUE(b.reference_forward);
  EXPECT_TRUE(b.train);
  std::vector<std::string> kinds;
  for (const app::KindRunner& r : b.runners) {
    kinds.push_back(r.kind);
    EXPECT_TRUE(r.run) << r.kind;
  }
  EXPECT_EQ(kinds, (std::vector<std::string>{"train", "val", "export"}));

  // Installed, they are the runners of the table's rows: every built-in
  // kind runs in this program. The `kestrel` front's table has none but
  // `tune`'s, whose coordinator is torch-free and sits in its row.
  app::JobKindTable table = app::BuiltinJobKinds();
  for (const std::string& k : table.Names())
    EXPECT_EQ(static_cast<bool>(table.Find(k)->run), k == "tune") << k;
  const app::Backends installed = app::ProgramBackends();
  ASSERT_TRUE(app::InstallBackends(b, table).IsOk());
  ASSERT_TRUE(app::InstallBackends(installed, table).IsOk());
  for (const char* k : {"train", "val", "export", "tune"}) {
    ASSERT_NE(table.Find(k), nullptr) << k;
    EXPECT_TRUE(table.Find(k)->run) << k;
  }
}

TEST(TorchBackend, ReferenceForwardRefusesAnInputThatIsNoImageBatch) {
  // [B, 3, H, W] only; checked before any weights are read.
  Result<std::vector<app::FloatTensor>> r =
      backend_torch::TorchReferenceForward("missing.safetensors", {app::FloatTensor{{1, 1, 32, 32}, {}}});
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kInvalidArgument) << r.GetStatus().ToString();
  // No input: nothing to run, nothing loaded.
  Result<std::vector<app::FloatTensor>> none =
      backend_torch::TorchReferenceForward("missing.safetensors", {});
  ASSERT_TRUE(none.IsOk()) << none.GetStatus().ToString();
  EXPECT_TRUE(none->empty());
  // A real input and no weights: the loader's NotFound.
  Result<std::vector<app::FloatTensor>> missing = backend_torch::TorchReferenceForward(
      "missing.safetensors", {app::FloatTensor{{1, 3, 32, 32}, std::vector<float>(3 * 32 * 32, 0.5F)}});
  ASSERT_FALSE(missing.IsOk());
  EXPECT_EQ(missing.GetStatus().Code(), StatusCode::kNotFound) << missing.GetStatus().ToString();
}

}  // namespace
}  // namespace kestrel
