// The optimizer schedule against the reference trainer's rows
// (schedule_yolov8n_coco128.json: YOLOv8n, coco128, batch 16, 20 epochs,
// optimizer=auto -> AdamW and optimizer=SGD), plus resume and edge cases.
#include "train/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace kestrel::train {
namespace {

std::string FixturePath(const std::string& name) {
  const std::string repo = std::string(KESTREL_SOURCE_DIR) + "/tests/train/data/" + name;
  if (std::filesystem::exists(repo)) return repo;
  return std::string(KESTREL_SHARED_DIR) + "/reference/" + name;
}

// The fixture stores numpy-rounded values: rint(x * 1e10) / 1e10.
double Round10(double x) { return std::nearbyint(x * 1e10) / 1e10; }

struct ReferenceRun {
  OptimizerOptions options;
  RunShape shape;
  nlohmann::json rows;
  std::string optimizer_class;
  int accumulate_final = 0;
};

ReferenceRun LoadRun(const std::string& name) {
  ReferenceRun run;
  const std::string path = FixturePath("schedule_yolov8n_coco128.json");
  std::ifstream in(path);
  if (!in) return run;
  const auto all = nlohmann::json::parse(in);
  const auto& r = all.at("runs").at(name);
  const auto& args = r.at("args");
  run.options.optimizer = args.at("optimizer").get<std::string>();
  run.shape.epochs = args.at("epochs").get<int>();
  run.shape.batch_size = args.at("batch").get<int>();
  run.shape.num_classes = args.at("nc").get<int>();
  run.shape.num_train_images = args.at("train_images").get<int64_t>();
  run.shape.batches_per_epoch = args.at("batches_per_epoch").get<int64_t>();
  run.rows = r.at("rows");
  run.optimizer_class = r.at("optimizer_class").get<std::string>();
  run.accumulate_final = r.at("accumulate_final").get<int>();
  return run;
}

// Compares one plan with one row exactly (after the fixture's rounding).
void ExpectRow(const IterationPlan& p, const nlohmann::json& row) {
  SCOPED_TRACE("iteration " + std::to_string(p.iteration));
  EXPECT_EQ(p.epoch, row.at("epoch").get<int>());
  EXPECT_EQ(p.iteration, row.at("iter").get<int64_t>());
  EXPECT_EQ(p.steps_taken, row.at("stepped_total").get<int64_t>());
  for (int g = 0; g < 3; ++g) {
    EXPECT_EQ(Round10(p.lr[g]), row.at("lr")[g].get<double>()) << "lr group " << g;
    EXPECT_EQ(Round10(p.weight_decay[g]), row.at("weight_decay")[g].get<double>()) << "wd " << g;
  }
  EXPECT_EQ(Round10(p.momentum), row.at("momentum").get<double>());
}

class ReferenceScheduleTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReferenceScheduleTest, ReproducesEveryRow) {
  const ReferenceRun run = LoadRun(GetParam());
  if (run.rows.empty()) GTEST_SKIP() << "schedule fixture not found";
  auto schedule = Schedule::Create(run.options, run.shape);
  ASSERT_TRUE(schedule.IsOk()) << schedule.GetStatus().ToString();
  EXPECT_EQ(OptimizerKindName(schedule->Optimizer().kind), run.optimizer_class);
  ASSERT_EQ(schedule->TotalIterations(), static_cast<int64_t>(run.rows.size()));
  EXPECT_EQ(schedule->WarmupIterations(), 100);
  IterationPlan last;
  for (const auto& row : run.rows) {
    ASSERT_FALSE(schedule->Done());
    last = schedule->Next();
    ExpectRow(last, row);
  }
  EXPECT_TRUE(schedule->Done());
  EXPECT_EQ(last.accumulate, run.accumulate_final);
}

