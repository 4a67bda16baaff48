// app/train_run.h: `kestrel train`'s one call goes to the program's train
// backend (a fake here: no LibTorch, milliseconds), a program without one
// says which program trains, and the closing text never shows an mAP that
// was not measured.
#include "app/train_run.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "app/backends.h"
#include "app/job_kinds.h"

namespace kestrel::app {
namespace {

Status Install(Backends b) { return InstallBackends(std::move(b), JobKinds()); }

TEST(TrainRunTest, WithoutATrainBackendItNamesTheProgramThatTrains) {
  Backends b;
  b.program = "kestrel-deploy";
  ASSERT_TRUE(Install(std::move(b)).IsOk());
  auto r = RunTraining(train::TrainOptions{}, train::TrainHooks{});
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.GetStatus().Message().find("kestrel-torch"), std::string::npos) << r.GetStatus().Message();
  EXPECT_NE(r.GetStatus().Message().find("kestrel-deploy has no train backend"), std::string::npos);
}

TEST(TrainRunTest, TrainsThroughTheInstalledBackendWithTheCallersOptionsAndHooks) {
  int calls = 0;
  const train::TrainHooks* seen_hooks = nullptr;
  Backends b;
  b.program = "kestrel-torch";
  b.train = [&](const train::TrainOptions& o, const train::TrainHooks& h) -> Result<train::TrainSummary> {
    ++calls;
    seen_hooks = &h;
    train::TrainSummary s;
    s.reason = train::ExitReason::kDiverged;
    s.run_dir = o.run_dir;
    return s;
  };
  ASSERT_TRUE(Install(std::move(b)).IsOk());
  train::TrainOptions o;
  o.run_dir = "runs/x";
  train::TrainHooks hooks;
  auto r = RunTraining(o, hooks);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().Message();
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(seen_hooks, &hooks);
  EXPECT_EQ(r->run_dir, "runs/x");
  EXPECT_EQ(r->ExitCode(), kTrainExitDiverged);
  ASSERT_TRUE(Install(Backends{}).IsOk());  // the next test starts with none
}

TEST(TrainRunTest, SummaryTextShowsTheMapOnlyWhenTheEpochsWereValidated) {
  train::TrainSummary s;
  s.reason = train::ExitReason::kCompleted;
  s.message = "3 epochs";
  s.run_dir = "runs/train/exp";
  s.best_epoch = 2;
  s.best_map50 = 0.5;
  s.validated = true;
  std::string text = TrainSummaryText(s);
  EXPECT_EQ(text.rfind("\ncompleted: 3 epochs\nrun directory: runs/train/exp\n", 0), 0u) << text;
  EXPECT_NE(text.find("best epoch 2: mAP50 0.5"), std::string::npos) << text;
  EXPECT_NE(text.find("resume: runs/train/exp/weights/last.ckpt"), std::string::npos) << text;

  s.validated = false;
  s.not_validated = "val=false";
  s.warnings = {"label_smoothing=0.1 is deprecated"};
  text = TrainSummaryText(s);
  EXPECT_EQ(text.find("mAP50"), std::string::npos) << text;
  EXPECT_NE(text.find("best epoch: not validated (val=false)"), std::string::npos) << text;
  EXPECT_NE(text.find("warning: label_smoothing=0.1 is deprecated\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace kestrel::app
