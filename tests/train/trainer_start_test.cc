// What a training run's start leaves behind and reports (issue 26): a start
// that fails (weights that do not load, weights of another architecture, an
// error in the first iterations) leaves no run folder it made;
// label_smoothing is accepted, stored, warned about and changes nothing in
// the loss (the reference detection loss never used it); val=false marks the
// summary as not validated. Tiny synthetic dataset, model "t", imgsz 64,
// threads=1, a few iterations.
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/env.h"
#include "model/weights.h"
#include "model/yolo.h"
#include "store/metadata_store.h"
#include "tiny_train.h"
#include "train/trainer.h"

namespace kestrel::train {
namespace {

namespace fs = std::filesystem;

class TrainerStartTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(fs::temp_directory_path() /
                            ("kestrel_trainer_start_test_" + std::to_string(getpid())));
    fs::remove_all(*root_);
    testing::ImportTinyDataset(Home(), *root_ + "/tiny", "tiny");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*root_);
    delete root_;
  }
  static std::string Home() { return *root_ + "/home"; }

  // One epoch of 4 batches of 2 (tiny_train.h) in project=<root>/runs
  // name=`name`, no validation.
  static TrainOptions Tiny(const std::string& name) {
    TrainOptions o = testing::TinyRunOptions(Home(), "tiny", 1);
    o.project = *root_ + "/runs";
    o.name = name;
    o.val = false;
    return o;
  }

  static std::string* root_;
};
std::string* TrainerStartTest::root_ = nullptr;

TEST_F(TrainerStartTest, StartThatFailsLeavesNoRunFolder) {
  // Weights that are not a weights file.
  const std::string junk = *root_ + "/junk.safetensors";
  std::ofstream(junk) << "not safetensors";
  TrainOptions o = Tiny("junk");
  o.pretrained = junk;
  auto r = Train(o, {});
  ASSERT_FALSE(r.IsOk());
  EXPECT_FALSE(fs::exists(*root_ + "/runs/junk")) << r.GetStatus().ToString();

  // Weights of another architecture (model=s, file of model t): a config
  // error found at start, after the dataset and the run folder's name.
  const std::string t_weights = *root_ + "/t.safetensors";
  {
    auto m = model::CreateModel("t", 2);
    ASSERT_TRUE(m.IsOk()) << m.GetStatus().ToString();
    ASSERT_TRUE(model::SaveWeights(**m, t_weights, {}).IsOk());
  }
  o = Tiny("other_arch");
  o.model = "s";
  o.pretrained = t_weights;
  r = Train(o, {});
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().Message().find("weights do not match"), std::string::npos)
      << r.GetStatus().ToString();
  EXPECT_FALSE(fs::exists(*root_ + "/runs/other_arch"));
  EXPECT_FALSE(fs::exists(*root_ + "/runs")) << "nothing at all was created";

  // The same start with good weights makes the folder (and only then).
  o = Tiny("ok");
  o.pretrained = t_weights;
  TrainHooks hooks;
  hooks.halt_after_iterations = 1;
  r = Train(o, hooks);
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(fs::is_regular_file(*root_ + "/runs/ok/args.yaml"));
  EXPECT_TRUE(fs::is_directory(*root_ + "/runs/ok/weights"));
}

TEST_F(TrainerStartTest, RunThatFailsBeforeItsFirstCheckpointRemovesOnlyTheFolderItMade) {
  TrainHooks boom;
  boom.before_forward = [](int64_t, int) { TORCH_CHECK(false, "injected torch error"); };
  auto r = Train(Tiny("first_step"), boom);
  ASSERT_FALSE(r.IsOk());
  EXPECT_NE(r.GetStatus().Message().find("injected"), std::string::npos) << r.GetStatus().ToString();
  EXPECT_FALSE(fs::exists(*root_ + "/runs/first_step")) << "args.yaml and train_batch0.jpg of a failed start";

  // A folder that was there (exist_ok=true) stays, with what it held.
  fs::create_directories(*root_ + "/runs/mine");
  std::ofstream(*root_ + "/runs/mine/notes.txt") << "the user's";
  TrainOptions o = Tiny("mine");
  o.exist_ok = true;
  r = Train(o, boom);
  ASSERT_FALSE(r.IsOk());
  EXPECT_TRUE(fs::is_regular_file(*root_ + "/runs/mine/notes.txt"));
  EXPECT_TRUE(fs::is_regular_file(*root_ + "/runs/mine/args.yaml"));
}

TEST_F(TrainerStartTest, LabelSmoothingIsDeprecatedWarnedAboutAndLeavesTheLossUnchanged) {
  auto losses = [](TrainOptions o, TrainSummary* summary, std::string* printed) {
    std::vector<std::array<double, 3>> items;
    std::ostringstream out;
    TrainHooks hooks;
    hooks.out = &out;
    hooks.halt_after_iterations = 3;
    hooks.on_iteration_report = [&](const IterationReport& it) { items.push_back(it.loss); };
    auto r = Train(o, hooks);
    EXPECT_TRUE(r.IsOk()) << r.GetStatus().ToString();
    if (r.IsOk()) *summary = *r;
    *printed = out.str();
    return items;
  };
  TrainSummary plain, smoothed;
  std::string plain_out, smoothed_out;
  TrainOptions o = Tiny("ls0");
  const auto base = losses(o, &plain, &plain_out);
  o = Tiny("ls1");
  o.label_smoothing = 0.1;
  const auto with = losses(o, &smoothed, &smoothed_out);
  ASSERT_EQ(base.size(), 3u);
  // Bit for bit: the key reaches no tensor. (Before, every anchor's and
  // class's negative target became 0.05: cls loss in the thousands.)
  EXPECT_EQ(with, base);
  for (const auto& it : with) EXPECT_LT(it[1], 50.0) << "cls loss";

  EXPECT_TRUE(plain.warnings.empty());
  ASSERT_EQ(smoothed.warnings.size(), 1u);
  EXPECT_NE(smoothed.warnings[0].find("label_smoothing=0.1 is deprecated and has no effect"),
            std::string::npos)
      << smoothed.warnings[0];
  EXPECT_NE(smoothed_out.find("warning: label_smoothing=0.1 is deprecated"), std::string::npos)
      << smoothed_out;
  // The user's value is stored with the effective config, not rewritten.
  const std::string args = Env::Default().ReadFile(*root_ + "/runs/ls1/args.yaml").Value();
  EXPECT_NE(args.find("label_smoothing: 0.1"), std::string::npos) << args;
}

TEST_F(TrainerStartTest, ValFalseMarksTheSummaryNotValidated) {
  auto r = Train(Tiny("noval"), {});
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_FALSE(r->validated);
  EXPECT_EQ(r->not_validated, "val=false");
  EXPECT_EQ(r->best_epoch, 1);  // the lowest train loss

  TrainOptions o = Tiny("val");
  o.val = true;
  r = Train(o, {});
  ASSERT_TRUE(r.IsOk()) << r.GetStatus().ToString();
  EXPECT_TRUE(r->validated);
  EXPECT_EQ(r->not_validated, "");
}

}  // namespace
}  // namespace kestrel::train