TEST_P(ReferenceScheduleTest, ResumeAnywhereContinuesExactly) {
  const ReferenceRun run = LoadRun(GetParam());
  if (run.rows.empty()) GTEST_SKIP() << "schedule fixture not found";
  // Kill after iteration k (mid-epoch, mid-accumulation and at epoch ends), resume from JSON.
  for (int64_t k : {1, 7, 20, 50, 99, 100, 101, 139}) {
    auto first = Schedule::Create(run.options, run.shape);
    ASSERT_TRUE(first.IsOk());
    for (int64_t i = 0; i < k; ++i) first->Next();
    const std::string saved = ScheduleStateToJson(first->State());
    auto state = ScheduleStateFromJson(saved);
    ASSERT_TRUE(state.IsOk()) << state.GetStatus().ToString();
    auto resumed = Schedule::Create(run.options, run.shape, *state);
    ASSERT_TRUE(resumed.IsOk()) << resumed.GetStatus().ToString();
    for (int64_t i = k; i < static_cast<int64_t>(run.rows.size()); ++i) {
      ExpectRow(resumed->Next(), run.rows[static_cast<size_t>(i)]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Runs, ReferenceScheduleTest, ::testing::Values("auto", "sgd"));

RunShape SmallShape() {
  RunShape s;
  s.epochs = 10;
  s.batches_per_epoch = 50;
  s.num_train_images = 800;
  s.batch_size = 16;
  s.num_classes = 3;
  return s;
}

TEST(ScheduleTest, AutoPicksAdamWForShortRunsAndSgdForLongOnes) {
  OptimizerOptions o;
  RunShape s = SmallShape();
  auto r = ResolveOptimizer(o, s);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->kind, OptimizerKind::kAdamW);
  EXPECT_DOUBLE_EQ(r->lr, 0.001429);  // round(0.01 / 7, 6)
  EXPECT_EQ(r->momentum, 0.9);
  EXPECT_EQ(r->warmup_bias_lr, 0.0);
  s.num_train_images = 64 * 1001;  // 1001 iterations * 10 epochs > 10000
  r = ResolveOptimizer(o, s);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->kind, OptimizerKind::kSgd);
  EXPECT_EQ(r->lr, 0.01);
  EXPECT_TRUE(r->nesterov);
}

TEST(ScheduleTest, AutoSgdWarmsMomentumTowardsTheOptionNotItsOwnValue) {
  // Reference quirk: auto-SGD is built with momentum 0.9, but warmup
  // interpolates warmup_momentum -> the momentum option (0.937) and leaves it there.
  OptimizerOptions o;
  RunShape s = SmallShape();
  s.num_train_images = 64 * 1001;
  s.batches_per_epoch = 4004;
  auto schedule = Schedule::Create(o, s);
  ASSERT_TRUE(schedule.IsOk());
  EXPECT_EQ(schedule->Optimizer().kind, OptimizerKind::kSgd);
  EXPECT_EQ(schedule->Optimizer().momentum, 0.9);
  const IterationPlan p0 = schedule->Next();
  EXPECT_EQ(p0.momentum, 0.8);
  EXPECT_EQ(p0.lr[0], 0.0);  // auto forces warmup_bias_lr = 0
  while (schedule->State().next_iteration < schedule->WarmupIterations() + 5) schedule->Next();
  EXPECT_EQ(schedule->Next().momentum, 0.937);
}

TEST(ScheduleTest, WeightDecayScalesWithBatchTimesAccumulate) {
  OptimizerOptions o;
  o.optimizer = "sgd";
  RunShape s = SmallShape();
  s.batch_size = 24;  // accumulate = round(64/24 = 2.67) = 3 -> 5e-4 * 72 / 64
  auto r = ResolveOptimizer(o, s);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->base_accumulate, 3);
  EXPECT_DOUBLE_EQ(r->weight_decay, 5e-4 * 24 * 3 / 64);
  s.batch_size = 128;  // larger than nbs: accumulate 1
  r = ResolveOptimizer(o, s);
  ASSERT_TRUE(r.IsOk());
  EXPECT_EQ(r->base_accumulate, 1);
  EXPECT_DOUBLE_EQ(r->weight_decay, 1e-3);
}

TEST(ScheduleTest, AccumulateRoundsHalfToEvenLikeNumpy) {
  // nbs/batch = 4 over nw = 100: interp at ni = 50 is exactly 2.5 -> 2.
  OptimizerOptions o;
  o.optimizer = "SGD";
  RunShape s = SmallShape();
  s.batches_per_epoch = 30;  // nw = max(round(3 * 30), 100) = 100
  auto schedule = Schedule::Create(o, s);
  ASSERT_TRUE(schedule.IsOk());
  ASSERT_EQ(schedule->WarmupIterations(), 100);
  std::vector<int> acc;
  while (!schedule->Done()) acc.push_back(schedule->Next().accumulate);
  EXPECT_EQ(acc[0], 1);
  EXPECT_EQ(acc[16], 1);  // 1.48
  EXPECT_EQ(acc[17], 2);  // 1.51
  EXPECT_EQ(acc[50], 2);  // 2.5 -> even
  EXPECT_EQ(acc[51], 3);
  EXPECT_EQ(acc[100], 4);
  EXPECT_EQ(acc[299], 4);
  EXPECT_EQ(RoundHalfEven(0.5), 0);
  EXPECT_EQ(RoundHalfEven(1.5), 2);
  EXPECT_EQ(RoundHalfEven(2.5), 2);
}

