// trainer.h without LibTorch: this file is compiled without the LibTorch
// include path and linked with kestrel_train_config only (no kestrel_train),
// so a torch header reaching trainer.h, or a definition of its types moving
// back into a torch TU, breaks this build. Also what those types promise:
// each exit reason's name and exit code, and TrainOptions' loss view.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/failure.h"
#include "train/trainer.h"

namespace kestrel::train {
namespace {

TEST(TrainerTypesTest, EachExitReasonHasItsNameFailureAndExitCode) {
  struct Case {
    ExitReason reason;
    const char* name;
    FailureReason failure;
    int exit_code;
  };
  const Case cases[] = {
      {ExitReason::kCompleted, "completed", FailureReason::kNone, kTrainExitOk},
      {ExitReason::kEarlyStopped, "early_stopped", FailureReason::kNone, kTrainExitOk},
      {ExitReason::kStopped, "stopped", FailureReason::kStopped, kTrainExitStopped},
      {ExitReason::kDiverged, "diverged", FailureReason::kDiverged, kTrainExitDiverged},
      {ExitReason::kHalted, "halted", FailureReason::kError, kTrainExitError},
  };
  for (const Case& c : cases) {
    TrainSummary s;
    s.reason = c.reason;
    EXPECT_STREQ(ExitReasonName(c.reason), c.name);
    EXPECT_EQ(s.Failure(), c.failure) << c.name;
    EXPECT_EQ(s.ExitCode(), c.exit_code) << c.name;
  }
}

TEST(TrainerTypesTest, PhaseNames) {
  EXPECT_STREQ(PhaseName(Phase::kSetup), "setup");
  EXPECT_STREQ(PhaseName(Phase::kVal), "val");
  EXPECT_STREQ(PhaseName(Phase::kPlots), "plots");
}

TEST(TrainerTypesTest, EffectiveLossTakesTheKeysGainsAndKeepsTheExtras) {
  TrainOptions o;
  o.box = 1.25;
  o.cls = 2.5;
  o.dfl = 0.75;
  o.loss.box_gain = 99;  // ignored: the keys win
  o.loss.class_weights = {1.0, 0.5};
  o.loss.num_classes = 2;
  o.loss.assigner.top_k = 7;
  const LossOptions lo = o.EffectiveLoss();
  EXPECT_EQ(lo.box_gain, 1.25);
  EXPECT_EQ(lo.cls_gain, 2.5);
  EXPECT_EQ(lo.dfl_gain, 0.75);
  EXPECT_EQ(lo.class_weights, (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(lo.assigner.top_k, 7);
}

TEST(TrainerTypesTest, ValidateChecksTheLossExtrasAfterTheKeys) {
  TrainOptions o;
  o.data = "shapes";
  ASSERT_TRUE(o.Validate().IsOk()) << o.Validate().Message();
  o.loss.num_classes = 3;
  o.loss.class_weights = {1.0, 2.0};  // one short
  Status s = o.Validate();
  EXPECT_EQ(s.Code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Where().field, "class_weights");
  o.loss.class_weights.clear();
  o.loss.assigner.top_k = 0;
  EXPECT_EQ(o.Validate().Where().field, "top_k");
  o.loss.assigner.top_k = 10;
  o.box = -1;  // a key's range: TrainConfig's check comes first
  EXPECT_EQ(o.Validate().Where().field, "box");
}

// Issue 28 item 5: `kestrel train` writes where the reference trainer does,
// runs/detect/train, then train2, train3, ... (exist_ok reuses train;
// run_dir wins over both).
TEST(TrainerTypesTest, RunFolderIsTheReferencesRunsDetectTrainThenTrain2) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("kestrel_run_dir_" + std::to_string(::getpid()));
  fs::remove_all(root);
  TrainConfig c;
  EXPECT_EQ(c.project, "runs/detect");
  EXPECT_EQ(c.name, "train");
  c.project = (root / "runs/detect").string();
  Env& env = Env::Default();
  EXPECT_EQ(ResolveRunDir(env, c), c.project + "/train");
  fs::create_directories(root / "runs/detect/train");
  EXPECT_EQ(ResolveRunDir(env, c), c.project + "/train2");
  fs::create_directories(root / "runs/detect/train2");
  EXPECT_EQ(ResolveRunDir(env, c), c.project + "/train3");
  c.exist_ok = true;
  EXPECT_EQ(ResolveRunDir(env, c), c.project + "/train");
  c.run_dir = "elsewhere/x";
  EXPECT_EQ(ResolveRunDir(env, c), "elsewhere/x");
  fs::remove_all(root);
}

}  // namespace
}  // namespace kestrel::train