TEST(ScheduleTest, LinearAndCosineFactors) {
  OptimizerOptions o;
  RunShape s = SmallShape();
  auto lin = Schedule::Create(o, s);
  ASSERT_TRUE(lin.IsOk());
  EXPECT_DOUBLE_EQ(lin->LrFactor(0), 1.0);
  EXPECT_DOUBLE_EQ(lin->LrFactor(5), 0.5 * 0.99 + 0.01);
  EXPECT_DOUBLE_EQ(lin->LrFactor(10), 0.01);
  o.cos_lr = true;
  auto cos = Schedule::Create(o, s);
  ASSERT_TRUE(cos.IsOk());
  EXPECT_DOUBLE_EQ(cos->LrFactor(0), 1.0);
  EXPECT_NEAR(cos->LrFactor(5), 0.505, 1e-12);
  EXPECT_NEAR(cos->LrFactor(10), 0.01, 1e-12);
}

TEST(ScheduleTest, NoWarmupUsesEpochFactorAndBaseValuesFromTheStart) {
  OptimizerOptions o;
  o.optimizer = "SGD";
  o.warmup_epochs = 0;
  RunShape s = SmallShape();
  auto schedule = Schedule::Create(o, s);
  ASSERT_TRUE(schedule.IsOk());
  EXPECT_EQ(schedule->WarmupIterations(), -1);
  const IterationPlan p0 = schedule->Next();
  EXPECT_EQ(p0.accumulate, 4);
  EXPECT_EQ(p0.lr[0], 0.01);
  EXPECT_EQ(p0.momentum, 0.937);
  EXPECT_FALSE(p0.optimizer_step);                // 0 - (-1) < 4
  EXPECT_FALSE(schedule->Next().optimizer_step);  // ni 1
  EXPECT_FALSE(schedule->Next().optimizer_step);  // ni 2
  const IterationPlan p3 = schedule->Next();      // ni 3: 3 - (-1) >= 4
  EXPECT_TRUE(p3.optimizer_step);
  EXPECT_EQ(p3.steps_taken, 1);
  for (int i = 4; i < 50; ++i) schedule->Next();
  EXPECT_EQ(schedule->Next().lr[1], 0.01 * (0.9 * 0.99 + 0.01));  // epoch 1
}

TEST(ScheduleTest, RejectsBadOptionsByField) {
  OptimizerOptions o;
  o.optimizer = "lion";
  auto r = ResolveOptimizer(o, SmallShape());
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Where().field, "optimizer");
  o = OptimizerOptions();
  RunShape s = SmallShape();
  s.batches_per_epoch = 0;
  r = ResolveOptimizer(o, s);
  ASSERT_FALSE(r.IsOk());
  EXPECT_EQ(r.GetStatus().Where().field, "batches_per_epoch");
  ScheduleState bad;
  bad.next_iteration = 10;
  bad.last_step_iteration = 10;
  auto sch = Schedule::Create(o, SmallShape(), bad);
  ASSERT_FALSE(sch.IsOk());
  EXPECT_EQ(sch.GetStatus().Where().field, "last_step_iteration");
  EXPECT_FALSE(ScheduleStateFromJson("{\"next_iteration\": 1}").IsOk());
  EXPECT_FALSE(ScheduleStateFromJson("not json").IsOk());
}

TEST(ScheduleTest, OptionsBindUnderUltralyticsKeys) {
  OptimizerOptions o;
  OptionSet set;
  o.Bind(set);
  ASSERT_TRUE(set.ApplyArgs({"optimizer=AdamW", "lr0=0.002", "cos_lr=true", "nbs=32"}).IsOk());
  EXPECT_EQ(o.optimizer, "AdamW");
  EXPECT_EQ(o.lr0, 0.002);
  EXPECT_TRUE(o.cos_lr);
  EXPECT_EQ(o.nbs, 32);
}

}  // namespace
}  // namespace kestrel::train
